/* ibv_internal.h - private to the ibv provider (hr_ibv*.c). */
#ifndef IBV_INTERNAL_H
#define IBV_INTERNAL_H

#include "hr.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>

#define IBV_QP_BUCKETS 1024

/* The ibv ops and the full table its handles point to (hr_core.c). */
extern const hr_provider hr_ibv_ops;
extern hr_provider hr_ibv_provider;

struct ibv_hqp;

struct ibv_hdev {
	const hr_provider *prov;
	struct ibv_context *ctx;
	struct ibv_device_attr attr;
	struct ibv_port_attr port_attr;
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	char name[64];
	pthread_mutex_t lock;
	struct ibv_hqp *qps[IBV_QP_BUCKETS]; /* by qp_num, for per-QP counters */
	hr_counters gone;
	/* Affiliated async events (CQ overrun, QP fatal) are read by a thread
	 * of the device's own: verbs report them nowhere else. */
	pthread_t async_thr;
	int async_pipe[2];
	int async_started;
};

struct ibv_hpd {
	const hr_provider *prov;
	struct ibv_hdev *dev;
	struct ibv_pd *pd;
};

struct ibv_hmr {
	hr_mr pub;
	struct ibv_mr *mr;
};

struct ibv_hchan {
	const hr_provider *prov;
	struct ibv_comp_channel *ch;
};

struct ibv_hcq {
	const hr_provider *prov;
	struct ibv_hdev *dev;
	struct ibv_cq *cq;
	_Atomic int overflow; /* IBV_EVENT_CQ_ERR seen: the CQ lost completions */
};

struct ibv_hsrq {
	const hr_provider *prov;
	struct ibv_srq *srq;
	uint32_t max_wr; /* as granted */
};

struct ibv_hqp {
	const hr_provider *prov;
	struct ibv_hdev *dev;
	struct ibv_qp *qp;
	struct ibv_hqp *next; /* bucket chain */
	struct ibv_hcq *scq, *rcq;
	/* Set once the QP is known to be in the error state (set_error, an error
	 * completion, a fatal async event): receives posted then must be flushed,
	 * and some providers (rxe) only flush when the QP is moved to ERR. */
	_Atomic int in_error;
	uint32_t psn;
	uint32_t rnr_retry, retry_cnt, timeout, min_rnr_timer;
	hr_qp_caps caps; /* as granted by the provider */
	pthread_mutex_t lock;
	hr_counters cnt;
	_Atomic uint64_t completions, errors, bytes_in;
	_Atomic uint64_t inbound[HR_OP_COUNT];
};


int hr_ibv_errno_status(int e);
int hr_ibv_mtu_bytes(enum ibv_mtu m);
enum ibv_mtu hr_ibv_mtu_enum(uint32_t bytes);
void hr_ibv_counters_add(hr_counters *dst, const hr_counters *src);
int ibv_hr_create_srq(hr_pd *hp, uint32_t max_wr, uint32_t max_sge, hr_srq **out);
int ibv_hr_destroy_srq(hr_srq *hs);
int ibv_hr_srq_max_wr(hr_srq *hs);
int ibv_hr_async_start(struct ibv_hdev *d);
void ibv_hr_async_stop(struct ibv_hdev *d);
struct ibv_hqp *ibv_hr_qp_lookup(struct ibv_hdev *d, uint32_t qpn);
int ibv_hr_post_srq_recv(hr_srq *hs, const hr_recv_wr *wr, uint32_t n, uint32_t *bad);
int ibv_hr_create_qp(hr_pd *hp, const hr_qp_init *in, hr_qp **out);
int ibv_hr_qp_counters(hr_qp *hq, hr_counters *out);
int ibv_hr_destroy_qp(hr_qp *hq);
int ibv_hr_qp_local_attr(hr_qp *hq, hr_qp_attr *out);
int ibv_hr_qp_connect(hr_qp *hq, const hr_qp_attr *r);
int ibv_hr_qp_set_error(hr_qp *hq);
int ibv_hr_qp_state(hr_qp *hq);
int ibv_hr_post_send(hr_qp *hq, const hr_send_wr *in, uint32_t n, uint32_t *bad);
int ibv_hr_post_recv(hr_qp *hq, const hr_recv_wr *wr, uint32_t n, uint32_t *bad);

int ibv_hr_qp_caps(hr_qp *hq, hr_qp_caps *out);

#endif
