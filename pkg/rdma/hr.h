/* hr.h - the HatRPC verbs provider table.
 *
 * Protocol code (the Go wrappers in this package and the C unit tests) sees
 * only this header: opaque handles, plain structs and the dispatch functions
 * hr_*(), which forward to the provider table of the object's provider.
 * A provider fills only the ops it supports; the core (hr_default_ops.c)
 * answers HR_ENOTSUP for the rest. C here never prints or exits; every
 * failure is an hr_status.
 */
#ifndef HR_H
#define HR_H

#include <stddef.h>
#include <stdint.h>

/* The one status enum. Provider errors (errno, ibv_wc_status) are translated
 * into it once, in the provider; Go maps it to errors in one place (status.go).
 * Values are part of the Go contract: append only. */
typedef enum hr_status {
	HR_OK = 0,
	HR_ENODEV = 1,         /* no RDMA device / provider unavailable */
	HR_ENOMEM = 2,         /* out of memory or registration space */
	HR_EINVAL = 3,         /* bad argument */
	HR_ENORES = 4,         /* queue full (SQ, RQ, SRQ) */
	HR_EREMOTE_ACCESS = 5, /* bad rkey, bounds or permission at the target */
	HR_ERNR_RETRY = 6,     /* receiver not ready, retries exhausted */
	HR_ERETRY_EXC = 7,     /* transport retries exhausted (peer gone) */
	HR_EFLUSH = 8,         /* flushed because the QP is in the error state */
	HR_ECLOSED = 9,        /* object already closed */
	HR_ELOCAL_PROT = 10,   /* local lkey/bounds/permission violation */
	HR_ELOCAL_LEN = 11,    /* receive buffer too small (responder side) */
	HR_EREMOTE_INVAL = 12, /* responder rejected the request (e.g. length) */
	HR_EREMOTE_OP = 13,    /* responder failed to complete the operation */
	HR_ECQ_OVERFLOW = 14,  /* completion queue overrun */
	HR_ETIMEDOUT = 15,     /* a wait timed out (not a completion status) */
	HR_ESTATE = 16,        /* QP in the wrong state for the call */
	HR_ENOTSUP = 17,       /* operation not supported by the device */
	HR_EIO = 18,           /* other provider/OS failure */
	HR_EPEER = 19,         /* bad peer attributes (cannot map/reach peer) */
	HR_ELOCAL_OP = 20,     /* local QP operation error (malformed WR) */
	HR_STATUS_MAX
} hr_status;

const char *hr_status_str(int st);

/* Work request opcodes (send queue). */
enum hr_opcode {
	HR_OP_SEND = 0,
	HR_OP_SEND_WITH_IMM = 1,
	HR_OP_RDMA_WRITE = 2,
	HR_OP_RDMA_WRITE_WITH_IMM = 3,
	HR_OP_RDMA_READ = 4,
	HR_OP_ATOMIC_FETCH_AND_ADD = 5,
	HR_OP_ATOMIC_CMP_AND_SWP = 6,
	HR_OP_COUNT = 7
};

/* Completion opcodes: the send opcodes above, plus the receive side. */
enum hr_wc_opcode {
	HR_WC_RECV = 16,
	HR_WC_RECV_RDMA_WITH_IMM = 17
};

enum hr_send_flags {
	HR_SEND_SIGNALED = 1,
	HR_SEND_INLINE = 2,
	HR_SEND_SOLICITED = 4,
	HR_SEND_FENCE = 8,
	/* A hint: the target polls on another CPU (the endpoint polls busy,
	 * which the plan chooses only while the pollers fit the cores). shm
	 * then streams a large SEND or WRITE past the caches; ibv ignores it. */
	HR_SEND_STREAM = 16
};

enum hr_access {
	HR_ACCESS_LOCAL_WRITE = 1,
	HR_ACCESS_REMOTE_WRITE = 2,
	HR_ACCESS_REMOTE_READ = 4,
	HR_ACCESS_REMOTE_ATOMIC = 8
};

enum hr_wc_flags { HR_WC_WITH_IMM = 1 };

enum hr_qp_state {
	HR_QPS_RESET = 0,
	HR_QPS_INIT = 1,
	HR_QPS_RTR = 2,
	HR_QPS_RTS = 3,
	HR_QPS_ERR = 4
};

#define HR_MAX_SGE 4
#define HR_BLOB_MAX 64

typedef struct hr_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
} hr_sge;

/* A chain of work requests is an array: one post, one doorbell. */
typedef struct hr_send_wr {
	uint64_t wr_id;
	uint32_t opcode;
	uint32_t flags;
	uint32_t num_sge;
	uint32_t imm; /* host order */
	hr_sge sg[HR_MAX_SGE];
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t pad_;
	uint64_t compare_add;
	uint64_t swap;
} hr_send_wr;

