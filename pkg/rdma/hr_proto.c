/* hr_proto.c - HatRPC engine endpoints: lifecycle, registered regions, the
 * send-queue accounting behind selective signaling, and the progress loop
 * (busy polling or blocking on the completion channel). Provider table only. */
#define _GNU_SOURCE
#include "hr_proto_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* A spinning poller yields the CPU once every this many empty polls in a
 * row (~200 µs of spinning). When the host has more runnable threads than
 * CPUs, e.g. the peer process spins on the same core, a poller that never
 * yields keeps the CPU for a whole scheduler slice (milliseconds) while
 * the completion it waits for cannot be produced. Waits of a few µs, the
 * normal case, never reach the threshold: yielding every 256 polls
 * (~10 µs) was measured to put 1-caller p50s at ~5 µs instead of ~2 µs in
 * some runs on an idle machine. */
#define EP_YIELD_EVERY 4096

/* An event-mode spin yields every this long (in ns, at a clock read). On an
 * oversubscribed host a lane's client and server threads can end up on one
 * CPU (the kernel places a wakee near its waker); a spinner that never
 * yields then holds that CPU for its whole spin while the peer that would
 * end the wait cannot run, and every call took the spin plus a wake-up
 * (atb next to a CPU hog: lanes p50 111-165 µs in the reps where it
 * happened, 2.3 µs otherwise; 68-76 µs with this yield). A wait this long
 * is no quick answer anyway. */
#define EP_SPIN_YIELD_NS 25000

/* The calling thread's context switches so far: a sched_yield that changes
 * it handed the CPU to another thread (the kernel counts a switch only when
 * another task ran). A syscall; read around a spin's yield only (every
 * 25 us). */
