/* hr_proto_rpc.c - the request/response exchange: client calls (including
 * RFP's fetch loop and its switch to server-reply and back) and the server's
 * receive and reply. One cgo crossing per call on each side. */
#define _GNU_SOURCE
#include "hr_proto_int.h"

#include <stddef.h>
#include <string.h>

enum { RFP_FETCH = 0, RFP_REPLY = 1 };
/* RF-RPC switches to server-reply only after this many consecutive calls
 * needed more than R retries, so one slow request does not flip the mode. */
#define RFP_SWITCH_AFTER 2

static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX : hr_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

static int begin(hr_ep *ep, int timeout_ms, uint32_t gen)
{
	if (ep->broken || !ep->have_peer)
		return HR_ESTATE;
	if (ep->parked) {
		/* A parked call left unresumed has its reply on the way: no
		 * other exchange can run on this endpoint any more. A parked
		 * receive had nothing in hand. */
		if (ep->parked == EP_PARK_CALL)
			return hrp_fail(ep, HR_ESTATE);
		hrp_unpark(ep);
	}
	ep->gen = gen;
	ep->deadline = deadline_of(timeout_ms);
	ep->deadline_started = 0;
	/* A deadline just set at least 1 ms ahead cannot have passed: only the
	 * abort and cancel flags are looked at, which saves a clock read (~30
	 * ns on a VM) on every call and reply. */
	return timeout_ms > 0 ? hrp_check_flags(ep) : hrp_check(ep);
}

static int read_into(hr_ep *ep, uint8_t *dst, uint64_t len, uint64_t raddr, uint32_t rkey, uint64_t *ns)
{
	hr_send_wr wr;
	memset(&wr, 0, sizeof wr);
	wr.opcode = HR_OP_RDMA_READ;
	wr.num_sge = len ? 1 : 0;
	wr.sg[0].addr = (uint64_t)(uintptr_t)dst;
	wr.sg[0].length = (uint32_t)len;
	wr.sg[0].lkey = ep->rx.mr->lkey;
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	uint64_t t0 = hr_now_ns();
	int st = hrp_post(ep, &wr, 1);
	if (st == HR_OK)
		st = hrp_wait_read(ep, wr.wr_id);
	if (ns)
		*ns = hr_now_ns() - t0;
	return st;
}

/* RFP: READ F bytes of the server's response buffer until the response for
 * this call is there, then READ whatever did not fit. The server posts
 * nothing. */
static int rfp_fetch(hr_ep *ep, void **resp, uint64_t *resp_len)
{
	uint64_t f = ep->cfg.rfp_fetch;
	if (f > HR_MSG_HDR + (uint64_t)ep->peer.resp_len + HR_MSG_TAIL)
		f = HR_MSG_HDR + (uint64_t)ep->peer.resp_len + HR_MSG_TAIL;
	int st = hrp_region_ensure(ep, &ep->rx, f, 0);
	if (st != HR_OK)
		return hrp_fail(ep, st);
	uint32_t tries = 0;
	int exceeded = 0;
	for (;;) {
		uint64_t ns;
		if ((st = read_into(ep, ep->rx.p, f, ep->peer.resp_addr, ep->peer.resp_rkey, &ns)) != HR_OK)
			return st;
		ep->st.rfp_fetches++;
		/* The estimate decides when fetching would cover the server's
		 * time again: a READ that stalled because this thread lost its
		 * CPU says nothing about fetching, so samples are clamped. */
		if (ep->st.fetch_ns && ns > 4 * ep->st.fetch_ns)
			ns = 4 * ep->st.fetch_ns;
		ep->st.fetch_ns = ep->st.fetch_ns ? (ep->st.fetch_ns * 7 + ns) / 8 : ns;
		hr_msg h;
		memcpy(&h, ep->rx.p, sizeof h);
		int ok = h.type == HRM_RESP && h.seq == ep->seq && h.sum == hrp_msg_sum(&h) &&
			 h.len <= ep->cfg.max_msg;
		if (ok && h.addr == 0) {
			uint64_t total = HR_MSG_HDR + h.len + HR_MSG_TAIL;
			if (h.len > ep->peer.resp_len)
				return hrp_fail(ep, HR_EIO);
			if (total > f) {
				if ((st = hrp_region_ensure(ep, &ep->rx, total, f)) != HR_OK)
					return hrp_fail(ep, st);
				st = read_into(ep, ep->rx.p + f, total - f, ep->peer.resp_addr + f,
					       ep->peer.resp_rkey, NULL);
				if (st != HR_OK)
					return st;
				ep->st.rfp_rest_reads++;
			}
			/* A READ racing the server's local copy may be torn: only
			 * a matching canary and payload sum make it a response. */
			ok = hrp_payload_ok(&h, ep->rx.p + HR_MSG_HDR);
		} else if (ok) {
			/* Too large for the response buffer: the header points into
			 * the server's pool, filled before the header was. */
			if ((st = hrp_region_ensure(ep, &ep->rx, HR_MSG_HDR + h.len, 0)) != HR_OK)
				return hrp_fail(ep, st);
			st = read_into(ep, ep->rx.p + HR_MSG_HDR, h.len, h.addr, h.rkey, NULL);
			if (st != HR_OK)
				return st;
			ep->st.rfp_rest_reads++;
		}
		if (ok) {
			*resp = ep->rx.p + HR_MSG_HDR;
			*resp_len = h.len;
			break;
		}
		ep->st.rfp_retries++;
		if (++tries > ep->cfg.rfp_retries && !exceeded) {
			exceeded = 1;
			ep->st.rfp_exceeded++;
		}
		if ((st = hrp_check(ep)) != HR_OK)
			return hrp_fail(ep, st);
	}
	/* This call keeps fetching (its response will be published); later ones
	 * wait for the server to send. */
	if (!exceeded) {
		ep->rfp_over = 0;
	} else if (++ep->rfp_over >= RFP_SWITCH_AFTER) {
		ep->rfp_mode = RFP_REPLY;
		ep->rfp_over = 0;
		ep->st.rfp_to_reply++;
	}
	return HR_OK;
}