typedef struct hr_recv_wr {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad_;
	hr_sge sg[HR_MAX_SGE];
} hr_recv_wr;

typedef struct hr_wc {
	uint64_t wr_id;
	uint32_t status; /* hr_status */
	uint32_t opcode; /* hr_opcode or hr_wc_opcode */
	uint32_t byte_len;
	uint32_t imm;
	uint32_t qp_num;
	uint32_t flags; /* hr_wc_flags */
	uint32_t vendor_err;
	uint32_t pad_;
} hr_wc;

/* What one side of an RC connection tells the other (the bootstrap message
 * carries it). blob is provider private (shm: how to map the peer). */
typedef struct hr_qp_attr {
	uint32_t qpn;
	uint32_t psn;
	uint32_t lid;
	int32_t gid_index;
	uint32_t mtu; /* bytes */
	uint32_t blob_len;
	uint8_t gid[16];
	uint8_t blob[HR_BLOB_MAX];
} hr_qp_attr;

typedef struct hr_dev_opts {
	const char *name;      /* device name; NULL/"" = first active port */
	int32_t gid_index;     /* -1 = automatic */
	uint32_t port;         /* 0 = first active */
	uint64_t shm_size;     /* shm: segment size; 0 = default */
	uint32_t rnr_timer_us; /* shm: RNR retry interval; 0 = default */
	uint32_t peer_check_ms;/* shm: dead-peer detection period; 0 = default */
	uint32_t no_fork_init; /* ibv: do not call ibv_fork_init() */
	uint32_t pad_;
} hr_dev_opts;

typedef struct hr_dev_info {
	char name[64];
	uint32_t port;
	uint32_t mtu;
	int32_t gid_index;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_inline;
	uint32_t max_cqe;
	uint32_t max_mr;   /* 0: no limit (shm) */
	uint32_t max_qp;   /* 0: no limit (shm) */
	uint32_t pad_;
	uint64_t max_mr_size;
} hr_dev_info;

/* One verbs port (hr_ibv_ports_read): state and link layer as the verbs
 * enums (enum ibv_port_state, IBV_LINK_LAYER_*). */
typedef struct hr_port_row {
	char dev[64];
	uint32_t port;
	uint32_t state;
	uint32_t link_layer;
	uint32_t pad_;
} hr_port_row;

/* One valid GID entry of the port ports[port_row]; type is enum
 * ibv_gid_type (0 IB, 1 RoCE v1, 2 RoCE v2), ifindex its netdev (0: none). */
typedef struct hr_gid_row {
	uint32_t port_row;
	uint32_t index;
	uint32_t type;
	uint32_t ifindex;
	uint8_t gid[16];
} hr_gid_row;

/* Every port of every verbs device and their valid GIDs; HR_ENORES when
 * the arrays are too small (call again with larger ones). */
int hr_ibv_ports_read(hr_port_row *ports, int max_ports, int *nports,
		      hr_gid_row *gids, int max_gids, int *ngids);

typedef struct hr_qp_init {
	void *send_cq; /* hr_cq* */
	void *recv_cq; /* hr_cq* */
	void *srq;     /* hr_srq* or NULL */
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_sge;
	uint32_t max_inline;
	uint32_t rnr_retry;  /* 0..7, 7 = infinite */
	uint32_t retry_cnt;  /* 0..7 */
	uint32_t timeout;    /* ibv local ack timeout exponent, 0 = default */
	uint32_t min_rnr_timer; /* ibv encoding, 0 = default */
} hr_qp_init;

/* What a QP actually got (providers may round the requested sizes up). */
typedef struct hr_qp_caps {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_sge;
	uint32_t max_inline;
} hr_qp_caps;

/* Counters, per QP and per device (device = sum over its QPs, live and gone).
 * posted: work requests posted by opcode; inbound: operations this QP served
 * as the target, by opcode (ibv: only what software sees, i.e. receives). */
typedef struct hr_counters {
	uint64_t posted[HR_OP_COUNT];
	uint64_t inbound[HR_OP_COUNT];
	uint64_t recv_posted;
	uint64_t bytes_out;
	uint64_t bytes_in;
	uint64_t completions;
	uint64_t errors;
} hr_counters;

typedef struct hr_dev hr_dev;
typedef struct hr_pd hr_pd;
typedef struct hr_cq hr_cq;
typedef struct hr_chan hr_chan;
typedef struct hr_srq hr_srq;
typedef struct hr_qp hr_qp;

