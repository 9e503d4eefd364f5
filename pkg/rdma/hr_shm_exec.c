/* hr_shm_exec.c - shm provider: the execution engine. The posting thread (or
 * the device's service thread, for RNR retries) executes work requests in
 * order, doing what a NIC would: it checks keys against the target's MR
 * table, copies into the target's mapped memory and writes completions into
 * the target's CQ ring. */
#define _GNU_SOURCE
#include "shm_internal.h"

#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define SHM_RNR_PENDING (-1)

/* A SEND or WRITE of SHM_NT_MIN to SHM_NT_MAX bytes marked HR_SEND_STREAM
 * (a busy-polling endpoint's) into a target that polls (its receive CQ not
 * armed) is copied with non-temporal stores. Cached stores into lines the
 * target's CPU read last must first take each line from it, as many at a
 * time as the core's outstanding misses allow: a 128 KiB echo between two
 * busy pollers took ~70 µs when the host put the two vCPUs in different L3
 * complexes and ~23 µs in one, against ~20 µs in both when streamed to
 * memory, where the target's copy finds it. Busy polling is what the plan
 * chooses only while the pollers fit the cores, so the target reads on
 * another CPU; under event polling (many callers on 2 cores) a woken
 * target often reads on the CPU that wrote, from its own cache, and
 * streaming lost up to a third of the calls. Past SHM_NT_MAX the buffers
 * outgrow the L2 and the cached copy wins again with both vCPUs in one L3
 * (docs/performance/history.md, "128 KiB at 1 caller: the host's phases
 * and the copy into the target"). */
#define SHM_NT_MIN (64u << 10)
#define SHM_NT_MAX (256u << 10)

/* ---- key checks: the MR table of the segment at base ---- */

struct region {
	uint8_t *p;
	uint32_t len;
};

/* Remote access. No pin on the MR: the access runs inside the target QP's
 * in-flight window (exec_wr), which deregistration waits out
 * (shm_dereg_mr) — a pin was two more locked instructions per message, the
 * second waiting for the copy's stores to drain. */
static int mr_check_remote(uint8_t *base, uint64_t size, uint32_t pd, uint32_t key, uint64_t addr, uint64_t len,
			   uint32_t need, struct region *r)
{
	struct shm_hdr *h = (struct shm_hdr *)base;
	struct shm_mr_ent *e = &h->mr[key & (SHM_MAX_MR - 1)];
	if (key == 0 || atomic_load_explicit(&e->key, memory_order_acquire) != key)
		return -1;
	uint64_t va = e->va, off = e->off, el = e->len;
	/* As on a NIC, a key reaches only MRs of the PD of the QP (or SRQ)
	 * it arrives on: another connection's memory answers REMOTE_ACCESS. */
	if (e->pd != pd || (e->access & need) != need || addr < va || len > el || addr - va > el - len)
		return -1;
	/* A corrupt peer table must not make us write outside the mapping. */
	if (off > size || el > size - off)
		return -1;
	r->p = base + off + (addr - va);
	r->len = (uint32_t)len;
	return 0;
}

/* Local access: deregistering memory that our own outstanding work still
 * uses is the application's error (as with a NIC). */
static int mr_check_local(struct shm_seg *d, uint32_t pd, uint32_t key, uint64_t addr, uint64_t len,
			  uint32_t need, struct region *r)
{
	struct shm_mr_ent *e = &d->hdr->mr[key & (SHM_MAX_MR - 1)];
	if (key == 0 || atomic_load_explicit(&e->key, memory_order_acquire) != key)
		return -1;
	uint64_t va = e->va, el = e->len;
	if (e->pd != pd || (e->access & need) != need || addr < va || len > el || addr - va > el - len)
		return -1;
	r->p = d->base + e->off + (addr - va);
	r->len = (uint32_t)len;
	return 0;
}

/* copy_nt copies n bytes to d bypassing the caches: the unaligned head and
 * the last partial line by memcpy, whole lines by streaming stores. The
 * caller fences (sg_copy) before anything that publishes the data. */
