/* hr_ibv.c - the ibv provider: the provider table over libibverbs. */
#define _GNU_SOURCE
#include "ibv_internal.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

int hr_ibv_errno_status(int e)
{
	switch (e) {
	case 0:
		return HR_OK;
	case ENOMEM:
		return HR_ENOMEM;
	case EINVAL:
		return HR_EINVAL;
	case ENODEV:
	case ENXIO:
		return HR_ENODEV;
	case EBUSY:
		return HR_ESTATE;
	case EOPNOTSUPP:
		return HR_ENOTSUP;
	default:
		return HR_EIO;
	}
}

static int wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return HR_OK;
	case IBV_WC_LOC_LEN_ERR:
		return HR_ELOCAL_LEN;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
		return HR_ELOCAL_PROT;
	case IBV_WC_LOC_QP_OP_ERR:
		return HR_ELOCAL_OP;
	case IBV_WC_WR_FLUSH_ERR:
		return HR_EFLUSH;
	case IBV_WC_REM_ACCESS_ERR:
		return HR_EREMOTE_ACCESS;
	case IBV_WC_REM_INV_REQ_ERR:
		return HR_EREMOTE_INVAL;
	case IBV_WC_REM_OP_ERR:
		return HR_EREMOTE_OP;
	case IBV_WC_RETRY_EXC_ERR:
		return HR_ERETRY_EXC;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return HR_ERNR_RETRY;
	default:
		return HR_EIO;
	}
}


static uint32_t wc_op(enum ibv_wc_opcode o)
{
	switch (o) {
	case IBV_WC_SEND:
		return HR_OP_SEND;
	case IBV_WC_RDMA_WRITE:
		return HR_OP_RDMA_WRITE;
	case IBV_WC_RDMA_READ:
		return HR_OP_RDMA_READ;
	case IBV_WC_FETCH_ADD:
		return HR_OP_ATOMIC_FETCH_AND_ADD;
	case IBV_WC_COMP_SWAP:
		return HR_OP_ATOMIC_CMP_AND_SWP;
	case IBV_WC_RECV:
		return HR_WC_RECV;
	case IBV_WC_RECV_RDMA_WITH_IMM:
		return HR_WC_RECV_RDMA_WITH_IMM;
	default:
		return 0xff;
	}
}

int hr_ibv_mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 1024;
}

enum ibv_mtu hr_ibv_mtu_enum(uint32_t bytes)
{
	if (bytes >= 4096)
		return IBV_MTU_4096;
	if (bytes >= 2048)
		return IBV_MTU_2048;
	if (bytes >= 1024)
		return IBV_MTU_1024;
	if (bytes >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

/* RoCE: prefer RoCE v2 with an IPv4-mapped address, then any other RoCE v2
 * GID, then RoCE v1; link-local GIDs are skipped. IB: index 0. */
static int pick_gid(struct ibv_context *ctx, uint8_t port, int table_len, int ib)
{
	if (ib)
		return 0;
	int best = -1, best_rank = 0;
	for (int i = 0; i < table_len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0) != 0)
			continue;
		const uint8_t *g = e.gid.raw;
		static const uint8_t zero[16];
		if (memcmp(g, zero, 16) == 0)
			continue;
		int linklocal = g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
		int v4 = memcmp(g, zero, 10) == 0 && g[10] == 0xff && g[11] == 0xff;
		if (linklocal)
			continue; /* not routable beyond the link */
		int rank = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? (v4 ? 3 : 2) : 1;
		if (rank > best_rank) {
			best_rank = rank;
			best = i;
		}
	}
	return best;
}

static void ibv_dev_close(hr_dev *hd);

struct ibv_hqp *ibv_hr_qp_lookup(struct ibv_hdev *d, uint32_t qpn)
{
	for (struct ibv_hqp *q = d->qps[qpn % IBV_QP_BUCKETS]; q; q = q->next)
		if (q->qp->qp_num == qpn)
			return q;
	return NULL;
}

/* A CQ overrun loses completions, so the CQ reports the overflow from then on
 * and its QPs go to the error state (as the IB spec has an overrun CQ's QPs do
 * on devices that detect it themselves): nobody waits on work whose completion
 * was dropped. */
static void cq_overrun(struct ibv_hdev *d, struct ibv_hcq *c)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < IBV_QP_BUCKETS; i++)
		for (struct ibv_hqp *q = d->qps[i]; q; q = q->next)
			if (q->scq == c || q->rcq == c) {
				ibv_modify_qp(q->qp, &a, IBV_QP_STATE);
				atomic_store(&q->in_error, 1);
			}
	pthread_mutex_unlock(&d->lock);
	/* Published last: whoever polls the overflow finds its QPs in error. */
	atomic_store(&c->overflow, 1);
}

