/* shm_internal.h - private to the shm provider (hr_shm*.c).
 *
 * Everything a peer touches lives in the owner's segments (memfds the peer
 * maps through /proc/<pid>/fd/<n>). Each protection domain has a segment of
 * its own: its MR and QP tables, QP control blocks, receive rings and
 * registered memory and each QP's inbound completion ring — so a peer
 * connected to a QP of one PD maps nothing of another PD's. CQ rings are
 * private to their owner: the owner's poll drains its own ring (local
 * completions) and the inbound rings of the QPs that use the CQ for receives,
 * validating every entry against what it posted. A peer wakes the owner's
 * completion channel through the QP's own wake pipe (its fd passed at
 * connect), so no peer maps anything device-wide. Pointers never cross
 * processes; only offsets do. The initiator does the work a NIC would do. */
#ifndef SHM_INTERNAL_H
#define SHM_INTERNAL_H

#include "hr.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define SHM_MAGIC 0x314d48535248ull /* "HRSHM1" */
#define SHM_VERSION 5
#define SHM_MAX_MR 4096
#define SHM_MAX_QP 1024
#define SHM_MAX_INLINE 256
#define SHM_MAX_WR 16384
#define SHM_MAX_CQE (1u << 20)
#define SHM_DEFAULT_SIZE (1ull << 30)
#define SHM_DEFAULT_RNR_US 50
#define SHM_DEFAULT_PEER_MS 5
#define SHM_DRAIN_WAIT_NS 1000000000ull
#define CACHELINE 64

struct shm_mr_ent {
	_Atomic uint32_t key; /* 0 = free; published last */
	uint32_t access;
	uint64_t va;  /* owner's virtual address of the region */
	uint64_t off; /* segment offset */
	uint64_t len;
	uint32_t pd; /* protection domain: only QPs of this PD reach it */
	uint32_t pad0_;
	uint64_t pad_[3];
};

/* inflight is the QP's in-flight window, a sequence written only by the
 * initiator connected to the QP (under its QP lock, as the inbound ring's
 * tail): odd while a work request executes against the QP. Every remote
 * access (the QP's rings, and any MR through a key) happens inside it, so
 * it is also what deregistering an MR waits on: a value that moved since
 * the key was cleared means the access that might have seen the key is
 * over (shm_dereg_mr). */
struct shm_qp_ent {
	_Atomic uint32_t qpn; /* 0 = free */
	_Atomic uint32_t inflight;
	uint64_t off;
};

static inline int shm_inflight_open(uint32_t v) { return v & 1; }

struct shm_hdr {
	uint64_t magic;
	uint64_t seg_id;
	uint64_t size;
	uint32_t pid;
	uint32_t version;
	_Atomic uint32_t alive;
	_Atomic uint32_t svc_word; /* futex: wakes the owner's service thread */
	uint8_t pad_[CACHELINE - 40];
	struct shm_mr_ent mr[SHM_MAX_MR];
	struct shm_qp_ent qp[SHM_MAX_QP];
};

struct shm_cqe {
	_Atomic uint64_t seq; /* slot index + 1 once written */
	uint64_t sq_idx;
	hr_wc wc;
	uint32_t is_send;
	uint32_t pad_;
};

/* A CQ's own ring, in the owner's private memory: its producers are the
 * owner's threads (send completions). */
struct shm_cq_sh {
	_Atomic uint64_t tail; /* producers reserve here */
	uint8_t p1_[CACHELINE - 8];
	_Atomic uint64_t head; /* consumer */
	uint8_t p2_[CACHELINE - 8];
	_Atomic uint32_t overflow;
	uint8_t p3_[CACHELINE - 4];
	struct shm_cqe e[];
};

/* Inbound completion: what a responder NIC reports for a receive it
 * consumed. The owner takes wr_id and the buffer length from its private
 * record of the receive at rslot, and the QP number from the ring's QP. */
