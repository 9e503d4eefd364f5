/* hr_default_ops.c - what a provider does not support.
 *
 * As rdma-core's dummy_ops.c and verbs_set_ops: a provider fills only the
 * ops it has; hr_set_ops copies those over these defaults, which answer
 * HR_ENOTSUP (as -HR_ENOTSUP where the op returns a count or an fd), so the
 * dispatch in hr_core.c never meets a NULL op and Go maps the answer to
 * ErrNotSupported like any other status (qp_peer_cpu alone answers -1,
 * unknown). */
#include "hr.h"

static int d_open(const hr_dev_opts *o, hr_dev **out)
{
	(void)o, (void)out;
	return HR_ENOTSUP;
}
static void d_close(hr_dev *d) { (void)d; }
static int d_query(hr_dev *d, hr_dev_info *out)
{
	(void)d, (void)out;
	return HR_ENOTSUP;
}
static int d_alloc_pd(hr_dev *d, hr_pd **out)
{
	(void)d, (void)out;
	return HR_ENOTSUP;
}
static int d_free_pd(hr_pd *pd)
{
	(void)pd;
	return HR_ENOTSUP;
}
static int d_alloc_buf(hr_pd *pd, size_t len, void **out)
{
	(void)pd, (void)len, (void)out;
	return HR_ENOTSUP;
}
static void d_free_buf(hr_pd *pd, void *p, size_t len) { (void)pd, (void)p, (void)len; }
static int d_reg_mr(hr_pd *pd, void *addr, size_t len, uint32_t access, hr_mr **out)
{
	(void)pd, (void)addr, (void)len, (void)access, (void)out;
	return HR_ENOTSUP;
}
static int d_dereg_mr(hr_mr *mr)
{
	(void)mr;
	return HR_ENOTSUP;
}
static int d_create_chan(hr_dev *d, hr_chan **out)
{
	(void)d, (void)out;
	return HR_ENOTSUP;
}
static int d_destroy_chan(hr_chan *ch)
{
	(void)ch;
	return HR_ENOTSUP;
}
static int d_chan_fd(hr_chan *ch)
{
	(void)ch;
	return -HR_ENOTSUP;
}
static int d_create_cq(hr_dev *d, uint32_t depth, hr_chan *ch, hr_cq **out)
{
	(void)d, (void)depth, (void)ch, (void)out;
	return HR_ENOTSUP;
}
static int d_destroy_cq(hr_cq *cq)
{
	(void)cq;
	return HR_ENOTSUP;
}
static int d_poll_cq(hr_cq *cq, int n, hr_wc *wc)
{
	(void)cq, (void)n, (void)wc;
	return -HR_ENOTSUP;
}
static int d_arm_cq(hr_cq *cq, int solicited_only)
{
	(void)cq, (void)solicited_only;
	return HR_ENOTSUP;
}
static int d_get_cq_event(hr_chan *ch, int timeout_ms, hr_cq **cq)
{
	(void)ch, (void)timeout_ms, (void)cq;
	return HR_ENOTSUP;
}
static void d_ack_cq_events(hr_cq *cq, unsigned n) { (void)cq, (void)n; }
static int d_create_srq(hr_pd *pd, uint32_t max_wr, uint32_t max_sge, hr_srq **out)
{
	(void)pd, (void)max_wr, (void)max_sge, (void)out;
	return HR_ENOTSUP;
}
static int d_destroy_srq(hr_srq *srq)
{
	(void)srq;
	return HR_ENOTSUP;
}
static int d_post_srq_recv(hr_srq *srq, const hr_recv_wr *wr, uint32_t n, uint32_t *bad)
{
	(void)srq, (void)wr, (void)n, (void)bad;
	return HR_ENOTSUP;
}
static int d_srq_max_wr(hr_srq *srq)
{
	(void)srq;
	return -HR_ENOTSUP;
}
static int d_create_qp(hr_pd *pd, const hr_qp_init *init, hr_qp **out)
{
	(void)pd, (void)init, (void)out;
	return HR_ENOTSUP;
}
static int d_destroy_qp(hr_qp *qp)
{
	(void)qp;
	return HR_ENOTSUP;
}
static int d_qp_local_attr(hr_qp *qp, hr_qp_attr *out)
{
	(void)qp, (void)out;
	return HR_ENOTSUP;
}
static int d_qp_connect(hr_qp *qp, const hr_qp_attr *remote)
{
	(void)qp, (void)remote;
	return HR_ENOTSUP;
}
static int d_qp_set_error(hr_qp *qp)
{
	(void)qp;
	return HR_ENOTSUP;
}
static int d_qp_state(hr_qp *qp)
{
	(void)qp;
	return -HR_ENOTSUP;
}
static int d_post_send(hr_qp *qp, const hr_send_wr *wr, uint32_t n, uint32_t *bad)
{
	(void)qp, (void)wr, (void)n, (void)bad;
	return HR_ENOTSUP;
}
static int d_post_recv(hr_qp *qp, const hr_recv_wr *wr, uint32_t n, uint32_t *bad)
{
	(void)qp, (void)wr, (void)n, (void)bad;
	return HR_ENOTSUP;
}
static int d_qp_counters(hr_qp *qp, hr_counters *out)
{
	(void)qp, (void)out;
	return HR_ENOTSUP;
}
static int d_dev_counters(hr_dev *d, hr_counters *out)
{
	(void)d, (void)out;
	return HR_ENOTSUP;
}
static int d_qp_caps(hr_qp *qp, hr_qp_caps *out)
{
	(void)qp, (void)out;
	return HR_ENOTSUP;
}
static int d_cq_depth(hr_cq *cq)
{
	(void)cq;
	return -HR_ENOTSUP;
}
/* Nothing to publish: see hr_provider.qp_note_cpu. */
static int d_qp_note_cpu(hr_qp *qp)
{
	(void)qp;
	return HR_OK;
}

