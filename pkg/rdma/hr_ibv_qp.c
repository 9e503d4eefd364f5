/* hr_ibv_qp.c - ibv provider: shared receive queues, RC queue pairs
 * (INIT -> RTR -> RTS) and posting. */
#define _GNU_SOURCE
#include "ibv_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const enum ibv_wr_opcode wr_op[HR_OP_COUNT] = {
	[HR_OP_SEND] = IBV_WR_SEND,
	[HR_OP_SEND_WITH_IMM] = IBV_WR_SEND_WITH_IMM,
	[HR_OP_RDMA_WRITE] = IBV_WR_RDMA_WRITE,
	[HR_OP_RDMA_WRITE_WITH_IMM] = IBV_WR_RDMA_WRITE_WITH_IMM,
	[HR_OP_RDMA_READ] = IBV_WR_RDMA_READ,
	[HR_OP_ATOMIC_FETCH_AND_ADD] = IBV_WR_ATOMIC_FETCH_AND_ADD,
	[HR_OP_ATOMIC_CMP_AND_SWP] = IBV_WR_ATOMIC_CMP_AND_SWP,
};

int ibv_hr_create_srq(hr_pd *hp, uint32_t max_wr, uint32_t max_sge, hr_srq **out)
{
	struct ibv_hpd *p = (struct ibv_hpd *)hp;
	struct ibv_hsrq *s = calloc(1, sizeof(*s));
	if (!s)
		return HR_ENOMEM;
	s->prov = &hr_ibv_provider;
	struct ibv_srq_init_attr a = {.attr = {.max_wr = max_wr, .max_sge = max_sge}};
	if (max_wr == 0 || max_sge == 0 || max_sge > HR_MAX_SGE) {
		free(s);
		return HR_EINVAL;
	}
	s->srq = ibv_create_srq(p->pd, &a);
	if (!s->srq) {
		free(s);
		return hr_ibv_errno_status(errno ? errno : ENOMEM);
	}
	s->max_wr = a.attr.max_wr; /* written back: what the device granted */
	*out = (hr_srq *)s;
	return HR_OK;
}

int ibv_hr_srq_max_wr(hr_srq *hs) { return (int)((struct ibv_hsrq *)hs)->max_wr; }

int ibv_hr_destroy_srq(hr_srq *hs)
{
	struct ibv_hsrq *s = (struct ibv_hsrq *)hs;
	int r = ibv_destroy_srq(s->srq);
	if (r)
		return hr_ibv_errno_status(r);
	free(s);
	return HR_OK;
}

