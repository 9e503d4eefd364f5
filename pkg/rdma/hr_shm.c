/* hr_shm.c - shm provider: protection domains, memory regions, completion
 * channels, completion queues and the provider table. The device is in
 * hr_shm_dev.c, QPs in hr_shm_qp.c, the execution engine in hr_shm_exec.c. */
#define _GNU_SOURCE
#include "shm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int shm_query(hr_dev *hd, hr_dev_info *out)
{
	(void)hd;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "shm0");
	out->port = 1;
	out->mtu = 4096;
	out->gid_index = -1;
	out->max_qp_wr = SHM_MAX_WR;
	out->max_sge = HR_MAX_SGE;
	out->max_inline = SHM_MAX_INLINE;
	out->max_cqe = SHM_MAX_CQE;
	return HR_OK;
}

static int shm_alloc_pd(hr_dev *hd, hr_pd **out)
{
	struct shm_pd *pd = calloc(1, sizeof(*pd));
	if (!pd)
		return HR_ENOMEM;
	pd->prov = &hr_shm_provider;
	pd->dev = (struct shm_dev *)hd;
	/* Ids are never reused while the device lives (2^32 PDs): a key of a
	 * freed PD cannot start working for a new one. */
	pd->id = atomic_fetch_add(&pd->dev->next_pd, 1) + 1;
	if (pd->id == 0) {
		free(pd);
		return HR_ENOMEM;
	}
	/* The PD's own segment: a peer of one of its QPs maps this and the
	 * device segment, nothing of the device's other PDs. */
	int st = shm_seg_create(&pd->seg, pd->dev->size);
	if (st != HR_OK) {
		free(pd);
		return st;
	}
	*out = (hr_pd *)pd;
	return HR_OK;
}

static int shm_free_pd(hr_pd *p)
{
	struct shm_pd *pd = (struct shm_pd *)p;
	if (atomic_load(&pd->refs) > 0)
		return HR_ESTATE; /* as ibv's EBUSY: MRs, SRQs or QPs remain */
	pthread_mutex_lock(&pd->dev->lock);
	shm_seg_destroy(&pd->seg);
	pthread_mutex_unlock(&pd->dev->lock);
	free(pd);
	return HR_OK;
}

static int shm_alloc_buf(hr_pd *p, size_t len, void **out)
{
	struct shm_pd *pd = (struct shm_pd *)p;
	struct shm_dev *d = pd->dev;
	if (len == 0)
		return HR_EINVAL;
	pthread_mutex_lock(&d->lock);
	uint64_t off = shm_alloc(&pd->seg, len, 4096);
	pthread_mutex_unlock(&d->lock);
	if (!off)
		return HR_ENOMEM;
	atomic_fetch_add(&pd->refs, 1);
	*out = pd->seg.base + off;
	return HR_OK;
}

static void shm_free_buf(hr_pd *p, void *ptr, size_t len)
{
	struct shm_pd *pd = (struct shm_pd *)p;
	struct shm_dev *d = pd->dev;
	uint8_t *b = ptr;
	if (!b || b < pd->seg.base || b >= pd->seg.base + pd->seg.size)
		return;
	pthread_mutex_lock(&d->lock);
	shm_free(&pd->seg, (uint64_t)(b - pd->seg.base), len);
	pthread_mutex_unlock(&d->lock);
	atomic_fetch_sub(&pd->refs, 1);
}

static int shm_reg_mr(hr_pd *p, void *addr, size_t len, uint32_t access, hr_mr **out)
{
	struct shm_pd *pd = (struct shm_pd *)p;
	struct shm_dev *d = pd->dev;
	struct shm_seg *sg = &pd->seg;
	uint8_t *a = addr;
	if (len == 0 || access > 15)
		return HR_EINVAL;
	/* Only memory of the PD's own segment can be reached by a peer. */
	if (a < sg->base + sizeof(struct shm_hdr) || a >= sg->base + sg->size ||
	    len > (uint64_t)(sg->base + sg->size - a))
		return HR_EINVAL;
	/* As on hardware, remote write/atomic requires local write. */
	if ((access & (HR_ACCESS_REMOTE_WRITE | HR_ACCESS_REMOTE_ATOMIC)) && !(access & HR_ACCESS_LOCAL_WRITE))
		return HR_EINVAL;
	struct shm_mr *m = calloc(1, sizeof(*m));
	if (!m)
		return HR_ENOMEM;
	pthread_mutex_lock(&d->lock);
	int idx = -1;
	for (int i = 1; i < SHM_MAX_MR; i++) {
		if (atomic_load(&sg->hdr->mr[i].key) == 0 && atomic_load(&sg->hdr->mr_busy[i].n) == 0) {
			idx = i;
			break;
		}
	}
	if (idx < 0) {
		pthread_mutex_unlock(&d->lock);
		free(m);
		return HR_ENOMEM;
	}
	uint32_t gen = d->mr_gen[idx]++;
	if (d->mr_gen[idx] >= (1u << 20))
		d->mr_gen[idx] = 1;
	uint32_t key = (gen << 12) | (uint32_t)idx;
	struct shm_mr_ent *e = &sg->hdr->mr[idx];
	e->access = access;
	e->va = (uint64_t)(uintptr_t)a;
	e->off = (uint64_t)(a - sg->base);
	e->len = len;
	e->pd = pd->id;
	atomic_store_explicit(&e->key, key, memory_order_release);
	pthread_mutex_unlock(&d->lock);
	atomic_fetch_add(&pd->refs, 1);
	m->pub.prov = &hr_shm_provider;
	m->pub.addr = addr;
	m->pub.length = len;
	m->pub.lkey = key;
	m->pub.rkey = key;
	m->pub.access = access;
	m->pd = pd;
	m->idx = (uint32_t)idx;
	*out = &m->pub;
	return HR_OK;
}