/* Unknown, not unsupported: see hr_provider.qp_peer_cpu. */
static int d_qp_peer_cpu(hr_qp *qp)
{
	(void)qp;
	return -1;
}

/* Every op of hr_provider, once: the defaults, hr_set_ops and the size
 * check below are all written from it. */
#define HR_OPS(X)                                                                      \
	X(open) X(close) X(query) X(alloc_pd) X(free_pd) X(alloc_buf) X(free_buf)      \
	X(reg_mr) X(dereg_mr) X(create_chan) X(destroy_chan) X(chan_fd) X(create_cq)   \
	X(destroy_cq) X(poll_cq) X(arm_cq) X(get_cq_event) X(ack_cq_events)            \
	X(create_srq) X(destroy_srq) X(post_srq_recv) X(srq_max_wr) X(create_qp)       \
	X(destroy_qp) X(qp_local_attr) X(qp_connect) X(qp_set_error) X(qp_state)       \
	X(post_send) X(post_recv) X(qp_counters) X(dev_counters) X(qp_caps) X(cq_depth) \
	X(qp_peer_cpu) X(qp_note_cpu)

#define HR_COUNT_OP(op) +1
/* An op added to hr_provider but not to HR_OPS would stay NULL. */
_Static_assert(sizeof(hr_provider) == sizeof(void *) * (1 HR_OPS(HR_COUNT_OP)),
	       "HR_OPS must list every op of hr_provider");

#define HR_DEFAULT_OP(op) .op = d_##op,
static const hr_provider hr_default_ops = {.name = "", HR_OPS(HR_DEFAULT_OP)};

void hr_set_ops(hr_provider *dst, const hr_provider *src)
{
	*dst = hr_default_ops;
	dst->name = src->name;
#define HR_SET_OP(op)                                                                  \
	if (src->op)                                                                   \
		dst->op = src->op;
	HR_OPS(HR_SET_OP)
#undef HR_SET_OP
}