static void fill_recv(const hr_recv_wr *in, uint32_t n, struct ibv_recv_wr *wr, struct ibv_sge *sg)
{
	for (uint32_t i = 0; i < n; i++) {
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = in[i].wr_id;
		wr[i].num_sge = (int)in[i].num_sge;
		wr[i].sg_list = &sg[i * HR_MAX_SGE];
		for (uint32_t j = 0; j < in[i].num_sge && j < HR_MAX_SGE; j++) {
			sg[i * HR_MAX_SGE + j].addr = in[i].sg[j].addr;
			sg[i * HR_MAX_SGE + j].length = in[i].sg[j].length;
			sg[i * HR_MAX_SGE + j].lkey = in[i].sg[j].lkey;
		}
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
}

#define IBV_CHUNK 32

static int post_recv_chunks(struct ibv_srq *srq, struct ibv_qp *qp, const hr_recv_wr *in, uint32_t n,
			    uint32_t *bad)
{
	struct ibv_recv_wr wr[IBV_CHUNK], *badwr = NULL;
	struct ibv_sge sg[IBV_CHUNK * HR_MAX_SGE];
	for (uint32_t base = 0; base < n; base += IBV_CHUNK) {
		uint32_t m = n - base > IBV_CHUNK ? IBV_CHUNK : n - base;
		for (uint32_t i = 0; i < m; i++)
			if (in[base + i].num_sge > HR_MAX_SGE) {
				*bad = base + i;
				return HR_EINVAL;
			}
		fill_recv(in + base, m, wr, sg);
		int r = srq ? ibv_post_srq_recv(srq, wr, &badwr) : ibv_post_recv(qp, wr, &badwr);
		if (r) {
			*bad = base + (uint32_t)(badwr ? badwr - wr : 0);
			return r == ENOMEM ? HR_ENORES : hr_ibv_errno_status(r);
		}
	}
	return HR_OK;
}

int ibv_hr_post_srq_recv(hr_srq *hs, const hr_recv_wr *wr, uint32_t n, uint32_t *bad)
{
	return post_recv_chunks(((struct ibv_hsrq *)hs)->srq, NULL, wr, n, bad);
}

int ibv_hr_create_qp(hr_pd *hp, const hr_qp_init *in, hr_qp **out)
{
	struct ibv_hpd *p = (struct ibv_hpd *)hp;
	struct ibv_hdev *d = p->dev;
	/* The same contract as every provider: a QP sends, receives (or has an
	 * SRQ) and stays within HR_MAX_SGE; verbs alone would allow more. */
	if (!in || !in->send_cq || !in->recv_cq || in->rnr_retry > 7 || in->retry_cnt > 7 ||
	    in->max_send_wr == 0 || in->max_sge > HR_MAX_SGE || (!in->srq && in->max_recv_wr == 0))
		return HR_EINVAL;
	struct ibv_hqp *q = calloc(1, sizeof(*q));
	if (!q)
		return HR_ENOMEM;
	q->prov = &hr_ibv_provider;
	q->dev = d;
	q->rnr_retry = in->rnr_retry;
	/* 6, not 7: the IB spec counts 7 as seven retries, but rxe (and some
	 * other providers) treat 7 like rnr_retry's "forever", so a dead peer
	 * would never be reported. 6 retries of a 67 ms ACK timeout (timeout
	 * 14 = 4.096 us << 14) bound dead-peer detection to ~0.5 s. */
	q->retry_cnt = in->retry_cnt ? in->retry_cnt : 6;
	q->timeout = in->timeout ? in->timeout : 14;
	q->min_rnr_timer = in->min_rnr_timer ? in->min_rnr_timer : 12;
	pthread_mutex_init(&q->lock, NULL);
	struct ibv_qp_init_attr a = {
		.send_cq = ((struct ibv_hcq *)in->send_cq)->cq,
		.recv_cq = ((struct ibv_hcq *)in->recv_cq)->cq,
		.srq = in->srq ? ((struct ibv_hsrq *)in->srq)->srq : NULL,
		.cap = {.max_send_wr = in->max_send_wr, .max_recv_wr = in->srq ? 0 : in->max_recv_wr,
			.max_send_sge = in->max_sge ? in->max_sge : 1, .max_recv_sge = in->max_sge ? in->max_sge : 1,
			.max_inline_data = in->max_inline},
		.qp_context = q,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	q->scq = (struct ibv_hcq *)in->send_cq;
	q->rcq = (struct ibv_hcq *)in->recv_cq;
	q->qp = ibv_create_qp(p->pd, &a);
	/* ibv_create_qp writes back the capacities it granted. */
	q->caps = (hr_qp_caps){a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_inline_data};
	if (!q->qp) {
		int e = errno;
		pthread_mutex_destroy(&q->lock);
		free(q);
		return hr_ibv_errno_status(e ? e : ENOMEM);
	}
	struct ibv_qp_attr ma = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = d->port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	int r = ibv_modify_qp(q->qp, &ma, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (r) {
		ibv_destroy_qp(q->qp);
		pthread_mutex_destroy(&q->lock);
		free(q);
		return hr_ibv_errno_status(r);
	}
	if (getrandom(&q->psn, sizeof(q->psn), 0) != sizeof(q->psn))
		q->psn = q->qp->qp_num * 2654435761u;
	q->psn &= 0xffffff;
	pthread_mutex_lock(&d->lock);
	q->next = d->qps[q->qp->qp_num % IBV_QP_BUCKETS];
	d->qps[q->qp->qp_num % IBV_QP_BUCKETS] = q;
	pthread_mutex_unlock(&d->lock);
	*out = (hr_qp *)q;
	return HR_OK;
}

int ibv_hr_qp_counters(hr_qp *hq, hr_counters *out)
{
	struct ibv_hqp *q = (struct ibv_hqp *)hq;
	pthread_mutex_lock(&q->lock);
	*out = q->cnt;
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; i < HR_OP_COUNT; i++)
		out->inbound[i] += atomic_load(&q->inbound[i]);
	out->completions += atomic_load(&q->completions);
	out->errors += atomic_load(&q->errors);
	out->bytes_in += atomic_load(&q->bytes_in);
	return HR_OK;
}

void hr_ibv_counters_add(hr_counters *dst, const hr_counters *src)
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

int ibv_hr_destroy_qp(hr_qp *hq)
{
	struct ibv_hqp *q = (struct ibv_hqp *)hq;
	struct ibv_hdev *d = q->dev;
	hr_counters c;
	ibv_hr_qp_counters(hq, &c);
	uint32_t qpn = q->qp->qp_num;
	/* Unlinked first, under the device lock: the async-event thread walks the
	 * list under that lock and must never touch a QP being destroyed. */
	pthread_mutex_lock(&d->lock);
	for (struct ibv_hqp **pp = &d->qps[qpn % IBV_QP_BUCKETS]; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	int r = ibv_destroy_qp(q->qp);
	if (r) {
		q->next = d->qps[qpn % IBV_QP_BUCKETS];
		d->qps[qpn % IBV_QP_BUCKETS] = q;
		pthread_mutex_unlock(&d->lock);
		return hr_ibv_errno_status(r);
	}
	hr_ibv_counters_add(&d->gone, &c);
	pthread_mutex_unlock(&d->lock);
	pthread_mutex_destroy(&q->lock);
	free(q);
	return HR_OK;
}

int ibv_hr_qp_local_attr(hr_qp *hq, hr_qp_attr *out)
{
	struct ibv_hqp *q = (struct ibv_hqp *)hq;
	struct ibv_hdev *d = q->dev;
	memset(out, 0, sizeof(*out));
	out->qpn = q->qp->qp_num;
	out->psn = q->psn;
	out->lid = d->port_attr.lid;
	out->gid_index = d->gid_index;
	out->mtu = (uint32_t)hr_ibv_mtu_bytes(d->port_attr.active_mtu);
	memcpy(out->gid, d->gid.raw, 16);
	return HR_OK;
}

int ibv_hr_qp_connect(hr_qp *hq, const hr_qp_attr *r)
{
	struct ibv_hqp *q = (struct ibv_hqp *)hq;
	struct ibv_hdev *d = q->dev;
	if (!r || r->qpn == 0)
		return HR_EPEER;
	static const uint8_t zero[16];
	uint32_t mtu = r->mtu < (uint32_t)hr_ibv_mtu_bytes(d->port_attr.active_mtu) ? r->mtu
									    : (uint32_t)hr_ibv_mtu_bytes(d->port_attr.active_mtu);
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = hr_ibv_mtu_enum(mtu),
		.dest_qp_num = r->qpn,
		.rq_psn = r->psn & 0xffffff,
		.max_dest_rd_atomic = (uint8_t)(d->attr.max_qp_rd_atom > 16 ? 16 : d->attr.max_qp_rd_atom),
		.min_rnr_timer = (uint8_t)q->min_rnr_timer,
		.ah_attr = {.dlid = (uint16_t)r->lid, .sl = 0, .src_path_bits = 0, .port_num = d->port},
	};
	if (memcmp(r->gid, zero, 16) != 0 && d->gid_index >= 0) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	int e = ibv_modify_qp(q->qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (e)
		return hr_ibv_errno_status(e);
	struct ibv_qp_attr s = {
		.qp_state = IBV_QPS_RTS,
		.timeout = (uint8_t)q->timeout,
		.retry_cnt = (uint8_t)q->retry_cnt,
		.rnr_retry = (uint8_t)q->rnr_retry,
		.sq_psn = q->psn,
		.max_rd_atomic = (uint8_t)(d->attr.max_qp_init_rd_atom > 16 ? 16 : d->attr.max_qp_init_rd_atom),
	};
	e = ibv_modify_qp(q->qp, &s,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC);
	return e ? hr_ibv_errno_status(e) : HR_OK;
}

int ibv_hr_qp_set_error(hr_qp *hq)
{
	struct ibv_hqp *q = (struct ibv_hqp *)hq;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	int e = ibv_modify_qp(q->qp, &a, IBV_QP_STATE);
	if (e)
		return hr_ibv_errno_status(e);
	atomic_store(&q->in_error, 1);
	return HR_OK;
}

int ibv_hr_qp_state(hr_qp *hq)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(((struct ibv_hqp *)hq)->qp, &a, IBV_QP_STATE, &ia) != 0)
		return HR_QPS_ERR;
	switch (a.qp_state) {
	case IBV_QPS_RESET:
		return HR_QPS_RESET;
	case IBV_QPS_INIT:
		return HR_QPS_INIT;
	case IBV_QPS_RTR:
		return HR_QPS_RTR;
	case IBV_QPS_RTS:
		return HR_QPS_RTS;
	default:
		return HR_QPS_ERR;
	}
}

/* Adds n send WRs to c's posted and bytes_out counts. */
static void tally_sends(hr_counters *c, const hr_send_wr *w, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		c->posted[w[i].opcode]++;
		for (uint32_t j = 0; j < w[i].num_sge; j++)
			c->bytes_out += w[i].sg[j].length;
	}
}

