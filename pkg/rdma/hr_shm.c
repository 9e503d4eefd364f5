/* hr_shm.c - shm provider: protection domains, memory regions and the
 * provider table. The device is in hr_shm_dev.c, channels and CQs in
 * hr_shm_cq.c, QPs in hr_shm_qp.c, the execution engine in hr_shm_exec.c. */
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
	/* The PD's own segment: a peer of one of its QPs maps this (and
	 * nothing device-wide), nothing of the device's other PDs. */
	int st = shm_seg_create(&pd->seg, pd->dev->size, 0);
	if (st != HR_OK) {
		free(pd);
		return st;
	}
	pthread_mutex_lock(&pd->dev->lock);
	pd->next = pd->dev->pds;
	pd->dev->pds = pd;
	pthread_mutex_unlock(&pd->dev->lock);
	*out = (hr_pd *)pd;
	return HR_OK;
}

static int shm_free_pd(hr_pd *p)
{
	struct shm_pd *pd = (struct shm_pd *)p;
	if (atomic_load(&pd->refs) > 0)
		return HR_ESTATE; /* as ibv's EBUSY: MRs, SRQs or QPs remain */
	pthread_mutex_lock(&pd->dev->lock);
	for (struct shm_pd **pp = &pd->dev->pds; *pp; pp = &(*pp)->next) {
		if (*pp == pd) {
			*pp = pd->next;
			break;
		}
	}
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
		if (atomic_load(&sg->hdr->mr[i].key) == 0) {
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

/* Is the access that held slot i's window open when the key was cleared
 * (value v) possibly still going on? Not once the window moved, nor once
 * the slot's QP is gone (its destroy waited the window out or gave it up)
 * or belongs to another PD now, nor once its peer is dead. Under d->lock,
 * which keeps the QP and its peer. */
static int window_held(struct shm_dev *d, struct shm_pd *pd, uint32_t i, uint32_t v)
{
	if (atomic_load_explicit(&pd->seg.hdr->qp[i].inflight, memory_order_acquire) != v)
		return 0;
	struct shm_qp *qp = atomic_load(&d->qps[i]);
	if (!qp || qp->pdp != pd)
		return 0;
	struct shm_peer *p = atomic_load(&qp->peer);
	return !(p && atomic_load(&p->dead));
}

static int shm_dereg_mr(hr_mr *pm)
{
	struct shm_mr *m = (struct shm_mr *)pm;
	struct shm_pd *pd = m->pd;
	struct shm_dev *d = pd->dev;
	struct shm_hdr *h = pd->seg.hdr;
	atomic_store(&h->mr[m->idx].key, 0);
	/* A peer reaches the MR only inside the in-flight window of one of the
	 * PD's QPs, opened by a locked increment before it checks the key:
	 * once the key is clear (a full barrier), a window opened later sees
	 * it, and one open now is waited out, until it moves. Windows are
	 * nearly always shut: the scan of the table is the common cost. */
	uint32_t open_v[SHM_MAX_QP];
	uint16_t open_i[SHM_MAX_QP];
	uint32_t n = 0;
	for (uint32_t i = 1; i < SHM_MAX_QP; i++) {
		uint32_t v = atomic_load(&h->qp[i].inflight);
		if (shm_inflight_open(v)) {
			open_i[n] = (uint16_t)i;
			open_v[n++] = v;
		}
	}
	uint64_t deadline = hr_now_ns() + SHM_DRAIN_WAIT_NS;
	int st = HR_OK;
	while (n) {
		pthread_mutex_lock(&d->lock);
		uint32_t k = 0;
		for (uint32_t j = 0; j < n; j++) {
			if (window_held(d, pd, open_i[j], open_v[j])) {
				open_i[k] = open_i[j];
				open_v[k++] = open_v[j];
			}
		}
		pthread_mutex_unlock(&d->lock);
		n = k;
		if (!n)
			break;
		if (hr_now_ns() > deadline) {
			st = HR_EIO;
			break;
		}
		sched_yield();
	}
	atomic_fetch_sub(&pd->refs, 1);
	free(m);
	return st;
}

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

const hr_provider hr_shm_ops = {
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
	.qp_peer_cpu = shm_qp_peer_cpu,
	.qp_note_cpu = shm_qp_note_cpu,
};