static void *async_loop(void *arg)
{
	struct ibv_hdev *d = arg;
	struct pollfd pf[2] = {{.fd = d->ctx->async_fd, .events = POLLIN}, {.fd = d->async_pipe[0], .events = POLLIN}};
	for (;;) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (pf[1].revents)
			return NULL;
		struct ibv_async_event ev;
		while (ibv_get_async_event(d->ctx, &ev) == 0) {
			switch (ev.event_type) {
			case IBV_EVENT_CQ_ERR:
				cq_overrun(d, ev.element.cq->cq_context);
				break;
			case IBV_EVENT_QP_FATAL:
			case IBV_EVENT_QP_REQ_ERR:
			case IBV_EVENT_QP_ACCESS_ERR:
				atomic_store(&((struct ibv_hqp *)ev.element.qp->qp_context)->in_error, 1);
				break;
			default:
				break;
			}
			/* Acked at once: ibv_destroy_qp/cq wait for their events' acks. */
			ibv_ack_async_event(&ev);
		}
	}
}

int ibv_hr_async_start(struct ibv_hdev *d)
{
	int fl = fcntl(d->ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(d->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return HR_EIO;
	if (pipe2(d->async_pipe, O_CLOEXEC) != 0)
		return hr_ibv_errno_status(errno);
	if (pthread_create(&d->async_thr, NULL, async_loop, d) != 0) {
		close(d->async_pipe[0]);
		close(d->async_pipe[1]);
		return HR_ENOMEM;
	}
	d->async_started = 1;
	return HR_OK;
}

void ibv_hr_async_stop(struct ibv_hdev *d)
{
	if (!d->async_started)
		return;
	char b = 1;
	while (write(d->async_pipe[1], &b, 1) < 0 && errno == EINTR)
		;
	pthread_join(d->async_thr, NULL);
	close(d->async_pipe[0]);
	close(d->async_pipe[1]);
	d->async_started = 0;
}

int hr_fork_status(void)
{
	switch (ibv_is_fork_initialized()) {
	case IBV_FORK_UNNEEDED:
		return HR_FORK_UNNEEDED;
	case IBV_FORK_ENABLED:
		return HR_FORK_ENABLED;
	default:
		return HR_FORK_DISABLED;
	}
}

const char *hr_fork_status_str(int st)
{
	switch (st) {
	case HR_FORK_UNNEEDED:
		return "unneeded (the kernel copies pinned pages on fork)";
	case HR_FORK_ENABLED:
		return "enabled (ibv_fork_init: registered memory is MADV_DONTFORK)";
	default:
		return "disabled (neither: do not fork without exec while verbs memory is registered)";
	}
}

static int ibv_dev_open(const hr_dev_opts *o, hr_dev **out)
{
	/* Go's runtime forks (os/exec): registered pages must survive it. */
	if (!(o && o->no_fork_init) && ibv_is_fork_initialized() == IBV_FORK_DISABLED) {
		if (ibv_fork_init() != 0)
			return HR_EIO;
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return n == 0 ? HR_ENODEV : hr_ibv_errno_status(errno);
	if (n == 0) {
		ibv_free_device_list(list);
		return HR_ENODEV;
	}
	struct ibv_hdev *d = calloc(1, sizeof(*d));
	if (!d) {
		ibv_free_device_list(list);
		return HR_ENOMEM;
	}
	d->prov = &hr_ibv_provider;
	pthread_mutex_init(&d->lock, NULL);
	const char *want = (o && o->name && o->name[0]) ? o->name : NULL;
	int st = HR_ENODEV;
	for (int i = 0; i < n && !d->ctx; i++) {
		const char *nm = ibv_get_device_name(list[i]);
		if (want && strcmp(nm, want) != 0)
			continue;
		struct ibv_context *ctx = ibv_open_device(list[i]);
		if (!ctx)
			continue;
		struct ibv_device_attr da;
		if (ibv_query_device(ctx, &da) != 0) {
			ibv_close_device(ctx);
			continue;
		}
		for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
			if (o && o->port && o->port != p)
				continue;
			struct ibv_port_attr pa;
			if (ibv_query_port(ctx, p, &pa) != 0 || pa.state != IBV_PORT_ACTIVE)
				continue;
			d->ctx = ctx;
			d->attr = da;
			d->port_attr = pa;
			d->port = p;
			strncpy(d->name, nm, sizeof(d->name) - 1);
			break;
		}
		if (!d->ctx)
			ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	if (!d->ctx)
		goto fail;
	int ib = d->port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND;
	d->gid_index = (o && o->gid_index >= 0) ? o->gid_index
						 : pick_gid(d->ctx, d->port, d->port_attr.gid_tbl_len, ib);
	if (d->gid_index >= 0 && ibv_query_gid(d->ctx, d->port, d->gid_index, &d->gid) != 0) {
		st = HR_EINVAL;
		goto fail;
	}
	if (d->gid_index < 0 && !ib) {
		st = HR_ENODEV; /* RoCE without a usable GID cannot route */
		goto fail;
	}
	if ((st = ibv_hr_async_start(d)) != HR_OK)
		goto fail;
	*out = (hr_dev *)d;
	return HR_OK;
fail:
	ibv_dev_close((hr_dev *)d);
	return st;
}

static void ibv_dev_close(hr_dev *hd)
{
	struct ibv_hdev *d = (struct ibv_hdev *)hd;
	ibv_hr_async_stop(d);
	if (d->ctx)
		ibv_close_device(d->ctx);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int ibv_query(hr_dev *hd, hr_dev_info *out)
{
	struct ibv_hdev *d = (struct ibv_hdev *)hd;
	memset(out, 0, sizeof(*out));
	memcpy(out->name, d->name, sizeof(out->name));
	out->port = d->port;
	out->mtu = (uint32_t)hr_ibv_mtu_bytes(d->port_attr.active_mtu);
	out->gid_index = d->gid_index;
	out->max_qp_wr = (uint32_t)d->attr.max_qp_wr;
	out->max_sge = (uint32_t)d->attr.max_sge;
	out->max_inline = 0; /* only known per QP after creation */
	out->max_cqe = (uint32_t)d->attr.max_cqe;
	out->max_mr = (uint32_t)d->attr.max_mr;
	out->max_qp = (uint32_t)d->attr.max_qp;
	out->max_mr_size = d->attr.max_mr_size;
	return HR_OK;
}

static int ibv_hr_alloc_pd(hr_dev *hd, hr_pd **out)
{
	struct ibv_hdev *d = (struct ibv_hdev *)hd;
	struct ibv_hpd *p = calloc(1, sizeof(*p));
	if (!p)
		return HR_ENOMEM;
	p->prov = &hr_ibv_provider;
	p->dev = d;
	p->pd = ibv_alloc_pd(d->ctx);
	if (!p->pd) {
		free(p);
		return hr_ibv_errno_status(errno ? errno : ENOMEM);
	}
	*out = (hr_pd *)p;
	return HR_OK;
}

static int ibv_hr_free_pd(hr_pd *hp)
{
	struct ibv_hpd *p = (struct ibv_hpd *)hp;
	int r = ibv_dealloc_pd(p->pd);
	if (r)
		return hr_ibv_errno_status(r);
	free(p);
	return HR_OK;
}

static int ibv_alloc_buf(hr_pd *hp, size_t len, void **out)
{
	(void)hp;
	if (len == 0)
		return HR_EINVAL;
	void *p = NULL;
	if (posix_memalign(&p, 4096, (len + 4095) & ~(size_t)4095) != 0)
		return HR_ENOMEM;
	memset(p, 0, len);
	*out = p;
	return HR_OK;
}

static void ibv_free_buf(hr_pd *hp, void *p, size_t len)
{
	(void)hp;
	(void)len;
	free(p);
}

static int ibv_hr_reg_mr(hr_pd *hp, void *addr, size_t len, uint32_t access, hr_mr **out)
{
	struct ibv_hpd *p = (struct ibv_hpd *)hp;
	if (len == 0 || access > 15)
		return HR_EINVAL;
	int a = 0;
	if (access & HR_ACCESS_LOCAL_WRITE)
		a |= IBV_ACCESS_LOCAL_WRITE;
	if (access & HR_ACCESS_REMOTE_WRITE)
		a |= IBV_ACCESS_REMOTE_WRITE;
	if (access & HR_ACCESS_REMOTE_READ)
		a |= IBV_ACCESS_REMOTE_READ;
	if (access & HR_ACCESS_REMOTE_ATOMIC)
		a |= IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_hmr *m = calloc(1, sizeof(*m));
	if (!m)
		return HR_ENOMEM;
	m->mr = ibv_reg_mr(p->pd, addr, len, a);
	if (!m->mr) {
		int e = errno;
		free(m);
		return hr_ibv_errno_status(e ? e : ENOMEM);
	}
	m->pub.prov = &hr_ibv_provider;
	m->pub.addr = addr;
	m->pub.length = len;
	m->pub.lkey = m->mr->lkey;
	m->pub.rkey = m->mr->rkey;
	m->pub.access = access;
	*out = &m->pub;
	return HR_OK;
}

static int ibv_hr_dereg_mr(hr_mr *pm)
{
	struct ibv_hmr *m = (struct ibv_hmr *)pm;
	int r = ibv_dereg_mr(m->mr);
	if (r)
		return hr_ibv_errno_status(r);
	free(m);
	return HR_OK;
}

static int ibv_hr_create_chan(hr_dev *hd, hr_chan **out)
{
	struct ibv_hdev *d = (struct ibv_hdev *)hd;
	struct ibv_hchan *c = calloc(1, sizeof(*c));
	if (!c)
		return HR_ENOMEM;
	c->prov = &hr_ibv_provider;
	c->ch = ibv_create_comp_channel(d->ctx);
	if (!c->ch) {
		free(c);
		return hr_ibv_errno_status(errno ? errno : ENOMEM);
	}
	/* Non-blocking, so a waiter that lost the event to another thread
	 * between poll() and ibv_get_cq_event() cannot hang. */
	int fl = fcntl(c->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(c->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		ibv_destroy_comp_channel(c->ch);
		free(c);
		return HR_EIO;
	}
	*out = (hr_chan *)c;
	return HR_OK;
}

static int ibv_hr_destroy_chan(hr_chan *hc)
{
	struct ibv_hchan *c = (struct ibv_hchan *)hc;
	int r = ibv_destroy_comp_channel(c->ch);
	if (r)
		return hr_ibv_errno_status(r);
	free(c);
	return HR_OK;
}

static int ibv_chan_fd(hr_chan *hc) { return ((struct ibv_hchan *)hc)->ch->fd; }

static int ibv_hr_create_cq(hr_dev *hd, uint32_t depth, hr_chan *hc, hr_cq **out)
{
	struct ibv_hdev *d = (struct ibv_hdev *)hd;
	if (depth == 0 || depth > (uint32_t)d->attr.max_cqe)
		return HR_EINVAL;
	struct ibv_hcq *c = calloc(1, sizeof(*c));
	if (!c)
		return HR_ENOMEM;
	c->prov = &hr_ibv_provider;
	c->dev = d;
	c->cq = ibv_create_cq(d->ctx, (int)depth, c, hc ? ((struct ibv_hchan *)hc)->ch : NULL, 0);
	if (!c->cq) {
		free(c);
		return hr_ibv_errno_status(errno ? errno : ENOMEM);
	}
	*out = (hr_cq *)c;
	return HR_OK;
}

static int ibv_hr_destroy_cq(hr_cq *hc)
{
	struct ibv_hcq *c = (struct ibv_hcq *)hc;
	int r = ibv_destroy_cq(c->cq);
	if (r)
		return hr_ibv_errno_status(r);
	free(c);
	return HR_OK;
}

static int ibv_hr_poll_cq(hr_cq *hc, int n, hr_wc *out)
{
	struct ibv_hcq *c = (struct ibv_hcq *)hc;
	struct ibv_wc wc[32];
	int total = 0;
	if (atomic_load_explicit(&c->overflow, memory_order_acquire))
		return -HR_ECQ_OVERFLOW;
	while (total < n) {
		int want = n - total > 32 ? 32 : n - total;
		int got = ibv_poll_cq(c->cq, want, wc);
		if (got < 0)
			return total ? total : -HR_ECQ_OVERFLOW;
		for (int i = 0; i < got; i++) {
			hr_wc *w = &out[total + i];
			memset(w, 0, sizeof(*w));
			w->wr_id = wc[i].wr_id;
			w->status = (uint32_t)wc_status(wc[i].status);
			w->vendor_err = wc[i].vendor_err;
			w->qp_num = wc[i].qp_num;
			/* opcode is only valid on success */
			w->opcode = wc[i].status == IBV_WC_SUCCESS ? wc_op(wc[i].opcode) : 0xff;
			w->byte_len = wc[i].byte_len;
			if (wc[i].wc_flags & IBV_WC_WITH_IMM) {
				w->flags |= HR_WC_WITH_IMM;
				w->imm = be32toh(wc[i].imm_data);
			}
			struct ibv_hqp *q = ibv_hr_qp_lookup(c->dev, wc[i].qp_num);
			if (q) {
				atomic_fetch_add_explicit(&q->completions, 1, memory_order_relaxed);
				if (w->status != HR_OK) {
					/* Any error completion of an RC QP means it is in ERR now. */
					atomic_fetch_add_explicit(&q->errors, 1, memory_order_relaxed);
					atomic_store_explicit(&q->in_error, 1, memory_order_relaxed);
				} else if (w->opcode == HR_WC_RECV || w->opcode == HR_WC_RECV_RDMA_WITH_IMM) {
					int op = w->opcode == HR_WC_RECV_RDMA_WITH_IMM ? HR_OP_RDMA_WRITE_WITH_IMM
						: (w->flags & HR_WC_WITH_IMM) ? HR_OP_SEND_WITH_IMM : HR_OP_SEND;
					atomic_fetch_add_explicit(&q->inbound[op], 1, memory_order_relaxed);
					atomic_fetch_add_explicit(&q->bytes_in, w->byte_len, memory_order_relaxed);
				}
			}
		}
		total += got;
		if (got < want)
			break;
	}
	return total;
}

static int ibv_hr_arm_cq(hr_cq *hc, int so)
{
	int r = ibv_req_notify_cq(((struct ibv_hcq *)hc)->cq, so);
	return r ? hr_ibv_errno_status(r) : HR_OK;
}

static int ibv_hr_get_cq_event(hr_chan *hc, int timeout_ms, hr_cq **out)
{
	struct ibv_hchan *c = (struct ibv_hchan *)hc;
	struct pollfd pf = {.fd = c->ch->fd, .events = POLLIN};
	int r = poll(&pf, 1, timeout_ms);
	if (r == 0)
		return HR_ETIMEDOUT;
	if (r < 0)
		return errno == EINTR ? HR_ETIMEDOUT : HR_EIO;
	struct ibv_cq *cq;
	void *ctx;
	if (ibv_get_cq_event(c->ch, &cq, &ctx) != 0)
		return errno == EAGAIN ? HR_ETIMEDOUT : HR_EIO;
	*out = ctx;
	return HR_OK;
}

static void ibv_hr_ack_cq_events(hr_cq *hc, unsigned n)
{
	ibv_ack_cq_events(((struct ibv_hcq *)hc)->cq, n);
}

static int ibv_hr_cq_depth(hr_cq *hc) { return ((struct ibv_hcq *)hc)->cq->cqe; }

static int ibv_hr_dev_counters(hr_dev *hd, hr_counters *out)
{
	struct ibv_hdev *d = (struct ibv_hdev *)hd;
	pthread_mutex_lock(&d->lock);
	*out = d->gone;
	for (int i = 0; i < IBV_QP_BUCKETS; i++)
		for (struct ibv_hqp *q = d->qps[i]; q; q = q->next) {
			hr_counters c;
			ibv_hr_qp_counters((hr_qp *)q, &c);
			hr_ibv_counters_add(out, &c);
		}
	pthread_mutex_unlock(&d->lock);
	return HR_OK;
}

const hr_provider hr_ibv_ops = {
	.name = "ibv",
	.open = ibv_dev_open,
	.close = ibv_dev_close,
	.query = ibv_query,
	.alloc_pd = ibv_hr_alloc_pd,
	.free_pd = ibv_hr_free_pd,
	.alloc_buf = ibv_alloc_buf,
	.free_buf = ibv_free_buf,
	.reg_mr = ibv_hr_reg_mr,
	.dereg_mr = ibv_hr_dereg_mr,
	.create_chan = ibv_hr_create_chan,
	.destroy_chan = ibv_hr_destroy_chan,
	.chan_fd = ibv_chan_fd,
	.create_cq = ibv_hr_create_cq,
	.destroy_cq = ibv_hr_destroy_cq,
	.poll_cq = ibv_hr_poll_cq,
	.arm_cq = ibv_hr_arm_cq,
	.get_cq_event = ibv_hr_get_cq_event,
	.ack_cq_events = ibv_hr_ack_cq_events,
	.create_srq = ibv_hr_create_srq,
	.destroy_srq = ibv_hr_destroy_srq,
	.post_srq_recv = ibv_hr_post_srq_recv,
	.srq_max_wr = ibv_hr_srq_max_wr,
	.create_qp = ibv_hr_create_qp,
	.destroy_qp = ibv_hr_destroy_qp,
	.qp_local_attr = ibv_hr_qp_local_attr,
	.qp_connect = ibv_hr_qp_connect,
	.qp_set_error = ibv_hr_qp_set_error,
	.qp_state = ibv_hr_qp_state,
	.post_send = ibv_hr_post_send,
	.post_recv = ibv_hr_post_recv,
	.qp_counters = ibv_hr_qp_counters,
	.dev_counters = ibv_hr_dev_counters,
	.qp_caps = ibv_hr_qp_caps,
	.cq_depth = ibv_hr_cq_depth,
};