static int shm_dereg_mr(hr_mr *pm)
{
	struct shm_mr *m = (struct shm_mr *)pm;
	struct shm_mr_ent *e = &m->pd->seg.hdr->mr[m->idx];
	_Atomic uint32_t *busy = &m->pd->seg.hdr->mr_busy[m->idx].n;
	atomic_store(&e->key, 0);
	/* Pairs with the initiator's inflight++ then key check: once we see no
	 * access in flight, none can start. */
	uint64_t deadline = hr_now_ns() + SHM_DRAIN_WAIT_NS;
	int st = HR_OK;
	while (atomic_load(busy) != 0) {
		if (hr_now_ns() > deadline) {
			st = HR_EIO;
			break;
		}
		sched_yield();
	}
	atomic_fetch_sub(&m->pd->refs, 1);
	free(m);
	return st;
}

/* ---- completion channels ---- */

static int shm_create_chan(hr_dev *hd, hr_chan **out)
{
	struct shm_dev *d = (struct shm_dev *)hd;
	struct shm_chan *c = calloc(1, sizeof(*c));
	if (!c)
		return HR_ENOMEM;
	c->prov = &hr_shm_provider;
	c->dev = d;
	c->efd = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_lock(&d->lock);
	c->off = shm_alloc(&d->seg, sizeof(struct shm_chan_sh), CACHELINE);
	if (c->off) {
		c->next = d->chans;
		d->chans = c;
	}
	pthread_mutex_unlock(&d->lock);
	if (!c->off) {
		pthread_mutex_destroy(&c->lock);
		free(c);
		return HR_ENOMEM;
	}
	c->sh = (struct shm_chan_sh *)(d->seg.base + c->off);
	memset(c->sh, 0, sizeof(*c->sh));
	*out = (hr_chan *)c;
	return HR_OK;
}

