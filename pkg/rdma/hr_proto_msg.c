/* hr_proto_msg.c - the per-message state machines: how one side sends a
 * payload by a protocol, and how the other side takes it in (including the
 * rendezvous sub-exchanges that run on the receiver). Provider table only. */
#define _GNU_SOURCE
#include "hr_proto_int.h"

#include <string.h>

#define EP_CHECK_EVERY 64

static void hdr_init(hr_ep *ep, hr_msg *h, uint32_t type, uint32_t flags, uint64_t len, uint32_t proto,
		     uint64_t server_ns)
{
	memset(h, 0, sizeof *h);
	h->type = type;
	h->flags = flags;
	h->len = len;
	h->seq = ep->seq;
	h->proto = proto;
	h->server_ns = server_ns;
}

static int post_ctl_wr(hr_ep *ep, hr_msg *m, hr_send_wr *wr)
{
	uint8_t *p = hrp_ctl(ep);
	memcpy(p, m, sizeof *m);
	memset(wr, 0, sizeof *wr);
	wr->opcode = HR_OP_SEND;
	wr->num_sge = 1;
	wr->sg[0].addr = (uint64_t)(uintptr_t)p;
	wr->sg[0].length = HR_MSG_HDR;
	wr->sg[0].lkey = ep->ctl.mr->lkey;
	return HR_OK;
}

static int post_ctl(hr_ep *ep, hr_msg *m)
{
	hr_send_wr wr;
	post_ctl_wr(ep, m, &wr);
	return hrp_post(ep, &wr, 1);
}

static void set_sge(hr_send_wr *wr, const void *p, uint64_t len, uint32_t lkey)
{
	/* A zero-length transfer carries no SGE, as verbs allows. */
	wr->num_sge = len ? 1 : 0;
	wr->sg[0].addr = (uint64_t)(uintptr_t)p;
	wr->sg[0].length = (uint32_t)len;
	wr->sg[0].lkey = lkey;
}

/* Next message: from the receive ring or, when listening (busy-polling
 * server), an RFP request found in the pre-known buffer. *mem tells which. */
static int next_msg(hr_ep *ep, int listen_mem, hr_msg *h, uint8_t **payload, uint32_t *byte_len, int *mem)
{
	/* The slot of the message taken last time goes back only now: its
	 * receive record is a line the peer last read, and rewriting it costs a
	 * cross-core transfer that the next post's locked operations would wait
	 * for. Here the answer to that message has already been sent, so the
	 * transfer overlaps the wait. One of the (at least four) slots is out
	 * meanwhile; a peer that found none posted would only retry (RNR). */
	if (ep->repost_pending) {
		ep->repost_pending = 0;
		int st = hrp_repost(ep, ep->repost_slot);
		if (st != HR_OK)
			return hrp_fail(ep, st);
	}
	for (unsigned spin = 0;; spin++) {
		if (ep->arr_head != ep->arr_tail) {
			hrp_polls_end(ep);
			hr_arrival a = ep->arr[ep->arr_head % ep->cfg.nslots];
			ep->arr_head++;
			*mem = 0;
			*byte_len = a.byte_len;
			if (a.opcode == HR_WC_RECV) {
				uint8_t *s = hrp_slot(ep, a.slot);
				memcpy(h, s, sizeof *h);
				*payload = s + HR_MSG_HDR;
				if (a.byte_len < HR_MSG_HDR || (h->type == HRM_DATA && h->len > a.byte_len - HR_MSG_HDR))
					return hrp_fail(ep, HR_EIO);
			} else {
				memcpy(h, ep->direct.p, sizeof *h);
				*payload = ep->direct.p + HR_MSG_HDR;
				if (h->type != HRM_DATA || h->len != a.imm || h->len > ep->cfg.direct_size)
					return hrp_fail(ep, HR_EIO);
			}
			/* Re-posted at the next call (above): the payload stays
			 * leased at least until then. */
			ep->repost_slot = a.slot;
			ep->repost_pending = 1;
			return HR_OK;
		}
		if (listen_mem) {
			const hr_msg *d = (const hr_msg *)(const void *)ep->direct.p;
			uint64_t seq = __atomic_load_n(&d->seq, __ATOMIC_ACQUIRE);
			if (seq == ep->seq + 1) {
				memcpy(h, d, sizeof *h);
				uint8_t *p = ep->direct.p + HR_MSG_HDR;
				/* No completion says this WRITE has landed: only its
				 * sums do (a Direct-WriteIMM message seen here before
				 * its completion is left to the completion). */
				if (h->type == HRM_DATA && h->proto == HR_PROTO_RFP && h->seq == seq &&
				    h->len <= ep->cfg.direct_size && h->sum == hrp_msg_sum(h) && hrp_payload_ok(h, p)) {
					hrp_polls_end(ep);
					*payload = p;
					*mem = 1;
					*byte_len = 0;
					return HR_OK;
				}
			}
		}
		int r = hrp_progress(ep);
		if (r < 0)
			return -r;
		if (r == 0 && ep->stamp_wait)
			hrp_wait_seen(ep);
		/* Deadline and cancel are looked at after every wait on the
		 * channel, and once every EP_CHECK_EVERY polls while spinning:
		 * a clock read on every poll slows noticing the message (a
		 * timed server wait reads one every EP_SEEN_EVERY polls, which
		 * costs less than the read at its request it saves). The
		 * first look comes after EP_CHECK_EVERY empty polls, not at
		 * the first: a message that comes within them (a ping-pong's
		 * next request, a reply) is taken with no clock read. */
		if (r == 0 && (ep->slept || spin % EP_CHECK_EVERY == EP_CHECK_EVERY - 1)) {
			int st = hrp_check(ep);
			if (st != HR_OK)
				return st;
		}
	}
}

