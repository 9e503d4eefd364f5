/* hr_shm_qp.c - shm provider: receive rings, shared receive queues, queue
 * pair lifecycle and posting. Execution is in hr_shm_exec.c. */
#define _GNU_SOURCE
#include "shm_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>


void shm_counters_add(hr_counters *dst, const hr_counters *src)
{
	for (int i = 0; i < HR_OP_COUNT; i++) {
		dst->posted[i] += src->posted[i];
		dst->inbound[i] += src->inbound[i];
	}
	dst->recv_posted += src->recv_posted;
	dst->bytes_out += src->bytes_out;
	dst->bytes_in += src->bytes_in;
	dst->completions += src->completions;
	dst->errors += src->errors;
}

void shm_qp_sh_counters(struct shm_qp_sh *sh, hr_counters *out)
{
	for (int i = 0; i < HR_OP_COUNT; i++)
		out->inbound[i] += atomic_load_explicit(&sh->inbound[i], memory_order_relaxed);
	out->bytes_in += atomic_load_explicit(&sh->bytes_in, memory_order_relaxed);
	out->completions += atomic_load_explicit(&sh->completions, memory_order_relaxed);
	out->errors += atomic_load_explicit(&sh->errors, memory_order_relaxed);
}


/* ---- receive rings ---- */

int shm_rq_pop(struct shm_rq_sh *rq, uint32_t cap, struct shm_rwqe *out, uint64_t *slot)
{
	uint64_t h = atomic_load_explicit(&rq->head, memory_order_acquire);
	for (;;) {
		const struct shm_rwqe *e = &rq->e[h % cap];
		if (atomic_load_explicit(&e->seq, memory_order_acquire) != (uint32_t)(h + 1))
			return -1;
		/* Copy before claiming; the producer reuses the slot only after
		 * head moves on, in which case the CAS fails and we retry. */
		out->wr_id = e->wr_id;
		out->num_sge = e->num_sge <= HR_MAX_SGE ? e->num_sge : HR_MAX_SGE;
		memcpy(out->sg, e->sg, sizeof(e->sg[0]) * out->num_sge);
		if (atomic_compare_exchange_weak_explicit(&rq->head, &h, h + 1, memory_order_acq_rel,
							  memory_order_acquire)) {
			*slot = h;
			return 0;
		}
	}
}

/* The producer's position and the consumer's are the owner's own (posted,
 * done): a slot is reused only once its completion was polled, so the
 * owner's record of it (shadow) stays valid until then. */
static int rq_push(struct shm_rq_sh *rq, uint32_t cap, uint32_t max_sge, const hr_recv_wr *wr, uint32_t n,
		   uint32_t *bad, struct shm_rshadow *shadow, uint64_t *posted, uint64_t done)
{
	for (uint32_t i = 0; i < n; i++) {
		if (wr[i].num_sge > max_sge) {
			*bad = i;
			return HR_EINVAL;
		}
		uint64_t t = *posted;
		if (t - done >= cap) {
			*bad = i;
			return HR_ENORES;
		}
		uint64_t len = 0;
		for (uint32_t j = 0; j < wr[i].num_sge; j++)
			len += wr[i].sg[j].length;
		shadow[t % cap] = (struct shm_rshadow){.wr_id = wr[i].wr_id, .len = len, .slot = t};
		struct shm_rwqe *e = &rq->e[t % cap];
		e->wr_id = wr[i].wr_id;
		e->num_sge = wr[i].num_sge;
		memcpy(e->sg, wr[i].sg, sizeof(e->sg[0]) * wr[i].num_sge);
		atomic_store_explicit(&e->seq, (uint32_t)(t + 1), memory_order_release);
		atomic_store_explicit(&rq->tail, t + 1, memory_order_relaxed);
		*posted = t + 1;
	}
	return HR_OK;
}

/* The QP's own receives still posted flush: the receive CQ's poll reports
 * them (after whatever the peer completed before the error); here an armed
 * CQ is told there is something to poll. SRQ entries belong to the SRQ. */
void shm_rq_flush(struct shm_qp *qp)
{
	if (qp->srq)
		return;
	if (atomic_load(&qp->rq_done) != atomic_load(&qp->rq_posted))
		shm_cq_fire_local(qp->rcq);
}

/* ---- SRQ ---- */