static int call_done(hr_ep *ep)
{
	hrp_wait_end(ep);
	ep->st.calls++;
	return HR_OK;
}

/* A sent call's wait for its reply (not fetched): from the send, or from a
 * resume after it parked. */
static int call_wait(hr_ep *ep, uint32_t proto, void **resp, uint64_t *resp_len)
{
	hr_msg h;
	uint8_t *p = NULL;
	int st = hrp_recv_msg(ep, 0, ep->seq, &h, &p, resp_len);
	if (st == HR_EP_PARKED) {
		ep->parked = EP_PARK_CALL;
		ep->park_proto = proto;
		return st;
	}
	if (st != HR_OK)
		return hrp_fail(ep, st);
	*resp = p;
	if (proto == HR_PROTO_RFP) {
		/* Server-reply: go back to fetching once the server's time
		 * fits in R fetches again. */
		ep->st.rfp_reply_calls++;
		ep->st.last_server_ns = h.server_ns;
		if (!ep->cfg.rfp_stay_reply && h.server_ns <= (uint64_t)ep->cfg.rfp_retries * ep->st.fetch_ns) {
			ep->rfp_mode = RFP_FETCH;
			ep->st.rfp_to_fetch++;
		}
	}
	return call_done(ep);
}

int hr_ep_call(hr_ep *ep, uint32_t proto, const void *req, uint64_t len, int timeout_ms, uint32_t gen,
	       void **resp, uint64_t *resp_len)
{
	/* Refused before anything is sent, so the endpoint stays usable. */
	if (proto >= HR_PROTO_COUNT || !resp || !resp_len || (len && !req) || len > ep->cfg.max_msg)
		return HR_EINVAL;
	int st = begin(ep, timeout_ms > 0 ? -1 : timeout_ms, gen);
	if (st != HR_OK)
		return st;
	if (timeout_ms > 0) {
		/* Fixed at the first clock read of the wait, which the spin or
		 * the first deadline check makes anyway: a call answered at
		 * once reads no clock (~30 ns a read on a VM). */
		ep->deadline = 0;
		ep->deadline_ms = (uint64_t)timeout_ms;
	}
	/* A call's reply is worth a fresh spin; a server's wait is not reset
	 * by its idle slices, so an idle lane stops spinning spin_ns after its
	 * last completion and blocks until the next request. */
	ep->spin_until = 0;
	hrp_wait_begin(ep);
	ep->seq++;
	/* One writer (this call): a relaxed store of the whole count, as
	 * hrp_count_sent. */
	__atomic_store_n(&ep->asked[proto], ep->asked[proto] + 1, __ATOMIC_RELAXED);
	int fetch = proto == HR_PROTO_RFP && ep->rfp_mode == RFP_FETCH;
	if ((st = hrp_send_msg(ep, proto, req, len, fetch ? HRM_F_FETCH : 0, 0)) != HR_OK)
		return hrp_fail(ep, st);
	if (fetch) {
		st = rfp_fetch(ep, resp, resp_len);
		if (st != HR_OK)
			return hrp_fail(ep, st);
		return call_done(ep);
	}
	return call_wait(ep, proto, resp, resp_len);
}