/* Waits for a control message of type want (0: a Read-RNDV release),
 * consuming releases on the way: they may precede anything. */
static int wait_ctl(hr_ep *ep, uint32_t want, hr_msg *h)
{
	for (;;) {
		uint8_t *p;
		uint32_t bl;
		int mem;
		int st = next_msg(ep, 0, h, &p, &bl, &mem);
		if (st != HR_OK)
			return hrp_fail(ep, st);
		if (h->type == HRM_FIN && (h->flags & HRM_F_RELEASE)) {
			ep->tx_busy = 0;
			if (want == 0)
				return HR_OK;
			continue;
		}
		if (want == 0 || h->type != want || h->seq != ep->seq)
			return hrp_fail(ep, HR_EIO);
		return HR_OK;
	}
}

/* Copies the payload into the staging buffer unless it is already there
 * (the Go side's lease), leaving room for the header and extra bytes. */
int hrp_stage(hr_ep *ep, const void *p, uint64_t len, uint64_t extra)
{
	if (ep->tx_busy) {
		hr_msg h;
		int st = wait_ctl(ep, 0, &h);
		if (st != HR_OK)
			return st;
	}
	const uint8_t *b = p;
	if (len && hrp_region_in(&ep->tx2, b)) {
		/* Filled in the spare while the last message went from tx: it
		 * goes from where it is, and tx, whose last message has landed
		 * (the peer answered it: one exchange at a time), is the spare
		 * the runtime fills next. */
		hr_region t = ep->tx;
		ep->tx = ep->tx2;
		ep->tx2 = t;
	}
	/* A payload inside the staging buffer (a lease, or part of one) must
	 * survive the buffer growing, and may overlap where it goes. */
	int inside = len && b >= ep->tx.p && b < ep->tx.p + ep->tx.cap;
	uint64_t off = inside ? (uint64_t)(b - ep->tx.p) : 0;
	int st = hrp_region_ensure(ep, &ep->tx, HR_MSG_HDR + len + extra, inside ? off + len : 0);
	if (st != HR_OK)
		return st;
	if (inside)
		b = ep->tx.p + off;
	if (len && b != ep->tx.p + HR_MSG_HDR)
		memmove(ep->tx.p + HR_MSG_HDR, b, len);
	return HR_OK;
}

static int send_write_rndv(hr_ep *ep, const void *p, uint64_t len, uint32_t flags, uint32_t proto,
			   uint64_t server_ns)
{
	int st = hrp_stage(ep, p, len, 0);
	if (st != HR_OK)
		return st;
	hr_msg m;
	hdr_init(ep, &m, HRM_RTS_W, flags, len, proto, server_ns);
	if ((st = post_ctl(ep, &m)) != HR_OK)
		return st;
	hr_msg cts;
	if ((st = wait_ctl(ep, HRM_CTS, &cts)) != HR_OK)
		return st;
	if (cts.len < len)
		return hrp_fail(ep, HR_EIO);
	/* WRITE and FIN in one post: RC ordering puts the data in place before
	 * the FIN's receive completion. */
	hr_send_wr wr[2];
	memset(&wr[0], 0, sizeof wr[0]);
	wr[0].opcode = HR_OP_RDMA_WRITE;
	set_sge(&wr[0], ep->tx.p + HR_MSG_HDR, len, ep->tx.mr->lkey);
	wr[0].remote_addr = cts.addr;
	wr[0].rkey = cts.rkey;
	hr_msg fin;
	hdr_init(ep, &fin, HRM_FIN, 0, len, proto, 0);
	post_ctl_wr(ep, &fin, &wr[1]);
	return hrp_post(ep, wr, 2);
}