static struct shm_rq_sh *rq_create(struct shm_pd *pd, uint32_t max_wr, uint32_t max_sge,
				   uint64_t *off, uint64_t *bytes)
{
	struct shm_dev *d = pd->dev;
	*bytes = sizeof(struct shm_rq_sh) + (uint64_t)max_wr * sizeof(struct shm_rwqe);
	pthread_mutex_lock(&d->lock);
	*off = shm_alloc(&pd->seg, *bytes, CACHELINE);
	pthread_mutex_unlock(&d->lock);
	if (!*off)
		return NULL;
	struct shm_rq_sh *rq = (struct shm_rq_sh *)(pd->seg.base + *off);
	memset(rq, 0, sizeof(*rq));
	rq->cap = max_wr;
	rq->max_sge = max_sge;
	return rq;
}

int shm_create_srq(hr_pd *pd, uint32_t max_wr, uint32_t max_sge, hr_srq **out)
{
	struct shm_dev *d = ((struct shm_pd *)pd)->dev;
	if (max_wr == 0 || max_wr > SHM_MAX_WR || max_sge == 0 || max_sge > HR_MAX_SGE)
		return HR_EINVAL;
	struct shm_srq *s = calloc(1, sizeof(*s));
	if (!s)
		return HR_ENOMEM;
	s->prov = &hr_shm_provider;
	s->dev = d;
	s->pd = (struct shm_pd *)pd;
	s->sh = rq_create(s->pd, max_wr, max_sge, &s->off, &s->bytes);
	if (!s->sh) {
		free(s);
		return HR_ENOMEM;
	}
	s->cap = max_wr;
	s->max_sge = max_sge;
	s->shadow = calloc(max_wr, sizeof(*s->shadow));
	if (!s->shadow) {
		pthread_mutex_lock(&d->lock);
		shm_free(&s->pd->seg, s->off, s->bytes);
		pthread_mutex_unlock(&d->lock);
		free(s);
		return HR_ENOMEM;
	}
	atomic_fetch_add(&s->pd->refs, 1);
	pthread_mutex_init(&s->lock, NULL);
	*out = (hr_srq *)s;
	return HR_OK;
}

int shm_srq_max_wr(hr_srq *hs) { return (int)((struct shm_srq *)hs)->cap; }

int shm_destroy_srq(hr_srq *hs)
{
	struct shm_srq *s = (struct shm_srq *)hs;
	if (atomic_load(&s->refs) > 0)
		return HR_ESTATE;
	pthread_mutex_lock(&s->dev->lock);
	shm_free(&s->pd->seg, s->off, s->bytes);
	pthread_mutex_unlock(&s->dev->lock);
	atomic_fetch_sub(&s->pd->refs, 1);
	pthread_mutex_destroy(&s->lock);
	free(s->shadow);
	free(s);
	return HR_OK;
}

int shm_post_srq_recv(hr_srq *hs, const hr_recv_wr *wr, uint32_t n, uint32_t *bad)
{
	struct shm_srq *s = (struct shm_srq *)hs;
	pthread_mutex_lock(&s->lock);
	int st = rq_push(s->sh, s->cap, s->max_sge, wr, n, bad, s->shadow, &s->posted, s->done);
	pthread_mutex_unlock(&s->lock);
	return st;
}

/* ---- QP lifecycle ---- */