struct shm_icqe {
	_Atomic uint64_t seq; /* slot index + 1 once written */
	uint64_t rslot;       /* the receive consumed: RQ or SRQ ring index */
	/* The owner copies the entry in three 8-byte words (lw, sw): a
	 * field-by-field copy made the checks that read two of the byte
	 * fields at once wait for their store-to-load forwarding to fail. */
	union {
		struct {
			uint32_t byte_len;
			uint32_t imm;
		};
		uint64_t lw;
	};
	union {
		struct {
			uint8_t status, opcode, flags, pad_[5];
		};
		uint64_t sw;
	};
};

/* A QP's inbound completion ring, next to its control block in the PD
 * segment: the connected initiator produces, the owner's poll of the QP's
 * receive CQ consumes. Only the QP's peers map it. */
_Static_assert(sizeof(struct shm_icqe) == 32, "two inbound entries a cache line");

struct shm_icq_sh {
	_Atomic uint64_t tail;
	uint8_t p1_[CACHELINE - 8];
	_Atomic uint64_t head; /* the owner's: the producer's fullness check */
	uint8_t p2_[CACHELINE - 8];
	_Atomic uint32_t armed; /* copy of the CQ's arming: 1 any, 2 solicited */
	_Atomic uint32_t fired; /* the producer consumed armed and rang */
	uint32_t cap;
	uint32_t pad_;
	uint8_t p3_[CACHELINE - 16];
	struct shm_icqe e[];
};

/* 128-byte slots: a receive with up to three SGEs lives in one cache line,
 * which is all the initiator reads — including seq, so polling for a posted
 * receive needs no separate tail line. */
struct shm_rwqe {
	_Atomic uint32_t seq; /* low 32 bits of slot index + 1 once written */
	uint32_t num_sge;
	uint64_t wr_id;
	hr_sge sg[HR_MAX_SGE];
	uint8_t pad_[128 - 16 - HR_MAX_SGE * 16];
} __attribute__((aligned(64)));

/* Receive ring: one producer (the owner, under a local mutex), many
 * consumers (initiators, by CAS on head). tail is the producer's own. */
struct shm_rq_sh {
	_Atomic uint64_t head;
	uint8_t p1_[CACHELINE - 8];
	_Atomic uint64_t tail;
	uint8_t p2_[CACHELINE - 8];
	uint32_t cap;
	uint32_t max_sge;
	uint8_t p3_[CACHELINE - 8];
	struct shm_rwqe e[];
};

struct shm_qp_sh {
	_Atomic uint32_t state;
	uint32_t qpn;
	uint64_t icq_off; /* inbound completion ring (shm_icq_sh) */
	uint64_t rq_off;  /* own ring or the SRQ's */
	uint32_t pd;     /* remote keys must name an MR of this PD */
	uint8_t p1_[CACHELINE - 28];
	/* written by the peer initiator */
	_Atomic uint64_t inbound[HR_OP_COUNT];
	_Atomic uint64_t bytes_in;
	_Atomic uint64_t completions;
	_Atomic uint64_t errors;
	/* the CPU the initiator's engine thread last noted while it waited
	 * (shm_qp_note_cpu), -1 before one (shm_qp_peer_cpu): beside
	 * completions, a line the initiator writes anyway */
	_Atomic int32_t peer_cpu;
};

struct shm_extent {
	uint64_t off, len;
};

/* One memfd segment: the device's or a PD's. Its allocator is the owner's
 * (under dev->lock). */
struct shm_seg {
	int fd;
	uint8_t *base;
	uint64_t size;
	struct shm_hdr *hdr;
	struct shm_extent *freel;
	size_t nfree, capfree;
};

/* hr_shm_fdpass.c: segment and wake pipe fds for peers of a non-dumpable
 * process, each named by a random 64-bit id. */
void shm_fdpass_add(uint64_t id, int fd);
void shm_fdpass_del(int fd);
int shm_fdpass_fetch(uint32_t pid, uint64_t id);

struct shm_peer {
	struct shm_peer *next;
	uint32_t pid;
	uint64_t seg_id;
	uint8_t *base;
	uint64_t size;
	int pidfd;
	uint64_t id; /* the watcher's handle: never reused, unlike the pointer */
	int refs;
	_Atomic int dead;
};

struct shm_dev;
struct shm_chan;

struct shm_pd {
	const hr_provider *prov;
	struct shm_dev *dev;
	uint32_t id; /* nonzero, unique per device */
	struct shm_seg seg;
	_Atomic int refs; /* buffers, MRs, SRQs and QPs in it */
	struct shm_pd *next; /* device list (dev->lock) */
};

