/* hr_core.c - dispatch through the provider table, status strings and the
 * C-side pollers. */
#define _GNU_SOURCE
#include "hr.h"

#include <string.h>
#include <time.h>

#define PROV(o) (((const struct hr_obj *)(const void *)(o))->prov)

static const char *const status_names[HR_STATUS_MAX] = {
	[HR_OK] = "ok",
	[HR_ENODEV] = "no RDMA device",
	[HR_ENOMEM] = "out of memory",
	[HR_EINVAL] = "invalid argument",
	[HR_ENORES] = "no resources (queue full)",
	[HR_EREMOTE_ACCESS] = "remote access error",
	[HR_ERNR_RETRY] = "receiver not ready retry exceeded",
	[HR_ERETRY_EXC] = "transport retry exceeded",
	[HR_EFLUSH] = "work request flushed",
	[HR_ECLOSED] = "closed",
	[HR_ELOCAL_PROT] = "local protection error",
	[HR_ELOCAL_LEN] = "local length error",
	[HR_EREMOTE_INVAL] = "remote invalid request",
	[HR_EREMOTE_OP] = "remote operation error",
	[HR_ECQ_OVERFLOW] = "completion queue overflow",
	[HR_ETIMEDOUT] = "timed out",
	[HR_ESTATE] = "queue pair in wrong state",
	[HR_ENOTSUP] = "not supported",
	[HR_EIO] = "provider I/O error",
	[HR_EPEER] = "bad peer attributes",
	[HR_ELOCAL_OP] = "local QP operation error",
};

const char *hr_status_str(int st)
{
	if (st < 0)
		st = -st;
	if (st >= HR_STATUS_MAX || !status_names[st])
		return "unknown status";
	return status_names[st];
}

/* The provider registry, the one place a provider is registered: X(name)
 * for a provider that defines hr_<name>_ops, in the order auto tries them
 * (the same as pkg/internal/transport's Providers; TestProviderRegistry).
 * Each gets hr_<name>_provider, its ops over the defaults, which its
 * handles point to. */
#define HR_PROVIDERS(X) X(ibv) X(shm)

#define HR_PROVIDER_DEFINE(n)                                                          \
	extern const hr_provider hr_##n##_ops;                                         \
	hr_provider hr_##n##_provider;
HR_PROVIDERS(HR_PROVIDER_DEFINE)

#define HR_PROVIDER_ENTRY(n) {&hr_##n##_ops, &hr_##n##_provider},
static const struct {
	const hr_provider *ops;
	hr_provider *full;
} registry[] = {HR_PROVIDERS(HR_PROVIDER_ENTRY)};
#define NREGISTRY ((int)(sizeof(registry) / sizeof(registry[0])))

/* Before main (and before Go runs): no handle can exist earlier. */
__attribute__((constructor)) static void registry_init(void)
{
	for (int i = 0; i < NREGISTRY; i++)
		hr_set_ops(registry[i].full, registry[i].ops);
}

const hr_provider *hr_provider_by_name(const char *name)
{
	if (!name)
		return NULL;
	for (int i = 0; i < NREGISTRY; i++)
		if (strcmp(name, registry[i].full->name) == 0)
			return registry[i].full;
	return NULL;
}

const char *hr_provider_name(int i)
{
	if (i < 0 || i >= NREGISTRY)
		return NULL;
	return registry[i].full->name;
}

uint64_t hr_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int hr_nop(int x) { return x + 1; }

int hr_open(const hr_provider *p, const hr_dev_opts *o, hr_dev **out)
{
	if (!p || !out)
		return HR_EINVAL;
	return p->open(o, out);
}

void hr_close(hr_dev *d)
{
	if (d)
		PROV(d)->close(d);
}