int shm_create_qp(hr_pd *pd, const hr_qp_init *in, hr_qp **out)
{
	struct shm_dev *d = ((struct shm_pd *)pd)->dev;
	if (!in || !in->send_cq || !in->recv_cq || in->max_send_wr == 0 || in->max_send_wr > SHM_MAX_WR ||
	    in->max_sge > HR_MAX_SGE || in->max_inline > SHM_MAX_INLINE || in->rnr_retry > 7 ||
	    (!in->srq && (in->max_recv_wr == 0 || in->max_recv_wr > SHM_MAX_WR)))
		return HR_EINVAL;
	struct shm_qp *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return HR_ENOMEM;
	qp->prov = &hr_shm_provider;
	qp->dev = d;
	qp->pdp = (struct shm_pd *)pd;
	qp->pd = qp->pdp->id;
	qp->scq = (struct shm_cq *)in->send_cq;
	qp->rcq = (struct shm_cq *)in->recv_cq;
	qp->srq = (struct shm_srq *)in->srq;
	qp->sq_cap = in->max_send_wr;
	qp->max_sge = in->max_sge ? in->max_sge : 1;
	qp->max_inline = in->max_inline;
	qp->rnr_retry = in->rnr_retry;
	qp->max_recv = qp->srq ? 0 : in->max_recv_wr;
	qp->wake_rw = qp->t_wake = -1;
	pthread_mutex_init(&qp->lock, NULL);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	int st = HR_ENOMEM;
	qp->sq = calloc(qp->sq_cap, sizeof(*qp->sq));
	qp->inl = malloc((size_t)qp->sq_cap * (qp->max_inline ? qp->max_inline : 1));
	if (!qp->sq || !qp->inl)
		goto fail;
	if (!qp->srq && !(qp->rshadow = calloc(qp->max_recv, sizeof(*qp->rshadow))))
		goto fail;
	struct shm_seg *sg = &qp->pdp->seg;
	if (qp->srq) {
		/* The SRQ's ring is reached through the QP's PD segment. */
		st = HR_EINVAL;
		if (qp->srq->pd != qp->pdp)
			goto fail;
		st = HR_ENOMEM;
		qp->rq = qp->srq->sh;
	} else {
		qp->rq = rq_create(qp->pdp, in->max_recv_wr, qp->max_sge, &qp->rq_off, &qp->rq_bytes);
		if (!qp->rq)
			goto fail;
	}
	/* The inbound completion ring follows the control block. It never
	 * holds more than the receives posted and not yet polled (a slot is
	 * reposted only after its completion was polled). */
	uint32_t icap = 1, rcap = qp->srq ? qp->srq->cap : qp->max_recv;
	while (icap < rcap)
		icap <<= 1;
	uint64_t sh_sz = (sizeof(struct shm_qp_sh) + CACHELINE - 1) & ~(uint64_t)(CACHELINE - 1);
	qp->sh_bytes = sh_sz + sizeof(struct shm_icq_sh) + (uint64_t)icap * sizeof(struct shm_icqe);
	pthread_mutex_lock(&d->lock);
	qp->sh_off = shm_alloc(sg, qp->sh_bytes, CACHELINE);
	int idx = -1;
	for (int i = 1; qp->sh_off && i < SHM_MAX_QP; i++) {
		if (!atomic_load(&d->qps[i]) && !shm_inflight_open(atomic_load(&sg->hdr->qp[i].inflight))) {
			idx = i;
			break;
		}
	}
	if (idx < 0) {
		if (qp->sh_off)
			shm_free(sg, qp->sh_off, qp->sh_bytes);
		qp->sh_off = 0;
		pthread_mutex_unlock(&d->lock);
		goto fail;
	}
	uint32_t gen = d->qp_gen[idx]++;
	if (d->qp_gen[idx] >= (1u << 14))
		d->qp_gen[idx] = 1;
	qp->idx = (uint32_t)idx;
	qp->qpn = (gen << 10) | (uint32_t)idx;
	qp->sh = (struct shm_qp_sh *)(sg->base + qp->sh_off);
	memset(qp->sh, 0, qp->sh_bytes);
	qp->sh->qpn = qp->qpn;
	qp->sh->pd = qp->pd;
	atomic_store_explicit(&qp->sh->peer_cpu, -1, memory_order_relaxed);
	atomic_store_explicit(&qp->noted_cpu, -1, memory_order_relaxed);
	qp->sh->icq_off = qp->sh_off + sh_sz;
	qp->icq = (struct shm_icq_sh *)((uint8_t *)qp->sh + sh_sz);
	qp->icq->cap = icap;
	qp->icq_cap = icap;
	qp->sh->rq_off = qp->srq ? qp->srq->off : qp->rq_off;
	atomic_store(&qp->sh->state, HR_QPS_INIT);
	sg->hdr->qp[idx].off = qp->sh_off;
	atomic_store(&sg->hdr->qp[idx].qpn, qp->qpn);
	atomic_store(&d->qps[idx], qp);
	pthread_mutex_unlock(&d->lock);
	atomic_fetch_add(&qp->scq->refs, 1);
	atomic_fetch_add(&qp->rcq->refs, 1);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->refs, 1);
	atomic_fetch_add(&qp->pdp->refs, 1);
	if (getrandom(&qp->psn, sizeof(qp->psn), 0) != sizeof(qp->psn))
		qp->psn = qp->qpn * 2654435761u;
	qp->psn &= 0xffffff;
	if ((st = shm_wake_create(qp)) != HR_OK || (st = shm_cq_attach(qp->rcq, qp)) != HR_OK) {
		shm_destroy_qp((hr_qp *)qp);
		return st;
	}
	*out = (hr_qp *)qp;
	return HR_OK;