struct shm_mr {
	hr_mr pub;
	struct shm_pd *pd;
	uint32_t idx;
};

struct shm_qp;

struct shm_cq {
	const hr_provider *prov;
	struct shm_dev *dev;
	struct shm_cq_sh *sh; /* private (anonymous mapping) */
	uint64_t bytes;
	struct shm_chan *chan;
	struct shm_cq *chan_next;
	_Atomic int refs; /* QPs using it */
	uint64_t cons;    /* consumer position (private copy of head) */
	uint32_t cap;
	uint32_t events_acked;
	_Atomic uint32_t armed;   /* 0, 1 = next completion, 2 = solicited */
	_Atomic uint32_t pending; /* an event is waiting on the channel */
	/* QPs whose receive CQ this is: poll drains their inbound rings.
	 * qlock is the consumer's; create/destroy QP and arm take it too.
	 * A spinlock (as mlx5's CQ lock): it is held only for a drain, and
	 * every poll takes it, where a mutex's calls were most of the cost of
	 * an empty poll. */
	pthread_spinlock_t qlock;
	struct shm_qp **rqps;
	uint32_t nrqps, caprqps, rr;
};

/* A completion channel is an epoll set: a local eventfd (the owner's own
 * completions and flushes) and the read end of the wake pipe of every QP
 * whose receive CQ uses the channel (rung by that QP's peer). The bytes are
 * only wake-ups; the CQs' pending and fired flags are the events. */
struct shm_chan {
	const hr_provider *prov;
	struct shm_dev *dev;
	pthread_mutex_t lock;
	struct shm_cq *cqs;
	int epfd, efd;
	uint64_t gen; /* wake pipes removed: see shm_get_cq_event */
};

struct shm_srq {
	const hr_provider *prov;
	struct shm_dev *dev;
	struct shm_pd *pd;
	struct shm_rq_sh *sh;
	uint64_t off, bytes;
	pthread_mutex_t lock;
	_Atomic int refs;
	uint32_t cap, max_sge; /* private copies of the ring's */
	/* The owner's record of each posted receive (under lock): inbound
	 * completions are checked against it, and a slot is reposted only
	 * once its completion was polled (as mlx5 frees WQEs at poll). */
	struct shm_rshadow *shadow;
	uint64_t posted, done;
};

struct shm_rshadow {
	uint64_t wr_id;
	uint64_t len; /* total SGE length */
	uint64_t slot; /* SRQ: absolute index */
	uint32_t done; /* SRQ: completion polled */
	uint32_t pad_;
};

struct shm_sqe {
	hr_send_wr wr;
	uint32_t inl_len;
	uint32_t pad_;
};