static int send_read_rndv(hr_ep *ep, const void *p, uint64_t len, uint32_t flags, uint32_t proto,
			  uint64_t server_ns)
{
	int st = hrp_stage(ep, p, len, 0);
	if (st != HR_OK)
		return st;
	hr_msg m;
	hdr_init(ep, &m, HRM_RTS_R, flags, len, proto, server_ns);
	m.addr = (uint64_t)(uintptr_t)(ep->tx.p + HR_MSG_HDR);
	m.rkey = ep->tx.mr->rkey;
	/* The source stays leased to the peer until its FIN (release). */
	ep->tx_busy = 1;
	return post_ctl(ep, &m);
}

/* Eager: header and payload in one SEND into the peer's next slot. */
static int send_eager(hr_ep *ep, const void *p, uint64_t len, uint32_t flags, uint64_t server_ns)
{
	int st = hrp_stage(ep, p, len, 0);
	if (st != HR_OK)
		return st;
	hr_msg *h = (hr_msg *)(void *)ep->tx.p;
	hdr_init(ep, h, HRM_DATA, flags, len, HR_PROTO_EAGER, server_ns);
	hr_send_wr wr;
	memset(&wr, 0, sizeof wr);
	wr.opcode = HR_OP_SEND;
	set_sge(&wr, ep->tx.p, HR_MSG_HDR + len, ep->tx.mr->lkey);
	return hrp_post(ep, &wr, 1);
}

/* The Direct-* family and RFP requests: [header|payload] WRITTEN into the
 * peer's pre-known buffer, announced by SEND, by the immediate, or (RFP to a
 * busy-polling server) by nothing at all: then the header's sum and the
 * payload's canary, also written as a tail after it, tell it has landed. */
static int send_direct(hr_ep *ep, uint32_t proto, const void *p, uint64_t len, uint32_t flags,
		       uint64_t server_ns)
{
	int polled = proto == HR_PROTO_RFP && !ep->peer.event;
	int st = hrp_stage(ep, p, len, polled ? HR_MSG_TAIL : 0);
	if (st != HR_OK)
		return st;
	uint8_t *pay = ep->tx.p + HR_MSG_HDR;
	hr_msg *h = (hr_msg *)(void *)ep->tx.p;
	hdr_init(ep, h, HRM_DATA, flags, len, proto, server_ns);
	uint64_t total = HR_MSG_HDR + len;
	if (polled) {
		h->canary = hrp_sum(pay, len, ep->seq);
		memcpy(pay + len, &h->canary, HR_MSG_TAIL);
		total += HR_MSG_TAIL;
		h->sum = hrp_msg_sum(h);
	}
	hr_send_wr wr[2];
	memset(wr, 0, sizeof wr);
	wr[0].opcode = HR_OP_RDMA_WRITE;
	set_sge(&wr[0], ep->tx.p, total, ep->tx.mr->lkey);
	wr[0].remote_addr = ep->peer.direct_addr;
	wr[0].rkey = ep->peer.direct_rkey;
	if (proto == HR_PROTO_DIRECT_WRITE_IMM || (proto == HR_PROTO_RFP && ep->peer.event)) {
		/* An event-driven server cannot watch memory: the immediate
		 * (the length) wakes it without another operation. */
		wr[0].opcode = HR_OP_RDMA_WRITE_WITH_IMM;
		wr[0].imm = (uint32_t)len;
	}
	if (proto == HR_PROTO_DIRECT_WRITE_IMM || proto == HR_PROTO_RFP)
		return hrp_post(ep, wr, 1);
	hr_msg note;
	hdr_init(ep, &note, HRM_NOTE, flags, len, proto, server_ns);
	post_ctl_wr(ep, &note, &wr[1]);
	if (proto == HR_PROTO_CHAINED_WRITE_SEND)
		return hrp_post(ep, wr, 2);
	if ((st = hrp_post(ep, &wr[0], 1)) != HR_OK)
		return st;
	return hrp_post(ep, &wr[1], 1);
}