fail:
	if (qp->rq && !qp->srq) {
		pthread_mutex_lock(&d->lock);
		shm_free(&qp->pdp->seg, qp->rq_off, qp->rq_bytes);
		pthread_mutex_unlock(&d->lock);
	}
	free(qp->sq);
	free(qp->inl);
	free(qp->rshadow);
	pthread_mutex_destroy(&qp->lock);
	pthread_spin_destroy(&qp->rq_lock);
	free(qp);
	return st;
}

int shm_destroy_qp(hr_qp *hq)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	struct shm_dev *d = qp->dev;
	struct shm_seg *sg = &qp->pdp->seg;
	struct shm_qp_ent *ent = &sg->hdr->qp[qp->idx];
	shm_cq_detach(qp->rcq, qp); /* its poll no longer reads our ring */
	atomic_store(&qp->sh->state, HR_QPS_ERR);
	atomic_store(&ent->qpn, 0);
	/* An initiator inside one of our rings holds ent->inflight open; wait
	 * it out so the rings can be reused. If it never leaves (it died
	 * mid-copy), leak the shared memory rather than hand it out again. */
	uint64_t deadline = hr_now_ns() + SHM_DRAIN_WAIT_NS;
	int drained = 1;
	while (shm_inflight_open(atomic_load(&ent->inflight))) {
		if (hr_now_ns() > deadline) {
			drained = 0;
			break;
		}
		sched_yield();
	}
	hr_counters c;
	shm_qp_counters(hq, &c);
	pthread_mutex_lock(&d->lock);
	atomic_store(&d->qps[qp->idx], NULL);
	shm_counters_add(&d->gone, &c);
	if (drained) {
		shm_free(sg, qp->sh_off, qp->sh_bytes);
		if (!qp->srq)
			shm_free(sg, qp->rq_off, qp->rq_bytes);
	}
	pthread_mutex_unlock(&d->lock);
	shm_wake_destroy(qp); /* while our reference keeps the channel */
	atomic_fetch_sub(&qp->scq->refs, 1);
	atomic_fetch_sub(&qp->rcq->refs, 1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->refs, 1);
	atomic_fetch_sub(&qp->pdp->refs, 1);
	if (qp->peer)
		shm_peer_put(d, qp->peer);
	if (qp->t_wake >= 0)
		close(qp->t_wake);
	free(qp->sq);
	free(qp->inl);
	free(qp->rshadow);
	pthread_mutex_destroy(&qp->lock);
	pthread_spin_destroy(&qp->rq_lock);
	free(qp);
	return HR_OK;
}

int shm_qp_local_attr(hr_qp *hq, hr_qp_attr *out)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	memset(out, 0, sizeof(*out));
	out->qpn = qp->qpn;
	out->psn = qp->psn;
	out->gid_index = -1;
	out->mtu = 4096;
	struct shm_seg *sg = &qp->pdp->seg;
	struct shm_blob b = {
		.pid = sg->hdr->pid,
		.fd = sg->fd,
		.seg_id = sg->hdr->seg_id,
		.size = sg->size,
		.wake_fd = qp->wake_rw,
		.wake_id = qp->wake_id,
		.wake_ino = qp->wake_ino,
	};
	memcpy(out->blob, &b, sizeof(b));
	out->blob_len = sizeof(b);
	return HR_OK;
}