int hr_ep_call_resume(hr_ep *ep, void **resp, uint64_t *resp_len)
{
	if (!resp || !resp_len)
		return HR_EINVAL;
	if (ep->parked != EP_PARK_CALL)
		return HR_ESTATE;
	hrp_unpark(ep);
	/* The call's gen, deadline and spin state are as it left them. */
	int st = hrp_check(ep);
	if (st != HR_OK)
		return hrp_fail(ep, st);
	return call_wait(ep, ep->park_proto, resp, resp_len);
}

/* A server's wait for its next request: from hr_ep_recv, or from a resume
 * after it parked. */
static int recv_wait(hr_ep *ep, void **req, uint64_t *len)
{
	hr_msg h;
	uint8_t *p;
	/* A runtime's call start (hr_ep_time_arrivals) is the wait's last
	 * clock read before the request was seen, at most EP_SEEN_EVERY empty
	 * polls earlier (hrp_wait_seen): read while nothing had come, so no
	 * clock read lies between the request and its handler (~20-80 ns a
	 * call, history.md). A wait that armed its channel, yielded or parked
	 * since its last read has none, and reads the clock on the way as
	 * before. */
	ep->stamp_wait = ep->time_arrivals;
	ep->t_seen = 0;
	ep->seen_polls = 0;
	/* A busy-polling server also watches its pre-known buffer for RFP
	 * requests, which arrive without any completion. */
	int st = hrp_recv_msg(ep, !ep->cfg.event, ep->seq + 1, &h, &p, len);
	ep->stamp_wait = 0;
	if (st == HR_EP_PARKED)
		ep->parked = EP_PARK_RECV;
	if (st != HR_OK)
		return st;
	hrp_wait_end(ep);
	*req = p;
	ep->pending = 1;
	ep->pend_flags = h.flags;
	ep->pend_rfp = h.proto == HR_PROTO_RFP;
	/* The clock is read on the way to the handler only when someone
	 * uses the time and the wait has no recent read: an RFP reply's
	 * server time (exact: the client subtracts it), or a runtime's call
	 * start. */
	if (ep->pend_rfp || (ep->time_arrivals && !ep->t_seen))
		ep->t_req = hr_now_ns();
	else if (ep->time_arrivals)
		ep->t_req = ep->t_seen;
	return HR_OK;
}

int hr_ep_recv(hr_ep *ep, int idle_ms, int timeout_ms, uint32_t gen, void **req, uint64_t *len)
{
	if (!req || !len)
		return HR_EINVAL;
	if (ep->pending)
		return HR_ESTATE;
	int st = begin(ep, timeout_ms, gen);
	if (st != HR_OK)
		return st;
	if (ep->deadline == UINT64_MAX && idle_ms >= 0) {
		/* Only the idle slice bounds the wait: as a call's deadline, it
		 * is fixed at the wait's first clock read, so a server whose
		 * next request is there (or comes within the first polls) reads
		 * no clock between its reply and that request. */
		ep->deadline_started = UINT64_MAX;
		ep->deadline = 0;
		ep->deadline_ms = (uint64_t)idle_ms;
	} else {
		uint64_t idle = deadline_of(idle_ms);
		if (idle < ep->deadline) {
			ep->deadline_started = ep->deadline;
			ep->deadline = idle;
		}
	}
	hrp_wait_begin(ep);
	return recv_wait(ep, req, len);
}