int hrp_send_msg(hr_ep *ep, uint32_t proto, const void *p, uint64_t len, uint32_t flags, uint64_t server_ns)
{
	if (len > ep->cfg.max_msg)
		return HR_EINVAL;
	uint32_t eff = proto;
	switch (proto) {
	case HR_PROTO_HYBRID:
		eff = len <= ep->cfg.eager_threshold && len <= ep->peer.slot_size ? HR_PROTO_EAGER
										    : HR_PROTO_WRITE_RNDV;
		break;
	case HR_PROTO_EAGER:
		if (len > ep->peer.slot_size)
			eff = HR_PROTO_WRITE_RNDV;
		break;
	case HR_PROTO_DIRECT_WRITE_SEND:
	case HR_PROTO_CHAINED_WRITE_SEND:
	case HR_PROTO_DIRECT_WRITE_IMM:
	case HR_PROTO_RFP:
		if (len > ep->peer.direct_len)
			eff = HR_PROTO_WRITE_RNDV;
		break;
	case HR_PROTO_WRITE_RNDV:
	case HR_PROTO_READ_RNDV:
		break;
	default:
		return HR_EINVAL;
	}
	if (eff != proto && proto != HR_PROTO_HYBRID)
		ep->st.rndv_fallbacks++;
	int st;
	switch (eff) {
	case HR_PROTO_EAGER:
		st = send_eager(ep, p, len, flags, server_ns);
		break;
	case HR_PROTO_WRITE_RNDV:
		st = send_write_rndv(ep, p, len, flags, proto, server_ns);
		break;
	case HR_PROTO_READ_RNDV:
		st = send_read_rndv(ep, p, len, flags, proto, server_ns);
		break;
	default:
		st = send_direct(ep, eff, p, len, flags, server_ns);
	}
	if (st == HR_OK)
		hrp_count_sent(ep, eff);
	return st;
}

/* Receives one data message, running the receiver's half of a rendezvous.
 * A timeout before anything arrived is returned without breaking the
 * endpoint (an idle server); any later failure breaks it. */
int hrp_recv_msg(hr_ep *ep, int listen_mem, uint64_t want_seq, hr_msg *h, uint8_t **payload, uint64_t *len)
{
	uint8_t *p;
	uint32_t bl;
	int mem, st;
	/* Until a message is taken the wait may park (hr_ep_set_park): a
	 * resume starts it over, nothing of this message being in hand. */
	ep->park_here = 1;
	for (;;) {
		st = next_msg(ep, listen_mem, h, &p, &bl, &mem);
		if (st != HR_OK) {
			ep->park_here = 0;
			return st;
		}
		if (h->type == HRM_FIN && (h->flags & HRM_F_RELEASE)) {
			ep->tx_busy = 0;
			continue;
		}
		break;
	}
	ep->park_here = 0;
	ep->stamp_wait = 0; /* the request's first message is seen: its stamp is kept */
	if (ep->deadline_started) {
		ep->deadline = ep->deadline_started;
		ep->deadline_started = 0;
	}
	if (h->seq != want_seq || h->len > ep->cfg.max_msg)
		return hrp_fail(ep, HR_EIO);
	/* From here on every message of this call carries its seq. */
	ep->seq = h->seq;
	switch (h->type) {
	case HRM_DATA:
		*payload = p;
		*len = h->len;
		return HR_OK;
	case HRM_NOTE: {
		hr_msg d;
		memcpy(&d, ep->direct.p, sizeof d);
		/* The WRITE went before this SEND on the QP: it has landed. */
		if (d.type != HRM_DATA || d.seq != h->seq || d.len != h->len || d.len > ep->cfg.direct_size)
			return hrp_fail(ep, HR_EIO);
		*payload = ep->direct.p + HR_MSG_HDR;
		*len = h->len;
		return HR_OK;
	}
	case HRM_RTS_W: {
		if ((st = hrp_region_ensure(ep, &ep->rx, h->len, 0)) != HR_OK)
			return hrp_fail(ep, st);
		hr_msg cts;
		hdr_init(ep, &cts, HRM_CTS, 0, ep->rx.cap, h->proto, 0);
		cts.addr = (uint64_t)(uintptr_t)ep->rx.p;
		cts.rkey = ep->rx.mr->rkey;
		if ((st = post_ctl(ep, &cts)) != HR_OK)
			return st;
		hr_msg fin;
		if ((st = wait_ctl(ep, HRM_FIN, &fin)) != HR_OK)
			return st;
		if (fin.len != h->len)
			return hrp_fail(ep, HR_EIO);
		*payload = ep->rx.p;
		*len = h->len;
		return HR_OK;
	}
	case HRM_RTS_R: {
		if ((st = hrp_region_ensure(ep, &ep->rx, h->len, 0)) != HR_OK)
			return hrp_fail(ep, st);
		hr_send_wr wr;
		memset(&wr, 0, sizeof wr);
		wr.opcode = HR_OP_RDMA_READ;
		set_sge(&wr, ep->rx.p, h->len, ep->rx.mr->lkey);
		wr.remote_addr = h->addr;
		wr.rkey = h->rkey;
		if ((st = hrp_post(ep, &wr, 1)) != HR_OK)
			return st;
		if ((st = hrp_wait_read(ep, wr.wr_id)) != HR_OK)
			return st;
		hr_msg fin;
		hdr_init(ep, &fin, HRM_FIN, HRM_F_RELEASE, h->len, h->proto, 0);
		if ((st = post_ctl(ep, &fin)) != HR_OK)
			return st;
		*payload = ep->rx.p;
		*len = h->len;
		return HR_OK;
	}
	}
	return hrp_fail(ep, HR_EIO);
}