/* A memory region; the public part every provider fills in. */
typedef struct hr_mr {
	const struct hr_provider *prov;
	void *addr;
	uint64_t length;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t access;
	uint32_t pad_;
} hr_mr;

/* The provider table. A provider defines hr_<name>_ops with the ops it
 * supports and is registered by one line in hr_core.c (HR_PROVIDERS); the
 * core fills the ops it leaves NULL with defaults (hr_set_ops), so every
 * op of hr_<name>_provider, the table its handles point to, is set: an
 * unsupported one answers HR_ENOTSUP (-HR_ENOTSUP from the ops returning
 * a count or an fd; nothing from those returning void). */
typedef struct hr_provider {
	const char *name;
	int (*open)(const hr_dev_opts *o, hr_dev **out);
	void (*close)(hr_dev *d);
	int (*query)(hr_dev *d, hr_dev_info *out);
	int (*alloc_pd)(hr_dev *d, hr_pd **out);
	int (*free_pd)(hr_pd *pd);
	/* Registered memory is owned by C: alloc_buf returns memory the provider
	 * can register (shm: inside the shareable segment). */
	int (*alloc_buf)(hr_pd *pd, size_t len, void **out);
	void (*free_buf)(hr_pd *pd, void *p, size_t len);
	int (*reg_mr)(hr_pd *pd, void *addr, size_t len, uint32_t access, hr_mr **out);
	int (*dereg_mr)(hr_mr *mr);
	int (*create_chan)(hr_dev *d, hr_chan **out);
	int (*destroy_chan)(hr_chan *ch);
	int (*chan_fd)(hr_chan *ch);
	int (*create_cq)(hr_dev *d, uint32_t depth, hr_chan *ch, hr_cq **out);
	int (*destroy_cq)(hr_cq *cq);
	/* >= 0: number of completions; < 0: -hr_status */
	int (*poll_cq)(hr_cq *cq, int n, hr_wc *wc);
	int (*arm_cq)(hr_cq *cq, int solicited_only);
	/* Blocks up to timeout_ms (-1 = forever) for an event on ch. */
	int (*get_cq_event)(hr_chan *ch, int timeout_ms, hr_cq **cq);
	void (*ack_cq_events)(hr_cq *cq, unsigned n);
	int (*create_srq)(hr_pd *pd, uint32_t max_wr, uint32_t max_sge, hr_srq **out);
	int (*destroy_srq)(hr_srq *srq);
	int (*post_srq_recv)(hr_srq *srq, const hr_recv_wr *wr, uint32_t n, uint32_t *bad);
	/* Receives the SRQ holds as granted (>= the requested max_wr). */
	int (*srq_max_wr)(hr_srq *srq);
	int (*create_qp)(hr_pd *pd, const hr_qp_init *init, hr_qp **out);
	int (*destroy_qp)(hr_qp *qp);
	int (*qp_local_attr)(hr_qp *qp, hr_qp_attr *out);
	/* INIT -> RTR -> RTS against the peer's attributes. */
	int (*qp_connect)(hr_qp *qp, const hr_qp_attr *remote);
	int (*qp_set_error)(hr_qp *qp);
	int (*qp_state)(hr_qp *qp);
	int (*post_send)(hr_qp *qp, const hr_send_wr *wr, uint32_t n, uint32_t *bad);
	int (*post_recv)(hr_qp *qp, const hr_recv_wr *wr, uint32_t n, uint32_t *bad);
	int (*qp_counters)(hr_qp *qp, hr_counters *out);
	int (*dev_counters)(hr_dev *d, hr_counters *out);
	int (*qp_caps)(hr_qp *qp, hr_qp_caps *out);
	/* Completions the CQ holds (>= the requested depth). */
	int (*cq_depth)(hr_cq *cq);
	/* The CPU the connected peer's engine thread last noted
	 * (qp_note_cpu), or -1 when unknown (the default: a NIC's peer is
	 * normally on another host). Not an error, so not -HR_ENOTSUP: the engine's
	 * handoff rule reads it at a spin's yield (hr_proto_int.h,
	 * EP_SPIN_HANDOFFS) and treats unknown as "maybe on this CPU". */
	int (*qp_peer_cpu)(hr_qp *qp);
	/* The calling thread waits on this QP's peer long enough to yield
	 * (a spin that reached its clock, a yield, a wake-up from a sleep):
	 * publish the CPU it is on now where the connected peer's
	 * qp_peer_cpu reads it. Never on the post path (a 64 B round trip's
	 * waits end before any of these). A no-op where the provider keeps
	 * no peer CPU. */
	int (*qp_note_cpu)(hr_qp *qp);
} hr_provider;