static void copy_nt(uint8_t *d, const uint8_t *s, uint32_t n)
{
#if defined(__x86_64__)
	uint32_t head = (uint32_t)(-(uintptr_t)d & 63);
	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; d += 64, s += 64, n -= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
		_mm_stream_si128((__m128i *)(void *)d, a);
		_mm_stream_si128((__m128i *)(void *)(d + 16), b);
		_mm_stream_si128((__m128i *)(void *)(d + 32), c);
		_mm_stream_si128((__m128i *)(void *)(d + 48), e);
	}
#endif
	memcpy(d, s, n);
}

/* Copy src regions into dst regions; returns bytes copied. nt streams the
 * copy past the caches (SHM_NT_MIN) and fences it: streaming stores are not
 * ordered by the release store that later publishes the completion. */
static uint64_t sg_copy(struct region *dst, int nd, const struct region *src, int ns, int nt)
{
	int di = 0, si = 0;
	uint32_t doff = 0, soff = 0;
	uint64_t total = 0;
	while (si < ns && di < nd) {
		uint32_t n = src[si].len - soff;
		if (dst[di].len - doff < n)
			n = dst[di].len - doff;
		if (nt)
			copy_nt(dst[di].p + doff, src[si].p + soff, n);
		else
			memcpy(dst[di].p + doff, src[si].p + soff, n);
		total += n;
		doff += n;
		soff += n;
		if (soff == src[si].len) {
			si++;
			soff = 0;
		}
		if (doff == dst[di].len) {
			di++;
			doff = 0;
		}
	}
#if defined(__x86_64__)
	if (nt)
		_mm_sfence();
#endif
	return total;
}

/* ---- execution ---- */

struct exec_res {
	int st;        /* initiator's status */
	uint32_t len;  /* byte_len for the send completion */
};

/* Ring the target's channel if its receive CQ is armed: the fired flag is
 * set before the wake-up is written, so the owner that drains the wake-up
 * finds it. */
static void target_fire(struct shm_qp *qp, struct shm_icq_sh *ic)
{
	if (atomic_exchange(&ic->armed, 0) == 0)
		return;
	atomic_store(&ic->fired, 1);
	if (qp->t_wake >= 0)
		shm_wake_ring(qp->t_wake);
}

/* The target QP fails; the owner's poll flushes its receives, so an armed
 * receive CQ is rung as for an error completion (no service thread of the
 * target need be woken: its next pass, or the owner's next post, flushes
 * the sends). */
static void target_error(struct shm_qp *qp, struct shm_qp_sh *tsh)
{
	if (atomic_exchange(&tsh->state, HR_QPS_ERR) != HR_QPS_ERR)
		target_fire(qp, (struct shm_icq_sh *)(qp->rbase + qp->t_cq_off));
}

/* Deliver a receive completion on the target, into its QP's inbound ring
 * (the caller holds the target QP's in-flight window, so the ring stays
 * valid). The target's poll takes wr_id and the QP number from its own
 * records; we name the receive consumed (rslot). In two steps, so a
 * successful one reserves its entry before the payload is copied: no
 * locked instruction then stands between the payload's stores and the
 * entry's, and on x86 the transfers of their lines overlap instead of the
 * second waiting for the first (each is a cross-core miss). */
static int icq_reserve(struct shm_qp *qp, struct shm_qp_sh *tsh, int st, uint64_t *slot)
{
	cnt_add(&tsh->completions, 1);
	if (st != HR_OK)
		cnt_add(&tsh->errors, 1);
	struct shm_icq_sh *ic = (struct shm_icq_sh *)(qp->rbase + qp->t_cq_off);
	uint32_t cap = qp->t_ccap;
	uint64_t *hc = &qp->rcq_head_cache;
	/* One producer: the QP connected to the target, executing under its
	 * lock (posting thread or service thread), so no locked instruction:
	 * a CAS here stood on every message's path before the copy. */
	uint64_t t = atomic_load_explicit(&ic->tail, memory_order_relaxed);
	if (t - *hc >= cap)
		*hc = atomic_load_explicit(&ic->head, memory_order_acquire);
	if (t - *hc >= cap) {
		/* More completions than receives posted: not an honest
		 * target; it fails, as on a CQ overrun. */
		target_error(qp, tsh);
		return -1;
	}
	atomic_store_explicit(&ic->tail, t + 1, memory_order_relaxed);
	*slot = t;
	return 0;
}