int shm_qp_connect(hr_qp *hq, const hr_qp_attr *r)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	struct shm_dev *d = qp->dev;
	struct shm_blob b;
	if (!r || r->blob_len != sizeof(b) || r->qpn == 0)
		return HR_EPEER;
	if (atomic_load(&qp->sh->state) != HR_QPS_INIT)
		return HR_ESTATE;
	memcpy(&b, r->blob, sizeof(b));
	/* The peer's QP's PD segment, mapped on its own (also for a QP of this
	 * process: the mapping outlives the other PD, so its teardown cannot
	 * pull memory from under us), and its QP's wake pipe. */
	int st;
	struct shm_peer *peer = shm_peer_get(d, b.pid, b.fd, b.seg_id, b.size, &st);
	if (!peer)
		return st;
	int wake = shm_wake_open(b.pid, b.wake_fd, b.wake_id, b.wake_ino);
	if (b.wake_fd >= 0 && wake < 0) {
		shm_peer_put(d, peer);
		return HR_EPEER;
	}
	struct shm_hdr *rh = (struct shm_hdr *)peer->base;
	struct shm_qp_ent *ent = &rh->qp[r->qpn & (SHM_MAX_QP - 1)];
	uint64_t eoff = ent->off;
	if (atomic_load(&ent->qpn) != r->qpn || eoff < sizeof(struct shm_hdr) ||
	    eoff > peer->size - sizeof(struct shm_qp_sh)) {
		shm_peer_put(d, peer);
		if (wake >= 0)
			close(wake);
		return HR_EPEER;
	}
	pthread_mutex_lock(&qp->lock);
	qp->peer = peer;
	qp->rbase = peer->base;
	qp->rsize = peer->size;
	qp->rhdr = rh;
	qp->t_wake = wake;
	qp->rqpn = r->qpn;
	qp->t_sh_off = 0; /* the target's control block: checked at its first work request */
	/* RTR then RTS: nothing to program, the peer's rings are reachable. */
	atomic_store(&qp->sh->state, HR_QPS_RTS);
	pthread_mutex_unlock(&qp->lock);
	return HR_OK;
}

void shm_qp_to_error(struct shm_qp *qp)
{
	if (atomic_exchange(&qp->sh->state, HR_QPS_ERR) != HR_QPS_ERR)
		shm_rq_flush(qp);
}

/* Service thread, qp->lock held: finish an error another process caused. */
void shm_qp_sweep(struct shm_qp *qp)
{
	shm_rq_flush(qp);
}

int shm_qp_set_error(hr_qp *hq)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	pthread_mutex_lock(&qp->lock);
	shm_qp_to_error(qp);
	shm_qp_progress(qp);
	pthread_mutex_unlock(&qp->lock);
	return HR_OK;
}

int shm_qp_state(hr_qp *hq)
{
	return (int)atomic_load(&((struct shm_qp *)hq)->sh->state);
}

int shm_qp_counters(hr_qp *hq, hr_counters *out)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	pthread_mutex_lock(&qp->lock);
	*out = qp->cnt;
	pthread_mutex_unlock(&qp->lock);
	pthread_spin_lock(&qp->rq_lock);
	out->recv_posted = qp->recv_posted;
	pthread_spin_unlock(&qp->rq_lock);
	shm_qp_sh_counters(qp->sh, out);
	return HR_OK;
}

int shm_qp_caps(hr_qp *hq, hr_qp_caps *out)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	out->max_send_wr = qp->sq_cap;
	out->max_recv_wr = qp->max_recv;
	out->max_sge = qp->max_sge;
	out->max_inline = qp->max_inline;
	return HR_OK;
}

void shm_qp_retire(struct shm_dev *d, uint32_t qpn, uint64_t sq_idx)
{
	struct shm_qp *qp = atomic_load(&d->qps[qpn & (SHM_MAX_QP - 1)]);
	if (qp && qp->qpn == qpn && atomic_load_explicit(&qp->sq_retired, memory_order_relaxed) < sq_idx + 1)
		atomic_store_explicit(&qp->sq_retired, sq_idx + 1, memory_order_release);
}

static int check_wr(struct shm_qp *qp, const hr_send_wr *wr, uint64_t *inl_len)
{
	if (wr->opcode >= HR_OP_COUNT || wr->num_sge > qp->max_sge)
		return HR_EINVAL;
	uint64_t len = 0;
	for (uint32_t i = 0; i < wr->num_sge; i++)
		len += wr->sg[i].length;
	if (len > (1u << 31))
		return HR_EINVAL;
	if (wr->flags & HR_SEND_INLINE) {
		if (len > qp->max_inline || wr->opcode == HR_OP_RDMA_READ ||
		    wr->opcode >= HR_OP_ATOMIC_FETCH_AND_ADD)
			return HR_EINVAL;
	}
	if (wr->opcode >= HR_OP_ATOMIC_FETCH_AND_ADD && (wr->num_sge != 1 || wr->sg[0].length != 8))
		return HR_EINVAL;
	*inl_len = len;
	return HR_OK;
}