static long thread_switches(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		return -1;
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

/* A spin's yield: whether it handed the CPU to another thread. */
static int yield_handed_off(void)
{
	long before = thread_switches();
	sched_yield();
	return before >= 0 && thread_switches() != before;
}

/* Read where a wait is slow anyway: a wait answered right after a yield
 * that handed off, whose thread may have been the peer unless this says
 * otherwise (ibv, not knowing, never does), and a wait that would skip its
 * spin (it sleeps). */
int hrp_peer_away(hr_ep *ep)
{
	int cpu = hr_qp_peer_cpu(ep->qp);
	return cpu >= 0 && cpu != sched_getcpu();
}

/* An event-mode spin reads the clock once every this many empty polls
 * (~1-2 µs here), to see whether its phase is over. Read on every poll,
 * the vDSO clock was half the loop (perf over a 64 B lane run: 49 % of
 * both processes' samples in clock_gettime), and a completion that landed
 * during a read waited for it: the spin is there to answer quickly. */
#define EP_SPIN_CLOCK_EVERY 32

/* An event wait wakes this often to notice a cancel or abort flag (a
 * deadline ends it on time regardless): short enough for a prompt abort,
 * long enough that hundreds of idle lanes cost next to no CPU. */
#define EP_EVENT_SLICE_MS 50

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Four independent lanes keep the multiplier busy: the sum runs over every
 * memory-polled payload on both sides, so it is on the RFP latency path. */
uint64_t hrp_sum(const void *p, uint64_t n, uint64_t seed)
{
	const uint8_t *b = p;
	const uint64_t k = 0x9e3779b97f4a7c15ull;
	uint64_t h0 = seed ^ (n * k), h1 = h0 + k, h2 = h0 + 2 * k, h3 = h0 + 3 * k;
	uint64_t w[4];
	for (; n >= 32; n -= 32, b += 32) {
		memcpy(w, b, 32);
		h0 = (h0 ^ w[0]) * 0x100000001b3ull + (h0 >> 29);
		h1 = (h1 ^ w[1]) * 0x100000001b3ull + (h1 >> 29);
		h2 = (h2 ^ w[2]) * 0x100000001b3ull + (h2 >> 29);
		h3 = (h3 ^ w[3]) * 0x100000001b3ull + (h3 >> 29);
	}
	uint64_t h = mix64(h0) ^ mix64(h1 + 1) ^ mix64(h2 + 2) ^ mix64(h3 + 3);
	for (; n >= 8; n -= 8, b += 8) {
		memcpy(w, b, 8);
		h = (h ^ w[0]) * 0x100000001b3ull + (h >> 29);
	}
	for (; n > 0; n--, b++)
		h = (h ^ *b) * 0x100000001b3ull;
	return mix64(h);
}

/* Never 0, so an unsummed header (sum 0) never passes for a polled one. */
uint64_t hrp_msg_sum(const hr_msg *m)
{
	hr_msg c = *m;
	c.sum = 0;
	return hrp_sum(&c, sizeof c, 0x48525043ull) | 1;
}

int hrp_fail(hr_ep *ep, int st)
{
	if (st < 0)
		st = -st;
	if (st == HR_OK)
		return HR_OK;
	if (!ep->broken) {
		ep->broken = st;
		hr_qp_set_error(ep->qp);
	}
	return st;
}

static void region_free(hr_ep *ep, hr_region *r)
{
	if (r->mr)
		hr_dereg_mr(r->mr);
	if (r->p)
		hr_free_buf(ep->pd, r->p, r->cap);
	r->p = NULL;
	r->mr = NULL;
	r->cap = 0;
	r->last_wr = 0;
}

int hrp_region_in(const hr_region *r, const void *p)
{
	const uint8_t *b = p;
	return r->p && b >= r->p && b < r->p + r->cap;
}

/* Setup steps left before an injected failure (< 0: none). Tests use it to
 * prove every step of hr_ep_create unwinds on every provider. */
static _Atomic int inject_steps = -1;

void hr_ep_inject_setup_failure(int steps) { atomic_store(&inject_steps, steps); }

static int injected(void)
{
	int left = atomic_load(&inject_steps);
	while (left >= 0 && !atomic_compare_exchange_weak(&inject_steps, &left, left - 1))
		;
	return left == 0;
}

static int region_alloc(hr_ep *ep, hr_region *r, uint64_t cap, uint32_t access)
{
	void *p = NULL;
	if (injected())
		return HR_ENOMEM;
	int st = hr_alloc_buf(ep->pd, cap, &p);
	if (st != HR_OK)
		return st;
	hr_mr *mr = NULL;
	st = hr_reg_mr(ep->pd, p, cap, access, &mr);
	if (st != HR_OK) {
		hr_free_buf(ep->pd, p, cap);
		return st;
	}
	r->p = p;
	r->cap = cap;
	r->mr = mr;
	r->access = access;
	return HR_OK;
}

/* Grows r to hold need bytes, keeping its first keep bytes. Pools grow in
 * 64 KiB steps: a 16 MiB message should not cost 32 MiB of pinned memory. */
int hrp_region_ensure(hr_ep *ep, hr_region *r, uint64_t need, uint64_t keep)
{
	if (need <= r->cap)
		return HR_OK;
	if (need > ep->cfg.max_msg + HR_MSG_HDR + HR_MSG_TAIL)
		return HR_EINVAL;
	uint64_t cap = (need + 0xffffull) & ~0xffffull;
	hr_region n = {0};
	int st = region_alloc(ep, &n, cap, r->access);
	if (st != HR_OK)
		return st;
	if (keep > r->cap)
		keep = r->cap;
	if (keep)
		memcpy(n.p, r->p, keep);
	if ((r == &ep->tx || r == &ep->tx2) && r->last_wr > ep->sq_done) {
		/* Unsignaled WRs may still gather from the old staging buffer:
		 * keep it registered until a completion retires them, and make
		 * the next WR signaled so that one comes. A buffer no WR fed
		 * since the last retired one (a lease, then a larger one,
		 * between two exchanges) is freed at once below: waiting for it
		 * would wait for a completion no post will bring. */
		while (ep->tx_old.p && ep->sq_done < ep->tx_old_at) {
			int r2 = hrp_progress(ep);
			if (r2 < 0 || (r2 == 0 && (st = hrp_check(ep)) != HR_OK)) {
				region_free(ep, &n);
				return r2 < 0 ? -r2 : st;
			}
		}
		region_free(ep, &ep->tx_old);
		ep->tx_old = *r;
		ep->tx_old_at = r->last_wr;
		ep->unsignaled = ep->cfg.signal_interval;
	} else {
		region_free(ep, r);
	}
	*r = n;
	return HR_OK;
}

uint8_t *hrp_slot(hr_ep *ep, uint32_t slot) { return ep->slots.p + (uint64_t)slot * ep->slot_stride; }

uint8_t *hrp_ctl(hr_ep *ep)
{
	/* Rotating entries: a non-inline control SEND may still be read by the
	 * device while the next one is built. */
	uint8_t *p = ep->ctl.p + (uint64_t)(ep->ctl_next % HR_EP_CTL_N) * HR_MSG_HDR;
	ep->ctl_next++;
	memset(p, 0, HR_MSG_HDR);
	return p;
}

int hrp_repost(hr_ep *ep, uint32_t slot)
{
	hr_recv_wr wr = {.wr_id = slot, .num_sge = 1};
	wr.sg[0].addr = (uint64_t)(uintptr_t)hrp_slot(ep, slot);
	wr.sg[0].length = ep->slot_stride;
	wr.sg[0].lkey = ep->slots.mr->lkey;
	uint32_t bad;
	return hr_post_recv(ep->qp, &wr, 1, &bad);
}

/* HR_ECLOSED once aborted, HR_ETIMEDOUT once the call was cancelled. */
int hrp_check_flags(hr_ep *ep)
{
	if (atomic_load_explicit(&ep->aborted, memory_order_relaxed))
		return HR_ECLOSED;
	if (atomic_load_explicit(&ep->cancel_gen, memory_order_relaxed) == ep->gen)
		return HR_ETIMEDOUT;
	return HR_OK;
}

/* The current deadline, fixed at now if it was left to the first clock
 * read (a call's: see hr_ep_call). */
uint64_t hrp_deadline(hr_ep *ep, uint64_t now)
{
	if (ep->deadline == 0)
		ep->deadline = now + ep->deadline_ms * 1000000ull;
	return ep->deadline;
}

/* A timed server wait's clock while nothing has come (recv_wait): read
 * at its first empty poll and every EP_SEEN_EVERY after, so a request is
 * seen at most that many polls after the last read; a read that coincides
 * with the request's landing delays noticing it by one read, where the
 * read at the request cost every call one. */
#define EP_SEEN_EVERY 4

void hrp_wait_seen(hr_ep *ep)
{
	if (ep->t_seen && ++ep->seen_polls < EP_SEEN_EVERY)
		return;
	ep->t_seen = hr_now_ns();
	ep->seen_polls = 0;
}

/* hrp_check_flags, and HR_ETIMEDOUT once the deadline passed. */
int hrp_check(hr_ep *ep)
{
	int st = hrp_check_flags(ep);
	if (st != HR_OK)
		return st;
	if (ep->deadline != UINT64_MAX) {
		uint64_t now = hr_now_ns();
		if (now >= hrp_deadline(ep, now))
			return HR_ETIMEDOUT;
	}
	return HR_OK;
}

/* The lines of a message its peer just wrote sit in the peer's cache.
 * Whoever reads it next (the header check here, then the runtime's decode
 * in Go) would take their misses one after another, each a cross-core
 * transfer; asking for all of them at once when the completion is seen
 * overlaps them. Small messages only: a large one is streamed anyway. */
#define EP_PREFETCH_MAX 512

static void prefetch_arrival(hr_ep *ep, const hr_arrival *a)
{
	const uint8_t *p;
	uint64_t n;
	if (a->opcode == HR_WC_RECV_RDMA_WITH_IMM) {
		p = ep->direct.p;
		n = (uint64_t)HR_MSG_HDR + a->imm;
		if (n > ep->direct.cap)
			n = ep->direct.cap;
	} else {
		p = hrp_slot(ep, a->slot);
		n = a->byte_len;
	}
	if (n > EP_PREFETCH_MAX)
		n = EP_PREFETCH_MAX;
	for (uint64_t off = 0; off < n; off += 64)
		__builtin_prefetch(p + off, 0, 3);
}

static int dispatch(hr_ep *ep, const hr_wc *wc, int n)
{
	for (int i = 0; i < n; i++) {
		const hr_wc *c = &wc[i];
		if (c->status != HR_OK)
			return hrp_fail(ep, (int)c->status);
		if (c->opcode == HR_WC_RECV || c->opcode == HR_WC_RECV_RDMA_WITH_IMM) {
			uint32_t cap = ep->cfg.nslots;
			/* wr_id names the slot, and indexes it: a provider whose
			 * receive records a peer could touch must not move it. */
			if (ep->arr_tail - ep->arr_head >= cap || c->wr_id >= cap)
				return hrp_fail(ep, HR_EIO);
			hr_arrival *a = &ep->arr[ep->arr_tail % cap];
			a->slot = (uint32_t)c->wr_id;
			a->opcode = c->opcode;
			a->byte_len = c->byte_len;
			a->imm = c->imm;
			ep->arr_tail++;
			prefetch_arrival(ep, a);
			continue;
		}
		if (c->wr_id > ep->sq_done)
			ep->sq_done = c->wr_id;
		if (ep->tx_old.p && ep->sq_done >= ep->tx_old_at)
			region_free(ep, &ep->tx_old);
		if (c->opcode == HR_OP_RDMA_READ && c->wr_id > ep->read_done)
			ep->read_done = c->wr_id;
	}
	return HR_OK;
}

/* A spin's clock read after k empty polls: the time since its last read
 * is spun, and calibrates an empty poll's cost, when it is within 4x of
 * what its polls cost at the present rate (a wait's loop costs more than
 * the bare polls poll_cost_ps times: 1.5-3x); a longer one had the thread
 * preempted (another thread's time in it, which no yield saw: tens of
 * times a segment's microsecond), and is credited by count. */
static void spin_clock_read(hr_ep *ep, uint64_t now, uint32_t k)
{
	uint32_t n = k - ep->polls_credited;
	if (ep->spin_clock && now > ep->spin_clock && n) {
		uint64_t d = now - ep->spin_clock, ps = d * 1000 / n, cur = ep->poll_ps;
		if (ps >= cur / 4 && ps <= cur * 4) {
			hrp_spun(ep, d);
			ep->poll_ps = (uint32_t)(cur - cur / 8 + ps / 8);
			ep->polls_credited = k;
		}
	}
	hrp_polls_credit(ep);
	ep->spin_clock = now;
}

/* One spinning wait in this many reads the clock at its first empty poll
 * (spin_clock_read's calibration in waits too short for two of its
 * reads: a 64 B ping-pong's, 30-50 polls). */
#define EP_CALIBRATE_EVERY 16

/* An empty poll's cost before any spin measured one: the least of a few
 * timed rounds of polls of the endpoint's empty CQ (~10 us in all). */
#define EP_POLL_CALIBRATE 256
static uint32_t poll_cost_ps(hr_cq *cq)
{
	uint64_t best = UINT64_MAX;
	hr_wc wc[HR_EP_POLL];
	for (int r = 0; r < 3; r++) {
		uint64_t t0 = hr_now_ns();
		for (int i = 0; i < EP_POLL_CALIBRATE; i++)
			(void)hr_poll_cq(cq, HR_EP_POLL, wc);
		uint64_t d = hr_now_ns() - t0;
		if (d < best)
			best = d;
	}
	uint64_t ps = best * 1000 / EP_POLL_CALIBRATE;
	return ps < 1000 ? 1000 : ps > 1000000 ? 1000000 : (uint32_t)ps;
}

/* One step of progress: >0 completions handled, 0 none (busy mode) or an
 * event slice passed, <0 -status. Event mode arms and blocks in slices so
 * cancellation is noticed. */
int hrp_progress(hr_ep *ep)
{
	hr_wc wc[HR_EP_POLL];
	int n = hr_poll_cq(ep->cq, HR_EP_POLL, wc);
	int handed = ep->yielded_cpu; /* the last step's yield handed the CPU over */
	ep->yielded_cpu = 0;
	ep->slept = 0;
	if (n == 0 && ep->cfg.event) {
		/* Adaptive polling: spin for spin_ns, as busy polling would, and
		 * only then pay for arming and sleeping; a completion that comes
		 * within the spin costs no wakeup. The phase starts at the first
		 * clock read after a completion (at most EP_SPIN_CLOCK_EVERY
		 * polls late) and ends at the first read past it. */
		/* A wait that may park parks at once: the runtime parks it
		 * because what it waits for needs this process's goroutines
		 * (hr_ep_set_park). */
		int parks = ep->park_here && atomic_load_explicit(&ep->park, memory_order_relaxed);
		uint64_t spin = ep->wait_nospin || parks ? 0 : atomic_load_explicit(&ep->spin_ns, memory_order_relaxed);
		if (spin) {
			uint32_t k = ++ep->empty_polls;
			/* The wait spins from its first empty poll; the clock
			 * read that starts the spin phase comes
			 * EP_SPIN_CLOCK_EVERY polls later: a wait answered
			 * sooner (a ping-pong's) reads none, but for one in
			 * EP_CALIBRATE_EVERY (below). */
			ep->wait_spun = 1;
			if (k == 1 && ++ep->calib_waits % EP_CALIBRATE_EVERY == 0) {
				/* A sample for the spin accounting's poll cost
				 * (see hrp_spun), which short waits are credited
				 * by: read where the message cannot be here yet
				 * (just sent, or answered), and in one wait of
				 * EP_CALIBRATE_EVERY: where the clock is a system
				 * call, a read a wait would cost every wait CPU,
				 * and a quick answer its time. */
				hrp_polls_credit(ep);
				ep->spin_clock = hr_now_ns();
			}
			if (k % EP_SPIN_CLOCK_EVERY != 0)
				return 0;
			uint64_t now = hr_now_ns();
			spin_clock_read(ep, now, k);
			hrp_deadline(ep, now); /* fixes a call's, if still open */
			if (!ep->spin_until) {
				ep->spin_until = now + spin;
				ep->spin_yield = now + EP_SPIN_YIELD_NS;
				/* A wait that reaches the clock is long enough
				 * for a yield: the peer's handoff rule may read
				 * this CPU (hrp_peer_away). A 64 B ping-pong's
				 * waits end before this read. */
				hr_qp_note_cpu(ep->qp);
			}
			if (now < ep->spin_until) {
				/* By time, not by polls: a poll's cost varies with
				 * the provider and whether the clock is read. */
				if (now >= ep->spin_yield) {
					ep->spin_yield = now + EP_SPIN_YIELD_NS;
					ep->t_seen = 0; /* the CPU may go elsewhere */
					if (yield_handed_off()) {
						ep->spin_clock = 0; /* another thread's time in it */
						ep->yielded_cpu = 1;
						ep->st.spin_handoffs++;
					}
					hr_qp_note_cpu(ep->qp); /* it may have moved */
				}
				return 0;
			}
		}
		/* The wait may sleep from here: a request seen from now on is
		 * stamped when it is seen (recv_wait). */
		ep->t_seen = 0;
		hrp_polls_credit(ep);
		ep->spin_clock = 0;
		int st = hr_arm_cq(ep->cq, 0);
		if (st != HR_OK)
			return -hrp_fail(ep, st);
		/* A completion may have landed between the poll and the arm. */
		n = hr_poll_cq(ep->cq, HR_EP_POLL, wc);
		if (n == 0) {
			int slice = ep->event_slice_ms;
			if (ep->deadline != UINT64_MAX) {
				uint64_t now = hr_now_ns();
				uint64_t dl = hrp_deadline(ep, now);
				uint64_t left = dl > now ? (dl - now + 999999) / 1000000 : 0;
				if (left < (uint64_t)slice)
					slice = (int)left;
			}
			hr_cq *ev = NULL;
			ep->slept = 1;
			ep->wait_slept = 1;
			/* Armed and re-polled: the runtime may wait for the fd
			 * now, with no completion lost (hr_ep_set_park). */
			if (parks && slice > 0) {
				ep->park_ms = slice;
				return -HR_EP_PARKED;
			}
			st = hr_get_cq_event(ep->ch, slice, &ev);
			if (st == HR_ETIMEDOUT)
				return 0;
			if (st != HR_OK)
				return -hrp_fail(ep, st);
			hr_ack_cq_events(ev, 1);
			n = hr_poll_cq(ep->cq, HR_EP_POLL, wc);
		}
	}
	if (n < 0)
		return -hrp_fail(ep, -n);
	if (n > 0) {
		/* A wait that slept may wake on another CPU: the peer's
		 * handoff rule reads it (hr_qp_note_cpu). */
		if (ep->wait_slept)
			hr_qp_note_cpu(ep->qp);
		/* Answered while another thread had this CPU, maybe the
		 * peer: see hrp_wait_end. */
		if (handed) {
			ep->wait_handed = 1;
			/* Not when it moved off the peer's CPU: hrp_move_away. */
			if (!hrp_peer_away(ep) && !hrp_move_away(ep))
				ep->wait_handoff = 1;
		}
		ep->spin_until = 0;
		hrp_polls_end(ep);
	} else if (++ep->empty_polls % EP_YIELD_EVERY == 0) {
		/* A busy wait's polls, credited now and then, timed from the
		 * end of one yield to the next (two clock reads in
		 * EP_YIELD_EVERY polls). */
		spin_clock_read(ep, hr_now_ns(), ep->empty_polls);
		ep->t_seen = 0;
		sched_yield();
		ep->spin_clock = hr_now_ns();
	}
	int st = dispatch(ep, wc, n);
	return st != HR_OK ? -st : n;
}

/* Posts a chain with selective signaling: READs are always signaled (their
 * data is awaited), other WRs once every signal_interval, which is what frees
 * send-queue slots. */
int hrp_post(hr_ep *ep, hr_send_wr *wr, uint32_t n)
{
	if (n > ep->sq_cap)
		return hrp_fail(ep, HR_EINVAL);
	while (ep->sq_posted - ep->sq_done + n > ep->sq_cap) {
		int r = hrp_progress(ep);
		if (r < 0)
			return -r;
		int st = hrp_check(ep);
		if (st != HR_OK)
			return hrp_fail(ep, st);
	}
	for (uint32_t i = 0; i < n; i++) {
		wr[i].wr_id = ++ep->sq_posted;
		if (wr[i].opcode == HR_OP_RDMA_READ || (wr[i].flags & HR_SEND_SIGNALED) ||
		    ++ep->unsignaled >= ep->cfg.signal_interval) {
			wr[i].flags |= HR_SEND_SIGNALED;
			ep->unsignaled = 0;
		}
		uint64_t len = 0;
		for (uint32_t s = 0; s < wr[i].num_sge; s++) {
			len += wr[i].sg[s].length;
			const void *a = (const void *)(uintptr_t)wr[i].sg[s].addr;
			if (hrp_region_in(&ep->tx, a))
				ep->tx.last_wr = wr[i].wr_id;
			else if (hrp_region_in(&ep->tx2, a))
				ep->tx2.last_wr = wr[i].wr_id;
		}
		if (wr[i].opcode != HR_OP_RDMA_READ && ep->cfg.inline_threshold && len <= ep->cfg.inline_threshold)
			wr[i].flags |= HR_SEND_INLINE;
		if (wr[i].opcode != HR_OP_RDMA_READ && !ep->cfg.event)
			wr[i].flags |= HR_SEND_STREAM;
	}
	uint32_t bad = 0;
	int st = hr_post_send(ep->qp, wr, n, &bad);
	return st != HR_OK ? hrp_fail(ep, st) : HR_OK;
}

int hrp_wait_read(hr_ep *ep, uint64_t wr_id)
{
	while (ep->read_done < wr_id) {
		int r = hrp_progress(ep);
		if (r < 0)
			return -r;
		if (r == 0) {
			int st = hrp_check(ep);
			if (st != HR_OK)
				return hrp_fail(ep, st);
		}
	}
	return HR_OK;
}

static void ep_free(hr_ep *ep)
{
	if (ep->qp)
		hr_destroy_qp(ep->qp);
	if (ep->cq)
		hr_destroy_cq(ep->cq);
	if (ep->ch)
		hr_destroy_chan(ep->ch);
	region_free(ep, &ep->slots);
	region_free(ep, &ep->direct);
	region_free(ep, &ep->resp);
	region_free(ep, &ep->ctl);
	region_free(ep, &ep->tx);
	region_free(ep, &ep->tx2);
	region_free(ep, &ep->tx_old);
	region_free(ep, &ep->rx);
	free(ep->arr);
	free(ep);
}

static int cfg_ok(const hr_ep_cfg *c)
{
	return c->slot_size > 0 && c->nslots >= 4 && c->nslots <= 4096 && c->direct_size > 0 &&
	       c->resp_size > 0 && c->max_send_wr >= 8 && c->signal_interval > 0 &&
	       c->signal_interval <= c->max_send_wr / 2 && c->rfp_fetch >= HR_MSG_HDR + HR_MSG_TAIL &&
	       c->max_msg > 0 && c->direct_size <= c->max_msg && c->resp_size <= c->max_msg &&
	       c->slot_size <= c->max_msg && (uint64_t)c->slot_size + HR_MSG_HDR <= UINT32_MAX / 2;
}

int hr_ep_create(hr_dev *dev, hr_pd *pd, const hr_ep_cfg *cfg, hr_ep **out)
{
	if (!dev || !pd || !cfg || !out || !cfg_ok(cfg))
		return HR_EINVAL;
	hr_ep *ep = calloc(1, sizeof *ep);
	if (!ep)
		return HR_ENOMEM;
	ep->dev = dev;
	ep->pd = pd;
	ep->cfg = *cfg;
	ep->event_slice_ms = EP_EVENT_SLICE_MS;
	ep->sq_cap = cfg->max_send_wr;
	ep->slot_stride = (HR_MSG_HDR + cfg->slot_size + 63u) & ~63u;
	atomic_store(&ep->cancel_gen, UINT32_MAX);
	ep->gen = 0;
	int st = HR_ENOMEM;
	ep->arr = calloc(cfg->nslots, sizeof *ep->arr);
	if (!ep->arr)
		goto fail;
	uint32_t lw = HR_ACCESS_LOCAL_WRITE;
	if ((st = region_alloc(ep, &ep->slots, (uint64_t)ep->slot_stride * cfg->nslots, lw)) ||
	    (st = region_alloc(ep, &ep->direct, HR_MSG_HDR + cfg->direct_size + HR_MSG_TAIL,
			       lw | HR_ACCESS_REMOTE_WRITE)) ||
	    (st = region_alloc(ep, &ep->resp, HR_MSG_HDR + cfg->resp_size + HR_MSG_TAIL,
			       lw | HR_ACCESS_REMOTE_READ)) ||
	    (st = region_alloc(ep, &ep->ctl, HR_EP_CTL_N * HR_MSG_HDR, lw)))
		goto fail;
	uint64_t pool = cfg->pool_size;
	uint64_t small = HR_MSG_HDR + (uint64_t)(cfg->slot_size > cfg->direct_size ? cfg->slot_size : cfg->direct_size) +
			 HR_MSG_TAIL;
	if (pool < small)
		pool = small;
	if ((st = region_alloc(ep, &ep->tx, pool, lw | HR_ACCESS_REMOTE_READ)) ||
	    (st = region_alloc(ep, &ep->rx, pool, lw | HR_ACCESS_REMOTE_WRITE)))
		goto fail;
	if ((st = injected() ? HR_ENOMEM : hr_create_chan(dev, &ep->ch)))
		goto fail;
	if ((st = injected() ? HR_ENOMEM : hr_create_cq(dev, cfg->max_send_wr + cfg->nslots + 16, ep->ch, &ep->cq)))
		goto fail;
	hr_qp_init in = {
		.send_cq = ep->cq,
		.recv_cq = ep->cq,
		.max_send_wr = cfg->max_send_wr,
		.max_recv_wr = cfg->nslots,
		.max_sge = 2,
		.max_inline = cfg->inline_threshold,
		.rnr_retry = 7,
		.retry_cnt = 0, /* the provider's bounded default: a dead peer fails calls */
	};
	if ((st = injected() ? HR_ENOMEM : hr_create_qp(pd, &in, &ep->qp)))
		goto fail;
	ep->poll_ps = poll_cost_ps(ep->cq); /* before any receive is posted: the CQ is empty */
	for (uint32_t i = 0; i < cfg->nslots; i++)
		if ((st = hrp_repost(ep, i)))
			goto fail;
	*out = ep;
	return HR_OK;
fail:
	ep_free(ep);
	return st;
}

void hr_ep_destroy(hr_ep *ep)
{
	if (ep)
		ep_free(ep);
}

hr_qp *hr_ep_qp(hr_ep *ep) { return ep->qp; }

void hr_ep_local(hr_ep *ep, hr_ep_desc *d)
{
	memset(d, 0, sizeof *d);
	d->direct_addr = (uint64_t)(uintptr_t)ep->direct.p;
	d->direct_rkey = ep->direct.mr->rkey;
	d->direct_len = ep->cfg.direct_size;
	d->resp_addr = (uint64_t)(uintptr_t)ep->resp.p;
	d->resp_rkey = ep->resp.mr->rkey;
	d->resp_len = ep->cfg.resp_size;
	d->slot_size = ep->cfg.slot_size;
	d->nslots = ep->cfg.nslots;
	d->event = ep->cfg.event;
}

int hr_ep_set_peer(hr_ep *ep, const hr_ep_desc *p)
{
	if (!p || p->slot_size == 0 || p->nslots < 4 || p->direct_len == 0 || p->resp_len == 0 ||
	    p->event > 1)
		return HR_EPEER;
	ep->peer = *p;
	ep->have_peer = 1;
	return HR_OK;
}

void *hr_ep_tx(hr_ep *ep, uint64_t n)
{
	if (ep->tx_busy || hrp_region_ensure(ep, &ep->tx, HR_MSG_HDR + n + HR_MSG_TAIL, 0) != HR_OK)
		return NULL;
	return ep->tx.p + HR_MSG_HDR;
}

void *hr_ep_tx_spare(hr_ep *ep, uint64_t n)
{
	uint64_t need = HR_MSG_HDR + n + HR_MSG_TAIL;
	if (n == 0 || n > ep->cfg.max_msg)
		return NULL;
	if (!ep->tx2.p) {
		/* Sized once, as the first lease asks (64 KiB steps): it never
		 * grows, so no exchange has to retire a spare the runtime holds. */
		uint64_t cap = (need + 0xffffull) & ~0xffffull;
		if (region_alloc(ep, &ep->tx2, cap, ep->tx.access) != HR_OK)
			return NULL;
	}
	return need <= ep->tx2.cap ? ep->tx2.p + HR_MSG_HDR : NULL;
}

/* hr_ep_tx without growing (hrp_region_ensure keeps a buffer whose cap
 * holds the need) and hr_ep_reply_buf's choice, as data. */
void hr_ep_leases(hr_ep *ep, hr_ep_lease_view *v)
{
	memset(v, 0, sizeof *v);
	if (ep->tx.p) {
		v->tx = ep->tx.p + HR_MSG_HDR;
		if (!ep->tx_busy && ep->tx.cap >= HR_MSG_HDR + HR_MSG_TAIL)
			v->tx_room = ep->tx.cap - HR_MSG_HDR - HR_MSG_TAIL;
	}
	if (ep->tx2.p) {
		v->spare = ep->tx2.p + HR_MSG_HDR;
		v->spare_room = ep->tx2.cap - HR_MSG_HDR - HR_MSG_TAIL;
	}
	v->pending = (uint32_t)ep->pending;
	if (ep->pending && (ep->pend_flags & HRM_F_FETCH)) {
		v->resp = ep->resp.p + HR_MSG_HDR;
		v->resp_room = ep->cfg.resp_size;
	}
}

/* Only a later exchange's cancel replaces an earlier one's: a context
 * watch that read the exchange in hand just before the next one began
 * cancels the old gen after that one cancelled itself, and a plain store
 * would un-cancel it (gens count up by one, wrapping past UINT32_MAX,
 * which no exchange has: serial-number order). */
void hr_ep_cancel(hr_ep *ep, uint32_t gen)
{
	uint32_t old = atomic_load(&ep->cancel_gen);
	while (old == UINT32_MAX || (int32_t)(gen - old) > 0)
		if (atomic_compare_exchange_weak(&ep->cancel_gen, &old, gen))
			return;
}
void hr_ep_abort(hr_ep *ep) { atomic_store(&ep->aborted, 1); }
void hr_ep_set_spin(hr_ep *ep, uint64_t ns) { atomic_store_explicit(&ep->spin_ns, ns, memory_order_relaxed); }
const uint64_t *hr_ep_arrival(hr_ep *ep) { return &ep->t_req; }
/* _Atomic uint64_t has uint64_t's representation on every target of this
 * engine; cgo reads no _Atomic types. */
const uint64_t *hr_ep_spun_ns(hr_ep *ep) { return (const uint64_t *)&ep->spun_ns; }
void hr_ep_time_arrivals(hr_ep *ep, int on) { ep->time_arrivals = on != 0; }
void hr_ep_set_event_slice(hr_ep *ep, int ms) { ep->event_slice_ms = ms > 0 ? ms : EP_EVENT_SLICE_MS; }
void hr_ep_set_park(hr_ep *ep, int on) { atomic_store_explicit(&ep->park, on != 0, memory_order_relaxed); }
int hr_ep_fd(hr_ep *ep) { return ep->cfg.event && ep->ch ? hr_chan_fd(ep->ch) : -1; }
const int32_t *hr_ep_park_ms(hr_ep *ep) { return &ep->park_ms; }

/* Takes in the events of the CQ a parked exchange armed, as a sleep on the
 * channel would have (get, then ack: ibv's destroy waits for every event
 * got to be acked), so the fd the runtime waits on reads empty again. Not
 * blocking; bounded, as nothing but this CQ is on the channel. */
void hrp_unpark(hr_ep *ep)
{
	ep->parked = EP_PARK_NONE;
	hr_cq *ev = NULL;
	for (int i = 0; i < 16 && hr_get_cq_event(ep->ch, 0, &ev) == HR_OK; i++)
		hr_ack_cq_events(ev, 1);
}

void hr_ep_stats_get(hr_ep *ep, hr_ep_stats *out)
{
	*out = ep->st;
	out->rfp_mode = ep->rfp_mode;
}

void hr_ep_asked_get(hr_ep *ep, uint64_t *out)
{
	for (int i = 0; i < HR_PROTO_COUNT; i++)
		out[i] = __atomic_load_n(&ep->asked[i], __ATOMIC_RELAXED);
}

void hr_ep_sent_get(hr_ep *ep, uint64_t *out)
{
	for (int i = 0; i < HR_PROTO_COUNT; i++)
		out[i] = __atomic_load_n(&ep->st.sent[i], __ATOMIC_RELAXED);
}

int hr_ep_broken(hr_ep *ep) { return ep->broken; }