/* Whether wr's copy of total bytes into qp's target streams (SHM_NT_MIN). */
static int copy_streams(struct shm_qp *qp, const hr_send_wr *wr, uint64_t total)
{
	if (!(wr->flags & HR_SEND_STREAM) || total < SHM_NT_MIN || total > SHM_NT_MAX)
		return 0;
	struct shm_icq_sh *ic = (struct shm_icq_sh *)(qp->rbase + qp->t_cq_off);
	return atomic_load_explicit(&ic->armed, memory_order_relaxed) == 0;
}

static void icq_publish(struct shm_qp *qp, uint64_t t, uint64_t rslot, int st, uint32_t opcode, uint32_t len,
			uint32_t imm, int with_imm, int solicited)
{
	struct shm_icq_sh *ic = (struct shm_icq_sh *)(qp->rbase + qp->t_cq_off);
	struct shm_icqe *e = &ic->e[t & (qp->t_ccap - 1)];
	e->rslot = rslot;
	e->byte_len = len;
	e->imm = imm;
	e->status = (uint8_t)st;
	e->opcode = (uint8_t)opcode;
	e->flags = with_imm ? HR_WC_WITH_IMM : 0;
	atomic_store_explicit(&e->seq, t + 1, memory_order_release);

	uint32_t a = atomic_load_explicit(&ic->armed, memory_order_relaxed);
	if (a == 0 || (a == 2 && !solicited && st == HR_OK))
		return;
	target_fire(qp, ic);
}

/* An error completion: nothing is copied. */
static void target_recv_cqe(struct shm_qp *qp, struct shm_qp_sh *tsh, uint64_t rslot, int st)
{
	uint64_t t;
	if (icq_reserve(qp, tsh, st, &t) == 0)
		icq_publish(qp, t, rslot, st, HR_WC_RECV, 0, 0, 0, 0);
}

/* The target's next receive record is a line its owner wrote when it
 * posted it, long before; the next SEND or WRITE with immediate reads it
 * first thing, a cross-core miss on the message's path. Fetching it now,
 * after this message is out, takes that miss off the path. */
static void rq_prefetch_next(struct shm_qp *qp, uint64_t rslot)
{
	struct shm_rq_sh *rq = (struct shm_rq_sh *)(qp->rbase + qp->t_rq_off);
	__builtin_prefetch(&rq->e[(rslot + 1) % qp->t_rcap], 0, 3);
}

static int local_regions(struct shm_qp *qp, const hr_send_wr *wr, uint32_t need, struct region *r)
{
	for (uint32_t i = 0; i < wr->num_sge; i++)
		if (mr_check_local(&qp->pdp->seg, qp->pd, wr->sg[i].lkey, wr->sg[i].addr, wr->sg[i].length, need, &r[i]))
			return -1;
	return 0;
}

static int span_ok(uint64_t size, uint64_t off, uint64_t len)
{
	return off >= sizeof(struct shm_hdr) && off <= size && len <= size - off;
}

/* The target's control blocks come from another process's memory: check
 * they lie inside the mapping before following them. */
static int target_sane(struct shm_qp *qp, uint64_t tsh_off)
{
	uint64_t sz = qp->rsize;
	if (!span_ok(sz, tsh_off, sizeof(struct shm_qp_sh)))
		return 0;
	struct shm_qp_sh *tsh = (struct shm_qp_sh *)(qp->rbase + tsh_off);
	uint64_t rq_off = ((volatile struct shm_qp_sh *)tsh)->rq_off, cq_off = ((volatile struct shm_qp_sh *)tsh)->icq_off;
	if (!span_ok(sz, rq_off, sizeof(struct shm_rq_sh)) || !span_ok(sz, cq_off, sizeof(struct shm_icq_sh)))
		return 0;
	/* Read once: what is checked is what is used (the target may rewrite
	 * its headers meanwhile; the offsets it can change are re-read by
	 * the caller, hence checked again there). */
	uint32_t rcap = ((volatile struct shm_rq_sh *)(qp->rbase + rq_off))->cap;
	uint32_t ccap = ((volatile struct shm_icq_sh *)(qp->rbase + cq_off))->cap;
	qp->t_rcap = rcap;
	qp->t_ccap = ccap;
	qp->t_rq_off = rq_off;
	qp->t_cq_off = cq_off;
	return rcap && rcap <= SHM_MAX_WR && ccap && ccap <= SHM_MAX_WR && (ccap & (ccap - 1)) == 0 &&
	       span_ok(sz, rq_off, sizeof(struct shm_rq_sh) + (uint64_t)rcap * sizeof(struct shm_rwqe)) &&
	       span_ok(sz, cq_off, sizeof(struct shm_icq_sh) + (uint64_t)ccap * sizeof(struct shm_icqe));
}