int shm_post_send(hr_qp *hq, const hr_send_wr *wr, uint32_t n, uint32_t *bad)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	int st = HR_OK;
	pthread_mutex_lock(&qp->lock);
	uint32_t s = atomic_load(&qp->sh->state);
	if (s != HR_QPS_RTS && s != HR_QPS_ERR) {
		*bad = 0;
		pthread_mutex_unlock(&qp->lock);
		return HR_ESTATE;
	}
	uint64_t retired = atomic_load_explicit(&qp->sq_retired, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t len;
		if ((st = check_wr(qp, &wr[i], &len)) != HR_OK) {
			*bad = i;
			break;
		}
		if (qp->sq_tail - retired >= qp->sq_cap) {
			st = HR_ENORES;
			*bad = i;
			break;
		}
		uint64_t idx = qp->sq_tail;
		struct shm_sqe *e = &qp->sq[idx % qp->sq_cap];
		e->wr = wr[i];
		e->inl_len = 0;
		if (wr[i].flags & HR_SEND_INLINE) {
			uint8_t *p = qp->inl + (idx % qp->sq_cap) * qp->max_inline;
			for (uint32_t j = 0; j < wr[i].num_sge; j++) {
				memcpy(p, (const void *)(uintptr_t)wr[i].sg[j].addr, wr[i].sg[j].length);
				p += wr[i].sg[j].length;
			}
			e->inl_len = (uint32_t)len;
		}
		qp->cnt.posted[wr[i].opcode]++;
		qp->sq_tail++;
	}
	/* The doorbell: everything accepted so far executes in order. */
	shm_qp_progress(qp);
	pthread_mutex_unlock(&qp->lock);
	return st;
}

/* Into the connected target's block (the word shm_qp_peer_cpu reads
 * there), once exec_wr has validated it; under the lock that keeps the
 * mapping. Called where a waiting thread spins or can have moved
 * (hr_proto.c), never on the post path; only a change is stored, so a
 * spin that notes its CPU at each phase start and yield takes the lock
 * only when the thread moved. */
int shm_qp_note_cpu(hr_qp *hq)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	int cpu = sched_getcpu();
	if (cpu < 0 || cpu == atomic_load_explicit(&qp->noted_cpu, memory_order_relaxed))
		return HR_OK;
	pthread_mutex_lock(&qp->lock);
	if (qp->t_sh_off && qp->rbase) {
		atomic_store_explicit(&((struct shm_qp_sh *)(qp->rbase + qp->t_sh_off))->peer_cpu, cpu,
				      memory_order_relaxed);
		atomic_store_explicit(&qp->noted_cpu, cpu, memory_order_relaxed);
	}
	pthread_mutex_unlock(&qp->lock);
	return HR_OK;
}

/* Our block's word, written by our peer's shm_qp_note_cpu: a hint, so a
 * peer that forges it misleads only its own lane's spinning. */
int shm_qp_peer_cpu(hr_qp *hq)
{
	int c = atomic_load_explicit(&((struct shm_qp *)hq)->sh->peer_cpu, memory_order_relaxed);
	return c >= 0 ? c : -1;
}

int shm_post_recv(hr_qp *hq, const hr_recv_wr *wr, uint32_t n, uint32_t *bad)
{
	struct shm_qp *qp = (struct shm_qp *)hq;
	if (qp->srq) {
		*bad = 0;
		return HR_EINVAL;
	}
	pthread_spin_lock(&qp->rq_lock);
	uint64_t posted = atomic_load_explicit(&qp->rq_posted, memory_order_relaxed);
	int st = rq_push(qp->rq, qp->max_recv, qp->max_sge, wr, n, bad, qp->rshadow, &posted,
			 atomic_load_explicit(&qp->rq_done, memory_order_acquire));
	atomic_store_explicit(&qp->rq_posted, posted, memory_order_release);
	qp->recv_posted += st == HR_OK ? n : *bad;
	pthread_spin_unlock(&qp->rq_lock);
	/* Receives posted to a QP in error complete with a flush, also when the
	 * error raced with this post. */
	if (atomic_load(&qp->sh->state) == HR_QPS_ERR)
		shm_rq_flush(qp);
	return st;
}