int hr_ep_recv_resume(hr_ep *ep, void **req, uint64_t *len)
{
	if (!req || !len)
		return HR_EINVAL;
	if (ep->parked != EP_PARK_RECV)
		return HR_ESTATE;
	hrp_unpark(ep);
	/* Nothing of a request is in hand: a timeout (the idle slice's) or
	 * a cancel leaves the endpoint intact, as in hr_ep_recv. */
	int st = hrp_check(ep);
	if (st != HR_OK)
		return st;
	return recv_wait(ep, req, len);
}

/* RFP: leave the response in the response buffer (or, too large, in the
 * pool with the header pointing at it) for the client to READ. The header
 * goes last so a fetch that sees it sees the data. */
static int rfp_publish(hr_ep *ep, const void *resp, uint64_t len, uint64_t server_ns)
{
	hr_msg h;
	memset(&h, 0, sizeof h);
	uint8_t *dst = ep->resp.p + HR_MSG_HDR;
	if (len <= ep->cfg.resp_size) {
		if (len && resp != dst)
			memmove(dst, resp, len); /* may be part of the lease */
		h.canary = hrp_sum(dst, len, ep->seq);
		memcpy(dst + len, &h.canary, HR_MSG_TAIL);
	} else {
		int st = hrp_stage(ep, resp, len, 0);
		if (st != HR_OK)
			return hrp_fail(ep, st);
		h.addr = (uint64_t)(uintptr_t)(ep->tx.p + HR_MSG_HDR);
		h.rkey = ep->tx.mr->rkey;
	}
	h.type = HRM_RESP;
	h.len = len;
	h.seq = ep->seq;
	h.proto = HR_PROTO_RFP;
	h.server_ns = server_ns;
	h.sum = hrp_msg_sum(&h);
	/* sum is the last field and is stored with release: a fetch that sees
	 * it sees the payload and the rest of the header (or fails the sum). */
	_Static_assert(offsetof(hr_msg, sum) + sizeof h.sum == sizeof h, "sum must be last");
	hr_msg *dst_h = (hr_msg *)(void *)ep->resp.p;
	memcpy(dst_h, &h, offsetof(hr_msg, sum));
	__atomic_store_n(&dst_h->sum, h.sum, __ATOMIC_RELEASE);
	hrp_count_sent(ep, HR_PROTO_RFP);
	return HR_OK;
}

int hr_ep_reply(hr_ep *ep, uint32_t proto, const void *resp, uint64_t len, int timeout_ms, uint32_t gen)
{
	if (proto >= HR_PROTO_COUNT || (len && !resp))
		return HR_EINVAL;
	if (!ep->pending)
		return HR_ESTATE;
	int st = begin(ep, timeout_ms, gen);
	if (st != HR_OK)
		return st;
	if (len > ep->cfg.max_msg)
		return HR_EINVAL;
	/* Only an RFP client reads the server's time (to pick fetching or
	 * server-reply): other replies skip the clock read. */
	uint64_t server_ns = ep->pend_rfp ? hr_now_ns() - ep->t_req : 0;
	if (ep->pend_flags & HRM_F_FETCH)
		st = rfp_publish(ep, resp, len, server_ns);
	else
		st = hrp_send_msg(ep, proto == HR_PROTO_RFP ? HR_PROTO_HYBRID : proto, resp, len, 0, server_ns);
	if (st != HR_OK)
		return hrp_fail(ep, st);
	ep->pending = 0;
	ep->st.served++;
	return HR_OK;
}

int hr_ep_reply_recv(hr_ep *ep, uint32_t proto, const void *resp, uint64_t len, int idle_ms, int timeout_ms,
		     uint32_t gen, int *replied, void **req, uint64_t *req_len)
{
	if (!replied)
		return HR_EINVAL;
	*replied = 0;
	int st = hr_ep_reply(ep, proto, resp, len, timeout_ms, gen);
	if (st != HR_OK)
		return st;
	*replied = 1;
	return hr_ep_recv(ep, idle_ms, timeout_ms, gen, req, req_len);
}

/* The lease the server may fill to answer without a copy: the response
 * buffer when the client fetches, the staging buffer otherwise. */
void *hr_ep_reply_buf(hr_ep *ep, uint64_t n)
{
	if (!ep->pending)
		return NULL;
	if ((ep->pend_flags & HRM_F_FETCH) && n <= ep->cfg.resp_size)
		return ep->resp.p + HR_MSG_HDR;
	return hr_ep_tx(ep, n);
}