struct shm_qp {
	const hr_provider *prov;
	struct shm_dev *dev;
	struct shm_qp_sh *sh;
	uint64_t sh_off, sh_bytes;
	struct shm_rq_sh *rq; /* own ring (rq_off) or the SRQ's */
	uint64_t rq_off, rq_bytes; /* own ring only */
	uint32_t qpn, idx, psn;
	uint32_t pd; /* local keys must name an MR of this PD */
	struct shm_pd *pdp;
	struct shm_cq *scq, *rcq;
	struct shm_srq *srq;
	pthread_mutex_t lock;     /* send side */
	pthread_spinlock_t rq_lock; /* own receive ring producer (held briefly) */
	uint64_t recv_posted;     /* under rq_lock */
	/* own ring: receives posted (published after the shadow entry) and
	 * completed (polled, incl. flushes); a slot is reused at poll */
	struct shm_rshadow *rshadow;
	_Atomic uint64_t rq_posted, rq_done;
	/* inbound completion ring: consumed by the receive CQ's poll */
	struct shm_icq_sh *icq;
	uint32_t icq_cap;
	int icq_bad; /* a forged or corrupt entry: the ring is ignored */
	uint64_t icq_cons;
	struct shm_sqe *sq;
	uint8_t *inl;
	uint32_t sq_cap, max_inline, max_sge, rnr_retry, max_recv;
	uint64_t sq_tail, sq_next;
	uint64_t scq_head_cache; /* our send CQ */
	uint64_t rcq_head_cache; /* the target QP's inbound ring */
	_Atomic uint64_t sq_retired;
	uint32_t rnr_tries;
	uint64_t rnr_deadline;
	_Atomic int pending;
	/* the target's ring and CQ sizes and offsets, read from its shared
	 * copies and validated once for the target control block at t_sh_off
	 * (exec_wr): the copies here are what is used, so a target that
	 * rewrites its own stays inside its mapping */
	uint32_t t_rcap, t_ccap;
	uint64_t t_rq_off, t_cq_off;
	uint64_t t_sh_off; /* 0: not validated yet */
	/* the connected peer: its QP's PD segment (rbase), read by the
	 * service thread, and its QP's wake pipe (t_wake, ours to write) */
	struct shm_peer *_Atomic peer;
	uint8_t *rbase;
	uint64_t rsize;
	struct shm_hdr *rhdr;
	int t_wake;
	uint32_t rqpn;
	/* our wake pipe, when the receive CQ has a channel: one read-write
	 * fd (so a peer's write never meets a pipe without readers), in the
	 * channel's epoll set and what a peer opens or is passed */
	int wake_rw;
	uint64_t wake_id, wake_ino;
	hr_counters cnt; /* send side, under lock */
	/* the CPU last stored into the target's peer_cpu (shm_qp_note_cpu),
	 * -1 none: read without the lock, written under it */
	_Atomic int32_t noted_cpu;
};

struct shm_dev {
	const hr_provider *prov;
	struct shm_seg seg;   /* private: the service thread's futex word */
	uint64_t size;        /* of every segment (virtual; pages on touch) */
	pthread_mutex_t lock; /* allocators, tables, peers, channels */
	struct shm_qp *_Atomic qps[SHM_MAX_QP];
	uint32_t mr_gen[SHM_MAX_MR];
	uint32_t qp_gen[SHM_MAX_QP];
	struct shm_peer *peers;
	struct shm_pd *pds; /* closing the device marks their segments dead */
	hr_counters gone; /* counters of destroyed QPs */
	_Atomic uint32_t next_pd;
	uint32_t rnr_us, peer_ms;
	pthread_t svc;
	int svc_started;
	/* Peer deaths arrive as events: a watcher thread blocks in epoll on
	 * every peer's pidfd (woken by wake_efd to stop), so live peers cost
	 * no periodic work. */
	int epfd, wake_efd;
	pthread_t watch;
	int watch_started;
	uint64_t next_peer_id;
	_Atomic int stop;
};

/* hr_shm_dev.c, hr_shm.c */
int shm_dev_open(const hr_dev_opts *o, hr_dev **out);
void shm_dev_close(hr_dev *hd);
/* madvise(MADV_DONTFORK): hr_shm_dev.c says why. */
int shm_dontfork(void *p, uint64_t size);
int shm_seg_create(struct shm_seg *s, uint64_t size, int private_);
void shm_seg_destroy(struct shm_seg *s);
uint64_t shm_alloc(struct shm_seg *s, uint64_t len, uint64_t align);
void shm_free(struct shm_seg *s, uint64_t off, uint64_t len);
void shm_futex_wake(_Atomic uint32_t *w);
int shm_futex_wait(_Atomic uint32_t *w, uint32_t val, int64_t timeout_us);
void shm_kick(struct shm_hdr *h); /* wake a device's service thread */
/* hr_shm_cq.c. Push a local completion into cq's own ring; head_cache (may
 * be NULL) is the producer's last view of the consumer's head. */
int shm_cq_push(struct shm_cq *cq, const hr_wc *wc, int is_send, uint64_t sq_idx, uint64_t *head_cache);
void shm_cq_overflowed(struct shm_cq *cq);
/* The owner has completions to report without an entry (flushes): wake an
 * armed CQ's channel. */