/* Every handle starts with its provider, so dispatch needs no lookup. */
struct hr_obj {
	const hr_provider *prov;
};

/* How registered memory survives a fork() without exec (ibv; rdma-core's
 * ibv_is_fork_initialized): HR_FORK_UNNEEDED, the kernel copies pinned
 * pages into the child (5.13+); HR_FORK_ENABLED, ibv_fork_init marked every
 * MR MADV_DONTFORK; HR_FORK_DISABLED, neither (a parent's write to an MR
 * page after a fork would move it away from the NIC). The shm provider
 * marks all its mappings MADV_DONTFORK whatever this says. */
enum { HR_FORK_DISABLED = 0, HR_FORK_ENABLED = 1, HR_FORK_UNNEEDED = 2 };
int hr_fork_status(void);
const char *hr_fork_status_str(int st);

/* Provider by name ("shm", "ibv"); NULL if unknown. */
const hr_provider *hr_provider_by_name(const char *name);
/* The i-th registered provider's name, in the order auto tries them; NULL
 * past the last. */
const char *hr_provider_name(int i);
/* Copies src's non-NULL ops (and name) over the defaults into dst. */
void hr_set_ops(hr_provider *dst, const hr_provider *src);

/* Dispatch (hr_core.c). */
int hr_open(const hr_provider *p, const hr_dev_opts *o, hr_dev **out);
void hr_close(hr_dev *d);
int hr_query(hr_dev *d, hr_dev_info *out);
int hr_alloc_pd(hr_dev *d, hr_pd **out);
int hr_free_pd(hr_pd *pd);
int hr_alloc_buf(hr_pd *pd, size_t len, void **out);
void hr_free_buf(hr_pd *pd, void *p, size_t len);
int hr_reg_mr(hr_pd *pd, void *addr, size_t len, uint32_t access, hr_mr **out);
int hr_dereg_mr(hr_mr *mr);
int hr_create_chan(hr_dev *d, hr_chan **out);
int hr_destroy_chan(hr_chan *ch);
int hr_chan_fd(hr_chan *ch);
int hr_create_cq(hr_dev *d, uint32_t depth, hr_chan *ch, hr_cq **out);
int hr_destroy_cq(hr_cq *cq);
int hr_poll_cq(hr_cq *cq, int n, hr_wc *wc);
int hr_arm_cq(hr_cq *cq, int solicited_only);
int hr_get_cq_event(hr_chan *ch, int timeout_ms, hr_cq **cq);
void hr_ack_cq_events(hr_cq *cq, unsigned n);
int hr_create_srq(hr_pd *pd, uint32_t max_wr, uint32_t max_sge, hr_srq **out);
int hr_destroy_srq(hr_srq *srq);
int hr_post_srq_recv(hr_srq *srq, const hr_recv_wr *wr, uint32_t n, uint32_t *bad);
int hr_srq_max_wr(hr_srq *srq);
int hr_create_qp(hr_pd *pd, const hr_qp_init *init, hr_qp **out);
int hr_destroy_qp(hr_qp *qp);
int hr_qp_local_attr(hr_qp *qp, hr_qp_attr *out);
int hr_qp_connect(hr_qp *qp, const hr_qp_attr *remote);
int hr_qp_set_error(hr_qp *qp);
int hr_qp_state(hr_qp *qp);
int hr_post_send(hr_qp *qp, const hr_send_wr *wr, uint32_t n, uint32_t *bad);
int hr_post_recv(hr_qp *qp, const hr_recv_wr *wr, uint32_t n, uint32_t *bad);
int hr_qp_counters(hr_qp *qp, hr_counters *out);
int hr_dev_counters(hr_dev *d, hr_counters *out);
int hr_query_qp_caps(hr_qp *qp, hr_qp_caps *out);
int hr_cq_depth(hr_cq *cq);
int hr_qp_peer_cpu(hr_qp *qp);
int hr_qp_note_cpu(hr_qp *qp);

/* Pollers that run in C so completions cross to Go in batches.
 * hr_poll_spin busy-polls up to spin_ns for at least one completion.
 * hr_wait_cq arms the CQ and blocks on its channel (releasing the caller's
 * thread to the kernel) until completions arrive or timeout_ms passes;
 * returns the count, 0 on timeout, or -hr_status. */
int hr_poll_spin(hr_cq *cq, int n, hr_wc *wc, uint64_t spin_ns);
int hr_wait_cq(hr_cq *cq, hr_chan *ch, int n, hr_wc *wc, int timeout_ms);

uint64_t hr_now_ns(void);
/* A no-op crossing, for measuring the cgo cost. */
int hr_nop(int x);

#endif