static struct exec_res exec_wr(struct shm_qp *qp, struct shm_sqe *e, uint8_t *inl)
{
	struct exec_res res = {HR_OK, 0};
	const hr_send_wr *wr = &e->wr;
	struct shm_qp_ent *tent = &qp->rhdr->qp[qp->rqpn & (SHM_MAX_QP - 1)];
	if ((qp->peer && atomic_load(&qp->peer->dead)) || !atomic_load(&qp->rhdr->alive)) {
		res.st = HR_ERETRY_EXC;
		return res;
	}
	/* Opened by a locked increment, so it is seen before any key or
	 * state of the target is read (dereg and destroy clear theirs first,
	 * then look at the window: one side always sees the other). Closed
	 * by a plain release store, ordered after the copy and the completion
	 * without waiting for their stores to drain as a locked instruction
	 * would: we are the window's only writer (the QP connected to the
	 * target, under its lock). */
	uint32_t win = atomic_fetch_add(&tent->inflight, 1) + 1;
	uint64_t tsh_off = tent->off;
	struct shm_qp_sh *tsh = (struct shm_qp_sh *)(qp->rbase + tsh_off);
	uint32_t ts;
	/* A destroyed or failed target never answers: the requester times out. */
	if (atomic_load(&tent->qpn) != qp->rqpn) {
		res.st = HR_ERETRY_EXC;
		goto out;
	}
	/* A target QP's rings never move: its control block (named by the
	 * window's entry, and the same QP by the qpn check above) is read and
	 * checked once, not on every message. */
	if (tsh_off != qp->t_sh_off) {
		qp->t_sh_off = 0;
		if (!target_sane(qp, tsh_off)) {
			res.st = HR_EREMOTE_OP;
			goto out;
		}
		qp->t_sh_off = tsh_off;
		/* A new target's block has no CPU of ours yet. */
		atomic_store_explicit(&qp->noted_cpu, -1, memory_order_relaxed);
	}
	if ((ts = atomic_load(&tsh->state)) != HR_QPS_RTR && ts != HR_QPS_RTS) {
		res.st = HR_ERETRY_EXC;
		goto out;
	}

	struct region src[HR_MAX_SGE], dst[HR_MAX_SGE], rr;
	uint64_t total = 0;
	uint32_t op = wr->opcode;
	int with_imm = op == HR_OP_SEND_WITH_IMM || op == HR_OP_RDMA_WRITE_WITH_IMM;
	int nsrc = 0;

	if (op == HR_OP_SEND || op == HR_OP_SEND_WITH_IMM || op == HR_OP_RDMA_WRITE ||
	    op == HR_OP_RDMA_WRITE_WITH_IMM) {
		if (wr->flags & HR_SEND_INLINE) {
			src[0].p = inl;
			src[0].len = e->inl_len;
			nsrc = e->inl_len ? 1 : 0;
		} else {
			if (local_regions(qp, wr, 0, src)) {
				res.st = HR_ELOCAL_PROT;
				goto out;
			}
			nsrc = (int)wr->num_sge;
		}
		for (int i = 0; i < nsrc; i++)
			total += src[i].len;
	}