void shm_cq_fire_local(struct shm_cq *cq);
int shm_cq_attach(struct shm_cq *cq, struct shm_qp *qp);
void shm_cq_detach(struct shm_cq *cq, struct shm_qp *qp);
int shm_create_chan(hr_dev *hd, hr_chan **out);
int shm_destroy_chan(hr_chan *hc);
int shm_chan_fd(hr_chan *hc);
int shm_create_cq(hr_dev *hd, uint32_t depth, hr_chan *hc, hr_cq **out);
int shm_destroy_cq(hr_cq *hcq);
int shm_poll_cq(hr_cq *hcq, int n, hr_wc *wc);
int shm_arm_cq(hr_cq *hcq, int solicited_only);
int shm_get_cq_event(hr_chan *hc, int timeout_ms, hr_cq **out);
void shm_ack_cq_events(hr_cq *hcq, unsigned n);
int shm_cq_depth(hr_cq *hcq);
struct shm_peer *shm_peer_get(struct shm_dev *d, uint32_t pid, int fd, uint64_t seg_id,
			      uint64_t size, int *st);
void shm_peer_put(struct shm_dev *d, struct shm_peer *p);

/* hr_shm_qp.c, hr_shm_exec.c */
int shm_rq_pop(struct shm_rq_sh *rq, uint32_t cap, struct shm_rwqe *out, uint64_t *slot);
void shm_rq_flush(struct shm_qp *qp);
/* Receive CQ poll: turn inbound entries of qp into completions. */
int shm_icq_drain(struct shm_qp *qp, int n, hr_wc *wc);
int shm_srq_complete(struct shm_srq *s, uint64_t slot, struct shm_rshadow *out);
void shm_qp_to_error(struct shm_qp *qp);

static inline void cnt_add(_Atomic uint64_t *c, uint64_t v)
{
	/* One writer per counter (the connected peer), so no RMW is needed. */
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}

void shm_qp_progress(struct shm_qp *qp);
void shm_qp_sweep(struct shm_qp *qp);
void shm_qp_retire(struct shm_dev *d, uint32_t qpn, uint64_t sq_idx);
/* The shm ops and the full table its handles point to (hr_core.c). */
extern const hr_provider hr_shm_ops;
extern hr_provider hr_shm_provider;
int shm_create_srq(hr_pd *pd, uint32_t max_wr, uint32_t max_sge, hr_srq **out);
int shm_destroy_srq(hr_srq *s);
int shm_srq_max_wr(hr_srq *s);
int shm_post_srq_recv(hr_srq *s, const hr_recv_wr *wr, uint32_t n, uint32_t *bad);
int shm_create_qp(hr_pd *pd, const hr_qp_init *init, hr_qp **out);
int shm_destroy_qp(hr_qp *q);
int shm_qp_local_attr(hr_qp *q, hr_qp_attr *out);
int shm_qp_connect(hr_qp *q, const hr_qp_attr *r);
int shm_qp_set_error(hr_qp *q);
int shm_qp_state(hr_qp *q);
int shm_post_send(hr_qp *q, const hr_send_wr *wr, uint32_t n, uint32_t *bad);
int shm_post_recv(hr_qp *q, const hr_recv_wr *wr, uint32_t n, uint32_t *bad);
int shm_qp_counters(hr_qp *q, hr_counters *out);
int shm_qp_caps(hr_qp *q, hr_qp_caps *out);
int shm_qp_peer_cpu(hr_qp *q);
int shm_qp_note_cpu(hr_qp *q);
void shm_counters_add(hr_counters *dst, const hr_counters *src);
void shm_qp_sh_counters(struct shm_qp_sh *sh, hr_counters *out);

/* Blob carried in hr_qp_attr.blob: the QP's PD segment and its wake pipe
 * (wake_fd -1: the receive CQ has no channel). */
struct shm_blob {
	uint32_t pid;
	int32_t fd;
	uint64_t seg_id;
	uint64_t size;
	int32_t wake_fd;
	uint32_t pad_;
	uint64_t wake_id;
	uint64_t wake_ino;
};

/* hr_shm_cq.c: the QP's wake pipe (when its receive CQ has a channel), and
 * the peer's end of the target's. */
int shm_wake_create(struct shm_qp *qp);
void shm_wake_destroy(struct shm_qp *qp);
int shm_wake_open(uint32_t pid, int fd, uint64_t id, uint64_t ino);
void shm_wake_ring(int fd);

#endif