int hr_query(hr_dev *d, hr_dev_info *out) { return PROV(d)->query(d, out); }
int hr_alloc_pd(hr_dev *d, hr_pd **out) { return PROV(d)->alloc_pd(d, out); }
int hr_free_pd(hr_pd *pd) { return PROV(pd)->free_pd(pd); }
int hr_alloc_buf(hr_pd *pd, size_t len, void **out) { return PROV(pd)->alloc_buf(pd, len, out); }
void hr_free_buf(hr_pd *pd, void *p, size_t len) { PROV(pd)->free_buf(pd, p, len); }
int hr_reg_mr(hr_pd *pd, void *addr, size_t len, uint32_t access, hr_mr **out)
{
	return PROV(pd)->reg_mr(pd, addr, len, access, out);
}
int hr_dereg_mr(hr_mr *mr) { return mr->prov->dereg_mr(mr); }
int hr_create_chan(hr_dev *d, hr_chan **out) { return PROV(d)->create_chan(d, out); }
int hr_destroy_chan(hr_chan *ch) { return PROV(ch)->destroy_chan(ch); }
int hr_chan_fd(hr_chan *ch) { return PROV(ch)->chan_fd(ch); }
int hr_create_cq(hr_dev *d, uint32_t depth, hr_chan *ch, hr_cq **out)
{
	return PROV(d)->create_cq(d, depth, ch, out);
}
int hr_destroy_cq(hr_cq *cq) { return PROV(cq)->destroy_cq(cq); }
int hr_poll_cq(hr_cq *cq, int n, hr_wc *wc) { return PROV(cq)->poll_cq(cq, n, wc); }
int hr_arm_cq(hr_cq *cq, int so) { return PROV(cq)->arm_cq(cq, so); }
int hr_get_cq_event(hr_chan *ch, int t, hr_cq **cq) { return PROV(ch)->get_cq_event(ch, t, cq); }
void hr_ack_cq_events(hr_cq *cq, unsigned n) { PROV(cq)->ack_cq_events(cq, n); }
int hr_create_srq(hr_pd *pd, uint32_t max_wr, uint32_t max_sge, hr_srq **out)
{
	return PROV(pd)->create_srq(pd, max_wr, max_sge, out);
}
int hr_destroy_srq(hr_srq *s) { return PROV(s)->destroy_srq(s); }
int hr_srq_max_wr(hr_srq *s) { return PROV(s)->srq_max_wr(s); }
int hr_post_srq_recv(hr_srq *s, const hr_recv_wr *wr, uint32_t n, uint32_t *bad)
{
	return PROV(s)->post_srq_recv(s, wr, n, bad);
}
int hr_create_qp(hr_pd *pd, const hr_qp_init *init, hr_qp **out)
{
	return PROV(pd)->create_qp(pd, init, out);
}
int hr_destroy_qp(hr_qp *qp) { return PROV(qp)->destroy_qp(qp); }
int hr_qp_local_attr(hr_qp *qp, hr_qp_attr *out) { return PROV(qp)->qp_local_attr(qp, out); }
int hr_qp_connect(hr_qp *qp, const hr_qp_attr *r) { return PROV(qp)->qp_connect(qp, r); }
int hr_qp_set_error(hr_qp *qp) { return PROV(qp)->qp_set_error(qp); }
int hr_qp_state(hr_qp *qp) { return PROV(qp)->qp_state(qp); }
int hr_post_send(hr_qp *qp, const hr_send_wr *wr, uint32_t n, uint32_t *bad)
{
	return PROV(qp)->post_send(qp, wr, n, bad);
}
int hr_post_recv(hr_qp *qp, const hr_recv_wr *wr, uint32_t n, uint32_t *bad)
{
	return PROV(qp)->post_recv(qp, wr, n, bad);
}
int hr_qp_counters(hr_qp *qp, hr_counters *out) { return PROV(qp)->qp_counters(qp, out); }
int hr_dev_counters(hr_dev *d, hr_counters *out) { return PROV(d)->dev_counters(d, out); }
int hr_query_qp_caps(hr_qp *qp, hr_qp_caps *out) { return PROV(qp)->qp_caps(qp, out); }
int hr_cq_depth(hr_cq *cq) { return PROV(cq)->cq_depth(cq); }
int hr_qp_peer_cpu(hr_qp *qp) { return PROV(qp)->qp_peer_cpu(qp); }
int hr_qp_note_cpu(hr_qp *qp) { return PROV(qp)->qp_note_cpu(qp); }

int hr_poll_spin(hr_cq *cq, int n, hr_wc *wc, uint64_t spin_ns)
{
	int (*poll)(hr_cq *, int, hr_wc *) = PROV(cq)->poll_cq;
	int got = poll(cq, n, wc);
	if (got != 0 || spin_ns == 0)
		return got;
	uint64_t deadline = hr_now_ns() + spin_ns;
	for (unsigned i = 1;; i++) {
		got = poll(cq, n, wc);
		if (got != 0)
			return got;
		/* Reading the clock every iteration would dominate the loop. */
		if ((i & 63) == 0 && hr_now_ns() >= deadline)
			return 0;
	}
}

int hr_wait_cq(hr_cq *cq, hr_chan *ch, int n, hr_wc *wc, int timeout_ms)
{
	const hr_provider *p = PROV(cq);
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : hr_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		int got = p->poll_cq(cq, n, wc);
		if (got != 0)
			return got;
		int st = p->arm_cq(cq, 0);
		if (st != HR_OK)
			return -st;
		/* A completion may have landed between the poll and the arm. */
		got = p->poll_cq(cq, n, wc);
		if (got != 0)
			return got;
		int left = -1;
		if (deadline != UINT64_MAX) {
			uint64_t now = hr_now_ns();
			if (now >= deadline)
				return 0;
			left = (int)((deadline - now + 999999) / 1000000);
		}
		hr_cq *ev = NULL;
		st = p->get_cq_event(ch, left, &ev);
		if (st == HR_ETIMEDOUT)
			return 0;
		if (st != HR_OK)
			return -st;
		p->ack_cq_events(ev, 1);
	}
}