	switch (op) {
	case HR_OP_SEND:
	case HR_OP_SEND_WITH_IMM: {
		struct shm_rq_sh *rq = (struct shm_rq_sh *)(qp->rbase + qp->t_rq_off);
		struct shm_rwqe w;
		uint64_t rslot;
		if (shm_rq_pop(rq, qp->t_rcap, &w, &rslot) != 0) {
			res.st = SHM_RNR_PENDING;
			break;
		}
		uint64_t cap = 0;
		int nd = (int)(w.num_sge <= HR_MAX_SGE ? w.num_sge : HR_MAX_SGE), ok = 1;
		for (int i = 0; i < nd; i++) {
			/* Receive lkeys are checked against the receiving QP's PD,
			 * also for an SRQ's WQEs (as rxe's responder does). */
			if (mr_check_remote(qp->rbase, qp->rsize, tsh->pd, w.sg[i].lkey, w.sg[i].addr, w.sg[i].length,
				       HR_ACCESS_LOCAL_WRITE, &dst[i])) {
				ok = 0;
				break;
			}
			cap += dst[i].len;
		}
		if (!ok) {
			/* in error before its error completion shows */
			target_error(qp, tsh);
			target_recv_cqe(qp, tsh, rslot, HR_ELOCAL_PROT);
			res.st = HR_EREMOTE_OP;
			break;
		}
		if (total > cap) {
			/* in error before its error completion shows */
			target_error(qp, tsh);
			target_recv_cqe(qp, tsh, rslot, HR_ELOCAL_LEN);
			res.st = HR_EREMOTE_INVAL;
			break;
		}
		uint64_t ct;
		int have = icq_reserve(qp, tsh, HR_OK, &ct) == 0;
		sg_copy(dst, nd, src, nsrc, copy_streams(qp, wr, total));
		cnt_add(&tsh->inbound[op], 1);
		cnt_add(&tsh->bytes_in, total);
		/* The copy is ordered before the completion by the release store
		 * that publishes the CQE. */
		if (have)
			icq_publish(qp, ct, rslot, HR_OK, HR_WC_RECV, (uint32_t)total, wr->imm, with_imm,
				    (wr->flags & HR_SEND_SOLICITED) != 0);
		rq_prefetch_next(qp, rslot);
		res.len = (uint32_t)total;
		break;
	}
	case HR_OP_RDMA_WRITE:
	case HR_OP_RDMA_WRITE_WITH_IMM: {
		if (mr_check_remote(qp->rbase, qp->rsize, tsh->pd, wr->rkey, wr->remote_addr, total, HR_ACCESS_REMOTE_WRITE, &rr)) {
			res.st = HR_EREMOTE_ACCESS;
			break;
		}
		struct shm_rwqe w;
		uint64_t rslot = 0, ct = 0;
		int have = 0;
		if (with_imm) {
			struct shm_rq_sh *rq = (struct shm_rq_sh *)(qp->rbase + qp->t_rq_off);
			if (shm_rq_pop(rq, qp->t_rcap, &w, &rslot) != 0) {
				res.st = SHM_RNR_PENDING;
				break;
			}
			have = icq_reserve(qp, tsh, HR_OK, &ct) == 0;
		}
		sg_copy(&rr, 1, src, nsrc, copy_streams(qp, wr, total));
		cnt_add(&tsh->inbound[op], 1);
		cnt_add(&tsh->bytes_in, total);
		if (have)
			icq_publish(qp, ct, rslot, HR_OK, HR_WC_RECV_RDMA_WITH_IMM, (uint32_t)total, wr->imm, 1,
				    (wr->flags & HR_SEND_SOLICITED) != 0);
		if (with_imm)
			rq_prefetch_next(qp, rslot);
		res.len = (uint32_t)total;
		break;
	}
	case HR_OP_RDMA_READ: {
		if (local_regions(qp, wr, HR_ACCESS_LOCAL_WRITE, dst)) {
			res.st = HR_ELOCAL_PROT;
			break;
		}
		for (uint32_t i = 0; i < wr->num_sge; i++)
			total += dst[i].len;
		if (mr_check_remote(qp->rbase, qp->rsize, tsh->pd, wr->rkey, wr->remote_addr, total, HR_ACCESS_REMOTE_READ, &rr)) {
			res.st = HR_EREMOTE_ACCESS;
			break;
		}
		sg_copy(dst, (int)wr->num_sge, &rr, 1, 0);
		cnt_add(&tsh->inbound[op], 1);
		res.len = (uint32_t)total;
		break;
	}
	case HR_OP_ATOMIC_FETCH_AND_ADD:
	case HR_OP_ATOMIC_CMP_AND_SWP: {
		if (local_regions(qp, wr, HR_ACCESS_LOCAL_WRITE, dst)) {
			res.st = HR_ELOCAL_PROT;
			break;
		}
		if ((wr->remote_addr & 7) ||
		    mr_check_remote(qp->rbase, qp->rsize, tsh->pd, wr->rkey, wr->remote_addr, 8, HR_ACCESS_REMOTE_ATOMIC, &rr)) {
			res.st = HR_EREMOTE_ACCESS;
			break;
		}
		_Atomic uint64_t *t = (_Atomic uint64_t *)(void *)rr.p;
		uint64_t old;
		if (op == HR_OP_ATOMIC_FETCH_AND_ADD) {
			old = atomic_fetch_add(t, wr->compare_add);
		} else {
			old = wr->compare_add;
			atomic_compare_exchange_strong(t, &old, wr->swap);
		}
		memcpy(dst[0].p, &old, 8);
		cnt_add(&tsh->inbound[op], 1);
		res.len = 8;
		break;
	}
	default:
		res.st = HR_EINVAL;
	}
out:
	atomic_store_explicit(&tent->inflight, win + 1, memory_order_release);
	return res;
}