static int shm_destroy_chan(hr_chan *hc)
{
	struct shm_chan *c = (struct shm_chan *)hc;
	struct shm_dev *d = c->dev;
	if (c->cqs)
		return HR_ESTATE;
	pthread_mutex_lock(&d->lock);
	for (struct shm_chan **pp = &d->chans; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	shm_free(&d->seg, c->off, sizeof(struct shm_chan_sh));
	pthread_mutex_unlock(&d->lock);
	if (c->efd >= 0)
		close(c->efd);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return HR_OK;
}

/* The fd becomes readable when an event is waiting; the service thread
 * forwards the cross-process futex wakeup into a local eventfd. */
static int shm_chan_fd(hr_chan *hc)
{
	struct shm_chan *c = (struct shm_chan *)hc;
	pthread_mutex_lock(&c->dev->lock);
	if (c->efd < 0) {
		c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (c->efd >= 0) {
			c->delivered = atomic_load(&c->sh->seq);
			atomic_store(&c->sh->fd_wanted, 1);
		}
	}
	int fd = c->efd;
	pthread_mutex_unlock(&c->dev->lock);
	return fd < 0 ? -HR_EIO : fd;
}

/* ---- completion queues ---- */

static int shm_create_cq(hr_dev *hd, uint32_t depth, hr_chan *hc, hr_cq **out)
{
	struct shm_dev *d = (struct shm_dev *)hd;
	if (depth == 0 || depth > SHM_MAX_CQE)
		return HR_EINVAL;
	uint32_t cap = 1;
	while (cap < depth)
		cap <<= 1;
	struct shm_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return HR_ENOMEM;
	cq->prov = &hr_shm_provider;
	cq->dev = d;
	cq->bytes = sizeof(struct shm_cq_sh) + (uint64_t)cap * sizeof(struct shm_cqe);
	pthread_mutex_lock(&d->lock);
	cq->off = shm_alloc(&d->seg, cq->bytes, CACHELINE);
	pthread_mutex_unlock(&d->lock);
	if (!cq->off) {
		free(cq);
		return HR_ENOMEM;
	}
	cq->sh = (struct shm_cq_sh *)(d->seg.base + cq->off);
	memset(cq->sh, 0, cq->bytes);
	cq->sh->cap = cap;
	cq->cap = cap;
	if (hc) {
		struct shm_chan *c = (struct shm_chan *)hc;
		cq->chan = c;
		cq->sh->chan_off = c->off;
		cq->chan_off = c->off;
		pthread_mutex_lock(&c->lock);
		cq->chan_next = c->cqs;
		c->cqs = cq;
		pthread_mutex_unlock(&c->lock);
	}
	*out = (hr_cq *)cq;
	return HR_OK;
}

static int shm_destroy_cq(hr_cq *hcq)
{
	struct shm_cq *cq = (struct shm_cq *)hcq;
	if (atomic_load(&cq->refs) > 0)
		return HR_ESTATE; /* QPs still use it, as ibv's EBUSY */
	if (cq->chan) {
		struct shm_chan *c = cq->chan;
		pthread_mutex_lock(&c->lock);
		for (struct shm_cq **pp = &c->cqs; *pp; pp = &(*pp)->chan_next) {
			if (*pp == cq) {
				*pp = cq->chan_next;
				break;
			}
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_lock(&cq->dev->lock);
	shm_free(&cq->dev->seg, cq->off, cq->bytes);
	pthread_mutex_unlock(&cq->dev->lock);
	free(cq);
	return HR_OK;
}

/* An overrun CQ reports the overflow from then on. Its producer calls this
 * after moving its QP to the error state, so whoever polls the overflow finds
 * the QP in error (as on ibv). */
void shm_cq_overflowed(struct shm_cq_sh *cq)
{
	atomic_store(&cq->overflow, 1);
}

/* cap and chan_off are the producer's validated copies, never re-read from
 * the shared header. A full CQ returns HR_ECQ_OVERFLOW; the caller then
 * fails its QP and calls shm_cq_overflowed. */
int shm_cq_push(uint8_t *base, struct shm_cq_sh *cq, uint32_t cap, uint64_t chan_off, const hr_wc *wc,
		int is_send, uint64_t sq_idx, int solicited, uint64_t *head_cache)
{
	uint64_t t = atomic_load_explicit(&cq->tail, memory_order_relaxed);
	uint64_t local_cache = 0, *hc = head_cache ? head_cache : &local_cache;
	for (;;) {
		if (!head_cache || t - *hc >= cap)
			*hc = atomic_load_explicit(&cq->head, memory_order_acquire);
		if (t - *hc >= cap)
			return HR_ECQ_OVERFLOW; /* the caller fails its QP, then publishes */
		if (atomic_compare_exchange_weak_explicit(&cq->tail, &t, t + 1, memory_order_acq_rel,
							  memory_order_relaxed))
			break;
	}
	struct shm_cqe *e = &cq->e[t & (cap - 1)];
	e->wc = *wc;
	e->is_send = (uint32_t)is_send;
	e->sq_idx = sq_idx;
	atomic_store_explicit(&e->seq, t + 1, memory_order_release);

	uint32_t a = atomic_load_explicit(&cq->armed, memory_order_relaxed);
	if (a == 0 || (a == 2 && !solicited && wc->status == HR_OK))
		return HR_OK;
	if (atomic_exchange(&cq->armed, 0) == 0 || !chan_off)
		return HR_OK;
	struct shm_chan_sh *ch = (struct shm_chan_sh *)(base + chan_off);
	atomic_store(&cq->pending, 1);
	atomic_fetch_add(&ch->seq, 1);
	if (atomic_load(&ch->waiters))
		shm_futex_wake(&ch->seq);
	if (atomic_load(&ch->fd_wanted))
		shm_kick((struct shm_hdr *)base);
	return HR_OK;
}

static int shm_poll_cq(hr_cq *hcq, int n, hr_wc *wc)
{
	struct shm_cq *cq = (struct shm_cq *)hcq;
	struct shm_cq_sh *sh = cq->sh;
	uint64_t h = cq->cons;
	int got = 0;
	while (got < n) {
		struct shm_cqe *e = &sh->e[h & (cq->cap - 1)];
		if (atomic_load_explicit(&e->seq, memory_order_acquire) != h + 1)
			break;
		wc[got] = e->wc;
		if (e->is_send)
			shm_qp_retire(cq->dev, e->wc.qp_num, e->sq_idx);
		got++;
		h++;
	}
	if (got) {
		cq->cons = h;
		/* One store per batch: the head line is shared with producers. */
		atomic_store_explicit(&sh->head, h, memory_order_release);
		return got;
	}
	if (atomic_load_explicit(&sh->overflow, memory_order_acquire))
		return -HR_ECQ_OVERFLOW;
	return 0;
}

static int shm_arm_cq(hr_cq *hcq, int solicited_only)
{
	struct shm_cq *cq = (struct shm_cq *)hcq;
	if (!cq->chan)
		return HR_EINVAL;
	atomic_store(&cq->sh->armed, solicited_only ? 2u : 1u);
	return HR_OK;
}

static int shm_get_cq_event(hr_chan *hc, int timeout_ms, hr_cq **out)
{
	struct shm_chan *c = (struct shm_chan *)hc;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : hr_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		atomic_fetch_add(&c->sh->waiters, 1);
		uint32_t s = atomic_load(&c->sh->seq);
		struct shm_cq *found = NULL;
		pthread_mutex_lock(&c->lock);
		for (struct shm_cq *cq = c->cqs; cq; cq = cq->chan_next) {
			if (atomic_exchange(&cq->sh->pending, 0)) {
				found = cq;
				break;
			}
		}
		pthread_mutex_unlock(&c->lock);
		if (found) {
			atomic_fetch_sub(&c->sh->waiters, 1);
			if (c->efd >= 0) {
				uint64_t v;
				ssize_t r = read(c->efd, &v, sizeof(v));
				(void)r;
			}
			*out = (hr_cq *)found;
			return HR_OK;
		}
		int64_t left = -1;
		if (deadline != UINT64_MAX) {
			uint64_t now = hr_now_ns();
			if (now >= deadline) {
				atomic_fetch_sub(&c->sh->waiters, 1);
				return HR_ETIMEDOUT;
			}
			left = (int64_t)((deadline - now + 999) / 1000);
		}
		shm_futex_wait(&c->sh->seq, s, left);
		atomic_fetch_sub(&c->sh->waiters, 1);
	}
}

static void shm_ack_cq_events(hr_cq *hcq, unsigned n)
{
	((struct shm_cq *)hcq)->events_acked += n;
}

static int shm_cq_depth(hr_cq *hcq) { return (int)((struct shm_cq *)hcq)->cap; }

static int shm_dev_counters(hr_dev *hd, hr_counters *out)
{
	struct shm_dev *d = (struct shm_dev *)hd;
	pthread_mutex_lock(&d->lock);
	*out = d->gone;
	for (int i = 0; i < SHM_MAX_QP; i++) {
		struct shm_qp *qp = atomic_load(&d->qps[i]);
		if (!qp)
			continue;
		hr_counters c;
		shm_qp_counters((hr_qp *)qp, &c);
		shm_counters_add(out, &c);
	}
	pthread_mutex_unlock(&d->lock);
	return HR_OK;
}

const hr_provider hr_shm_provider = {
	.name = "shm",
	.open = shm_dev_open,
	.close = shm_dev_close,
	.query = shm_query,
	.alloc_pd = shm_alloc_pd,
	.free_pd = shm_free_pd,
	.alloc_buf = shm_alloc_buf,
	.free_buf = shm_free_buf,
	.reg_mr = shm_reg_mr,
	.dereg_mr = shm_dereg_mr,
	.create_chan = shm_create_chan,
	.destroy_chan = shm_destroy_chan,
	.chan_fd = shm_chan_fd,
	.create_cq = shm_create_cq,
	.destroy_cq = shm_destroy_cq,
	.poll_cq = shm_poll_cq,
	.arm_cq = shm_arm_cq,
	.get_cq_event = shm_get_cq_event,
	.ack_cq_events = shm_ack_cq_events,
	.create_srq = shm_create_srq,
	.destroy_srq = shm_destroy_srq,
	.post_srq_recv = shm_post_srq_recv,
	.srq_max_wr = shm_srq_max_wr,
	.create_qp = shm_create_qp,
	.destroy_qp = shm_destroy_qp,
	.qp_local_attr = shm_qp_local_attr,
	.qp_connect = shm_qp_connect,
	.qp_set_error = shm_qp_set_error,
	.qp_state = shm_qp_state,
	.post_send = shm_post_send,
	.post_recv = shm_post_recv,
	.qp_counters = shm_qp_counters,
	.dev_counters = shm_dev_counters,
	.qp_caps = shm_qp_caps,
	.cq_depth = shm_cq_depth,
};