int ibv_hr_post_send(hr_qp *hq, const hr_send_wr *in, uint32_t n, uint32_t *bad)
{
	struct ibv_hqp *q = (struct ibv_hqp *)hq;
	struct ibv_send_wr wr[IBV_CHUNK], *badwr = NULL;
	struct ibv_sge sg[IBV_CHUNK * HR_MAX_SGE];
	hr_counters unposted = {0};
	int st = HR_OK;
	for (uint32_t base = 0; base < n && st == HR_OK; base += IBV_CHUNK) {
		uint32_t m = n - base > IBV_CHUNK ? IBV_CHUNK : n - base;
		for (uint32_t i = 0; i < m; i++) {
			const hr_send_wr *s = &in[base + i];
			struct ibv_send_wr *w = &wr[i];
			if (s->opcode >= HR_OP_COUNT || s->num_sge > HR_MAX_SGE) {
				*bad = base + i;
				st = HR_EINVAL;
				m = i;
				break;
			}
			memset(w, 0, sizeof(*w));
			w->wr_id = s->wr_id;
			w->opcode = wr_op[s->opcode];
			w->num_sge = (int)s->num_sge;
			w->sg_list = &sg[i * HR_MAX_SGE];
			for (uint32_t j = 0; j < s->num_sge; j++) {
				sg[i * HR_MAX_SGE + j].addr = s->sg[j].addr;
				sg[i * HR_MAX_SGE + j].length = s->sg[j].length;
				sg[i * HR_MAX_SGE + j].lkey = s->sg[j].lkey;
			}
			if (s->flags & HR_SEND_SIGNALED)
				w->send_flags |= IBV_SEND_SIGNALED;
			if (s->flags & HR_SEND_INLINE)
				w->send_flags |= IBV_SEND_INLINE;
			if (s->flags & HR_SEND_SOLICITED)
				w->send_flags |= IBV_SEND_SOLICITED;
			if (s->flags & HR_SEND_FENCE)
				w->send_flags |= IBV_SEND_FENCE;
			if (s->opcode == HR_OP_SEND_WITH_IMM || s->opcode == HR_OP_RDMA_WRITE_WITH_IMM)
				w->imm_data = htobe32(s->imm);
			if (s->opcode >= HR_OP_ATOMIC_FETCH_AND_ADD) {
				w->wr.atomic.remote_addr = s->remote_addr;
				w->wr.atomic.rkey = s->rkey;
				w->wr.atomic.compare_add = s->compare_add;
				w->wr.atomic.swap = s->swap;
			} else if (s->opcode >= HR_OP_RDMA_WRITE) {
				w->wr.rdma.remote_addr = s->remote_addr;
				w->wr.rdma.rkey = s->rkey;
			}
			w->next = &wr[i + 1];
		}
		if (m == 0)
			break;
		wr[m - 1].next = NULL;
		/* Counted before the post: the peer may see the work (and a test
		 * read this side's counters) before ibv_post_send returns. */
		hr_counters pre = {0};
		tally_sends(&pre, in + base, m);
		pthread_mutex_lock(&q->lock);
		hr_ibv_counters_add(&q->cnt, &pre);
		pthread_mutex_unlock(&q->lock);
		int r = ibv_post_send(q->qp, wr, &badwr);
		uint32_t ok = m;
		if (r) {
			ok = (uint32_t)(badwr ? badwr - wr : 0);
			*bad = base + ok;
			st = r == ENOMEM ? HR_ENORES : hr_ibv_errno_status(r);
			/* Providers say EINVAL for "not ready to send"; report the state. */
			if (r == EINVAL) {
				int qs = ibv_hr_qp_state(hq);
				if (qs != HR_QPS_RTS && qs != HR_QPS_ERR)
					st = HR_ESTATE;
			}
		}
		tally_sends(&unposted, in + base + ok, m - ok); /* taken back below */
	}
	pthread_mutex_lock(&q->lock);
	for (int i = 0; i < HR_OP_COUNT; i++)
		q->cnt.posted[i] -= unposted.posted[i];
	q->cnt.bytes_out -= unposted.bytes_out;
	pthread_mutex_unlock(&q->lock);
	return st;
}

int ibv_hr_post_recv(hr_qp *hq, const hr_recv_wr *wr, uint32_t n, uint32_t *bad)
{
	struct ibv_hqp *q = (struct ibv_hqp *)hq;
	int st = post_recv_chunks(NULL, q->qp, wr, n, bad);
	/* Verbs: work posted to a QP in the error state completes with a flush
	 * error. rxe's user-space post_recv never enters the kernel, so nothing
	 * flushes it until the QP is moved to ERR again (a legal ERR -> ERR). */
	if (st == HR_OK && atomic_load_explicit(&q->in_error, memory_order_relaxed)) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		ibv_modify_qp(q->qp, &a, IBV_QP_STATE);
	}
	pthread_mutex_lock(&q->lock);
	q->cnt.recv_posted += st == HR_OK ? n : *bad;
	pthread_mutex_unlock(&q->lock);
	return st;
}

int ibv_hr_qp_caps(hr_qp *hq, hr_qp_caps *out)
{
	*out = ((struct ibv_hqp *)hq)->caps;
	return HR_OK;
}