static void send_cqe(struct shm_qp *qp, struct shm_sqe *e, uint64_t idx, int st, uint32_t len)
{
	/* Verbs report the WITH_IMM sends as plain SEND / RDMA_WRITE on the
	 * requester's side (ibv_poll_cq(3): there is no *_WITH_IMM send opcode). */
	uint32_t op = e->wr.opcode == HR_OP_SEND_WITH_IMM	    ? HR_OP_SEND
		      : e->wr.opcode == HR_OP_RDMA_WRITE_WITH_IMM ? HR_OP_RDMA_WRITE
								  : e->wr.opcode;
	hr_wc wc = {.wr_id = e->wr.wr_id, .status = (uint32_t)st, .opcode = op,
		    .byte_len = len, .qp_num = qp->qpn};
	qp->cnt.completions++;
	if (st != HR_OK)
		qp->cnt.errors++;
	if (shm_cq_push(qp->scq, &wc, 1, idx, &qp->scq_head_cache) != HR_OK) {
		shm_qp_to_error(qp);
		shm_cq_overflowed(qp->scq);
	}
}

/* Runs with qp->lock held. */
void shm_qp_progress(struct shm_qp *qp)
{
	while (qp->sq_next != qp->sq_tail) {
		uint64_t idx = qp->sq_next;
		struct shm_sqe *e = &qp->sq[idx % qp->sq_cap];
		if (atomic_load(&qp->sh->state) == HR_QPS_ERR) {
			send_cqe(qp, e, idx, HR_EFLUSH, 0);
			qp->sq_next++;
			continue;
		}
		if (qp->rnr_deadline && hr_now_ns() < qp->rnr_deadline &&
		    !(qp->peer && atomic_load(&qp->peer->dead)))
			return;
		struct exec_res r = exec_wr(qp, e, qp->inl + (idx % qp->sq_cap) * qp->max_inline);
		if (r.st == SHM_RNR_PENDING) {
			qp->rnr_tries++;
			if (qp->rnr_retry == 0 || (qp->rnr_retry < 7 && qp->rnr_tries > qp->rnr_retry)) {
				r.st = HR_ERNR_RETRY;
			} else {
				qp->rnr_deadline = hr_now_ns() + (uint64_t)qp->dev->rnr_us * 1000ull;
				if (!atomic_exchange(&qp->pending, 1))
					shm_kick(qp->dev->seg.hdr);
				return;
			}
		}
		qp->rnr_tries = 0;
		qp->rnr_deadline = 0;
		qp->sq_next++;
		if (r.st != HR_OK) {
			send_cqe(qp, e, idx, r.st, 0);
			shm_qp_to_error(qp);
			continue;
		}
		qp->cnt.bytes_out += r.len;
		if (e->wr.flags & HR_SEND_SIGNALED)
			send_cqe(qp, e, idx, HR_OK, r.len);
	}
	/* Set only under qp->lock (held here); the service thread reads it
	 * as a hint. Stored only when set: a seq_cst store is an XCHG, a
	 * locked instruction on every post. */
	if (atomic_load_explicit(&qp->pending, memory_order_relaxed))
		atomic_store_explicit(&qp->pending, 0, memory_order_release);
}
