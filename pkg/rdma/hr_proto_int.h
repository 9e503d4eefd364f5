/* hr_proto_int.h - engine internals shared by hr_proto.c (endpoint, buffers,
 * the progress loop) and hr_proto_msg.c (the protocol state machines). Sees
 * only hr.h. */
#ifndef HR_PROTO_INT_H
#define HR_PROTO_INT_H

#include "hr_proto.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>

/* Message types (hr_msg.type). */
enum {
	HRM_DATA = 1,  /* payload follows the header (slot or pre-known buffer) */
	HRM_RTS_W = 2, /* Write-RNDV request to send: len */
	HRM_CTS = 3,   /* Write-RNDV clear to send: addr, rkey */
	HRM_FIN = 4,   /* Write-RNDV data written / Read-RNDV source released */
	HRM_RTS_R = 5, /* Read-RNDV: the source is addr, rkey, len */
	HRM_NOTE = 6,  /* Direct-(Chained-)Write-Send: data is in the pre-known buffer */
	HRM_RESP = 7   /* RFP: response published for fetching */
};

/* hr_msg.flags */
enum {
	HRM_F_FETCH = 1,   /* request: the client will fetch the response */
	HRM_F_RELEASE = 2  /* FIN: Read-RNDV source may be reused */
};

/* The header in front of every message. On a memory-polled message (an RFP
 * request to a busy-polling server, an RFP response left for fetching:
 * found by reading memory while a WRITE or the server's copy may still be
 * filling it) sum covers the other fields and canary the payload, so a
 * reader racing the writer never accepts a torn message. Every other
 * message is taken only after a completion that proves it landed whole (a
 * SEND's receive completion; a WRITE_WITH_IMM's; a WRITE followed by a
 * SEND on the same RC QP, placed before that SEND completes: IB ordering,
 * ibv_post_send(3)), so its sender leaves sum and canary 0 and its receiver
 * checks neither: computing and checking it was ~25 ns a message each side
 * (HR_EP_WIRE_VERSION 2). */
typedef struct hr_msg {
	uint32_t type;
	uint32_t flags;
	uint64_t len;
	uint64_t seq;
	uint64_t canary; /* memory-polled: payload sum seeded by seq, also the tail; else 0 */
	uint64_t addr;
	uint32_t rkey;
	uint32_t proto;
	uint64_t server_ns; /* response: time the server spent on the request */
	uint64_t sum;       /* memory-polled: hrp_msg_sum, never 0; else 0 */
} hr_msg;

_Static_assert(sizeof(hr_msg) <= HR_MSG_HDR, "header too large");

/* A registered region owned by the endpoint. */
typedef struct hr_region {
	uint8_t *p;
	uint64_t cap;
	hr_mr *mr;
	uint32_t access;
	/* The staging buffers (tx, tx2): the id of the last WR gathering from
	 * it (0: none), so a replaced one is freed at once when every WR it
	 * fed is retired, kept as tx_old otherwise. */
	uint64_t last_wr;
} hr_region;

/* A receive completion waiting to be interpreted. */
typedef struct hr_arrival {
	uint32_t slot;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm;
} hr_arrival;

#define HR_EP_CTL_N 64
#define HR_EP_POLL 16

struct hr_ep {
	hr_dev *dev;
	hr_pd *pd;
	hr_chan *ch;
	hr_cq *cq;
	hr_qp *qp;
	hr_ep_cfg cfg;
	hr_ep_desc peer;
	int have_peer;

	hr_region slots;  /* nslots x (HDR + slot_size), receive only */
	hr_region direct; /* pre-known buffer: peers WRITE here */
	hr_region resp;   /* RFP: responses published here, peers READ */
	hr_region ctl;    /* control messages, HR_EP_CTL_N x HDR */
	hr_region tx;     /* staging: HDR + payload + tail; Read-RNDV source */
	hr_region rx;     /* Write-RNDV target, READ destination */
	/* The spare staging buffer (hr_ep_tx_spare; NULL until asked for):
	 * the runtime fills it while a message goes from tx, and a send whose
	 * payload lies in it swaps the two, so two messages in a row go out
	 * without a copy and the fill of one overlaps the send of the other.
	 * C never touches it otherwise. */
	hr_region tx2;
	hr_region tx_old; /* replaced staging, freed once its WRs are retired */
	uint64_t tx_old_at;
	uint32_t slot_stride;
	uint32_t ctl_next;

	/* Send queue accounting for selective signaling: WR ids count posts, a
	 * signaled completion retires every WR up to its id. */
	uint64_t sq_posted;
	uint64_t sq_done;
	uint64_t read_done;
	uint32_t sq_cap;
	uint32_t unsignaled;

	hr_arrival *arr;
	uint32_t arr_head, arr_tail; /* ring of nslots */
	uint32_t repost_slot;        /* taken by next_msg, re-posted by its next call */
	int repost_pending;

	uint64_t seq;      /* client: last call; server: last request */
	int tx_busy;       /* Read-RNDV source not yet released by the peer */
	int pending;       /* server: request received, not yet answered */
	uint32_t pend_flags;
	int pend_rfp;      /* server: the pending request came by RFP */
	int time_arrivals; /* server: stamp every request's arrival (hr_ep_time_arrivals) */
	uint64_t t_req;    /* when the pending request was taken in: RFP ones, or all with time_arrivals */
	/* A timed server wait (time_arrivals) reads the clock while it polls,
	 * off the request's path: t_seen is its last read (0: none since the
	 * wait began or last gave up the CPU), seen_polls the empty polls
	 * since; see recv_wait. */
	int stamp_wait;
	uint64_t t_seen;
	uint32_t seen_polls;
	uint64_t asked[HR_PROTO_COUNT]; /* client: calls made, by the protocol asked for (hr_ep_asked_get) */
	uint64_t deadline; /* of the current operation; 0: deadline_ms from the next clock read */
	uint64_t deadline_ms;
	uint64_t deadline_started; /* server: once a request has started, if set */
	uint32_t gen;
	_Atomic uint32_t cancel_gen;
	_Atomic uint32_t aborted;  /* hr_ep_abort: every wait ends with HR_ECLOSED */
	_Atomic uint64_t spin_ns;  /* event mode: poll this long before blocking */
	uint64_t spin_until;       /* end of the current spin phase, 0: none yet */
	uint64_t spin_yield;       /* the spin's next sched_yield */
	uint32_t empty_polls;      /* fruitless polls since the last completion */
	int slept;                 /* the last hrp_progress waited on the channel */
	/* Spin outcomes per wait (a call's for its reply, a server's for its
	 * next request): see hrp_wait_begin. */
	uint32_t spin_misses; /* consecutive waits that spun and slept anyway */
	uint32_t spin_probe;  /* waits since the last that spun, while skipping */
	uint32_t spin_probe_every; /* a probe every this many waits: 0 is EP_SPIN_PROBE */
	int wait_nospin;      /* this wait blocks at once */
	uint32_t spin_handoff_row; /* consecutive waits that spun and were answered while yielded */
	int skip_handoff;     /* the skipping began with handoffs (1 the peer here, 2 elsewhere), not misses */
	int wait_handoff;     /* answered after a yield that handed the CPU off: 1 maybe to the peer, 2 a row of others */
	int yielded_cpu;      /* the last progress step's yield handed the CPU to another thread */
	int wait_spun;        /* this wait spun: its outcome counts */
	int wait_slept;       /* this wait slept on the channel */
	int broken;
	/* Parking (hr_ep_set_park): park is the runtime's switch; park_here
	 * marks the stretch of a wait that may park (before anything of the
	 * message was taken); parked the exchange it left (EP_PARK_*), its CQ
	 * armed and an event maybe pending; park_ms the slice the runtime may
	 * wait; park_proto a parked call's protocol, for its end. */
	_Atomic uint32_t park;
	int park_here;
	int parked;
	int32_t park_ms;
	int event_slice_ms; /* a sleep's (or park's) longest slice: EP_EVENT_SLICE_MS */
	uint32_t park_proto;

	uint32_t rfp_mode; /* 0 fetch, 1 server-reply */
	uint32_t rfp_over; /* consecutive calls over R */
	hr_ep_stats st;
	/* The handoff rule's peer-CPU state (see EP_SPIN_HANDOFFS), last so
	 * the fields above keep their places. */
	int wait_handed;      /* answered after a yield that handed the CPU to any thread */
	int wait_early;       /* this wait probes early: the peer was seen on another CPU */
	int early_off;        /* an early probe handed off: none until the next regular probe */
	uint32_t spin_away_row; /* waits in a row handed off with the peer elsewhere */
	uint64_t moved_ns;      /* when hrp_move_away last moved this thread */
	/* Spin accounting (hr_ep_spun_ns): spun_ns is the time this
	 * endpoint's waits spent polling, its one writer the exchange;
	 * polls_credited the empty polls of this wait already in it,
	 * spin_clock the spin's last clock read whose segment since is clean
	 * (0: none, or the CPU was handed off since), poll_ps an empty poll's
	 * cost in picoseconds. */
	_Atomic uint64_t spun_ns;
	uint32_t polls_credited;
	uint32_t poll_ps;
	uint64_t spin_clock;
	uint32_t calib_waits; /* spinning waits, for EP_CALIBRATE_EVERY */
};

/* A wait whose spin keeps ending in a sleep anyway (the answer takes
 * longer than the spin the tuner allows: a 128 KiB exchange against a
 * 10 us short spin) pays the spin and the wake-up both. After
 * EP_SPIN_MISSES such waits in a row the endpoint blocks at once, and
 * spins again on one wait in EP_SPIN_PROBE to see whether answers come
 * within the spin again; a wait answered without sleeping ends the
 * skipping. Per endpoint: a lane of large calls does not stop one of
 * small calls from spinning. Inline, a few plain loads and stores a
 * wait: every call passes here. Measured in docs/performance/history.md,
 * "Spins that never catch".
 *
 * EP_SPIN_HANDOFFS waits in a row answered while their spin had yielded
 * the CPU to another thread (the peer's, placed on this CPU: each side
 * spun until its yield before the other could answer, 50-150 us calls
 * while the placement lasts) block the next waits at once, and the
 * probes back off (doubling to EP_SPIN_PROBE_MAX) while they are answered
 * that way too: each is a call that spins until its first yield. One
 * such wait alone is no placement: a thread of this process woken on
 * this CPU, say, and blocking a quiet host's lane for 8 waits cost more
 * slow calls (wake-ups of a halted vCPU) than it saved. A yield to
 * another thread that did not bring the answer says nothing about the
 * peer. history.md, "Spinners on one CPU".
 *
 * Where the provider knows the CPU the peer's thread last noted while it
 * waited (shm: hr_qp_peer_cpu; the engine notes it at a spin's first
 * clock read, at each yield and after a sleep, never on the post path,
 * hrp_progress), a handoff counts toward EP_SPIN_HANDOFFS only when that
 * CPU is this thread's: a 64 KiB stream's 50-100 us waits cross 2-3
 * yields, and any thread at one (a collector, another process) read as
 * the peer blocked a quiet host's stream for the rest of the run. With the
 * peer elsewhere it takes EP_SPIN_HANDOFFS_AWAY waits in a row: a thread
 * that wants this CPU that persistently (a 64 B stream's second thread on
 * this side) is contention the blocking leaves the CPU to. Skipping that
 * handoffs with the peer here began also probes at once at a wait that
 * sees the peer on another CPU (wait_early): a blocking pair's wake-ups
 * place the two on one CPU now and then, so the probes kept handing off
 * and backed off to 1 in 256 after the placement was over. A probe handed
 * off to any thread keeps the skipping, as before; an early one stops
 * early probes until the next regular probe. ibv knows no peer's CPU:
 * there every handoff counts, as before. history.md, "Bulk server streams
 * on shm lanes: the peer's CPU at a handoff". */
#define EP_SPIN_HANDOFFS 2
#define EP_SPIN_HANDOFFS_AWAY 4
#define EP_SPIN_MISSES 4
#define EP_SPIN_PROBE 8
#define EP_SPIN_PROBE_MAX 256

/* The probe period while skipping: spin_probe_every, 0 (a fresh or reset
 * endpoint) being EP_SPIN_PROBE. */
static inline uint32_t hrp_probe_every(const hr_ep *ep)
{
	return ep->spin_probe_every ? ep->spin_probe_every : EP_SPIN_PROBE;
}

/* hr_proto.c: the CPU the peer's thread last noted is not this thread's
 * (0 when unknown). */
int hrp_peer_away(hr_ep *ep);

/* hr_proto_move.c. A wait answered after a spin yield that handed this CPU
 * to the peer's thread (its noted CPU is this one) found the two on one
 * CPU: each spins until its yield before the other can answer, and the
 * blocking the handoff rule turns to then keeps them there (each wakes the
 * other, and the kernel places a wakee by its waker). When another CPU
 * this thread may run on was idle more than half the time since the last
 * look at it (the kernel's cpuidle counters, looked at 2-50 ms apart,
 * process-wide), the thread moves there instead, and the handoff does not
 * count toward blocking. Beside a busy CPU (a hog) nothing moves: there
 * the one free CPU shared is the best place. At most once in 5 ms per
 * endpoint; never where the peer's CPU is unknown (ibv), the thread may
 * run on one CPU only, or the host has no cpuidle counters. A peer that
 * forges its noted CPU (shm: a word of shared memory) can make this thread
 * move within its own mask, to an idle CPU, once in 5 ms at most. Returns
 * 1 when it moved. history.md, "Bulk server streams on shm lanes: moving
 * off the peer's CPU". */
int hrp_move_away(hr_ep *ep);

/* A look: of cpu and the next CPUs of mask (8 at most), the one other
 * than cpu idle most, and more than half the time, since its last look if
 * that was 2-50 ms before now; -1 none. Looks are 2 ms apart or more, the
 * gap doubling to 32 ms after each that compared and found none; a call
 * inside the gap is no look (-1). For tests: hrp_move_source sets where
 * idle times come from (NULL: cpuidle) and forgets every look. */
int hrp_move_target(int cpu, const cpu_set_t *mask, uint64_t now);
void hrp_move_source(int64_t (*idle_us)(int cpu));
/* For tests: the call hrp_move_away sets the thread's affinity with
 * (NULL: sched_setaffinity). */
void hrp_move_affinity(int (*set)(pid_t pid, size_t size, const cpu_set_t *mask));

/* Spin accounting. The tuner decides whether the process's CPU is
 * saturated by its CPU time, which includes its lanes' own spinning: a
 * lane alone on a one-CPU process spins its core full, read as saturated,
 * and blocked every wait (docs/performance/history.md, "A lane process
 * on one CPU blocks its waits"). So each endpoint counts the time its
 * waits polled, for the tuner to leave out (hr_ep_spun_ns). With no
 * clock read on a message's path: a wait's empty polls are credited at
 * poll_ps each where the wait ends, and a spin's clock reads (one in
 * EP_SPIN_CLOCK_EVERY polls, there anyway, and in one wait of
 * EP_CALIBRATE_EVERY one at its first empty poll, before anything can
 * have come) credit the time since the last one and calibrate poll_ps by
 * it. A plain add and store where a wait ends. */
static inline void hrp_spun(hr_ep *ep, uint64_t ns)
{
	atomic_store_explicit(&ep->spun_ns, atomic_load_explicit(&ep->spun_ns, memory_order_relaxed) + ns,
			      memory_order_relaxed);
}

/* Credits this wait's empty polls not yet credited, by count. */
static inline void hrp_polls_credit(hr_ep *ep)
{
	uint32_t n = ep->empty_polls - ep->polls_credited;
	if (n) {
		hrp_spun(ep, (uint64_t)n * ep->poll_ps / 1000);
		ep->polls_credited = ep->empty_polls;
	}
}

/* A wait's polls are over (a completion or a message came). */
static inline void hrp_polls_end(hr_ep *ep)
{
	hrp_polls_credit(ep);
	ep->empty_polls = 0;
	ep->polls_credited = 0;
	ep->spin_clock = 0;
}

static inline void hrp_wait_begin(hr_ep *ep)
{
	ep->spin_clock = 0; /* a wait that failed may have left one */
	ep->wait_slept = 0;
	ep->wait_spun = 0;
	ep->wait_handoff = 0;
	ep->yielded_cpu = 0;
	ep->wait_nospin = ep->spin_misses >= EP_SPIN_MISSES && ++ep->spin_probe % hrp_probe_every(ep) != 0;
	if (ep->spin_misses >= EP_SPIN_MISSES) {
		ep->wait_early = 0;
		if (!ep->wait_nospin)
			ep->early_off = 0;
		/* Skipping that handoffs began probes at once when the peer
		 * is seen on another CPU: see EP_SPIN_HANDOFFS. */
		else if (ep->skip_handoff == 1 && !ep->early_off && hrp_peer_away(ep)) {
			ep->wait_nospin = 0;
			ep->wait_early = 1;
		}
	}
	ep->st.spin_skips += (uint64_t)ep->wait_nospin;
}

static inline void hrp_wait_end(hr_ep *ep)
{
	if (ep->wait_handed) {
		ep->wait_handed = 0;
		if (ep->spin_misses >= EP_SPIN_MISSES && ep->skip_handoff) {
			/* A probe answered after handing off to any thread
			 * keeps the skipping: see EP_SPIN_HANDOFFS. */
			if (!ep->wait_handoff)
				ep->wait_handoff = ep->skip_handoff;
			ep->early_off |= ep->wait_early;
		} else if (!ep->wait_handoff && ++ep->spin_away_row >= EP_SPIN_HANDOFFS_AWAY) {
			ep->wait_handoff = 2;
			ep->spin_handoff_row = EP_SPIN_HANDOFFS - 1;
		}
	} else if (ep->spin_away_row && ep->wait_spun && !ep->wait_slept) {
		ep->spin_away_row = 0;
	}
	if (ep->wait_handoff && ++ep->spin_handoff_row >= EP_SPIN_HANDOFFS) {
		if (ep->spin_misses >= EP_SPIN_MISSES) {
			/* A probe that handed off: probe less often. */
			uint32_t every = hrp_probe_every(ep);
			ep->spin_probe_every = every < EP_SPIN_PROBE_MAX ? every * 2 : every;
		}
		ep->spin_misses = EP_SPIN_MISSES;
		ep->spin_probe = 0;
		ep->skip_handoff = ep->wait_handoff;
	} else if (ep->wait_handoff) {
		/* The first of a row: see EP_SPIN_HANDOFFS. */
	} else if (!ep->wait_slept) {
		if (ep->wait_spun)
			ep->spin_handoff_row = 0;
		/* A skipping wait answered at once ends skipping that began
		 * with misses, not with handoffs: the peer it woke on this
		 * CPU may have answered before it slept. */
		if (ep->spin_misses && (ep->wait_spun || !ep->skip_handoff)) {
			ep->spin_misses = 0;
			ep->spin_probe = 0;
			ep->spin_probe_every = 0;
			ep->skip_handoff = 0;
		}
	} else if (ep->wait_spun && ep->spin_misses < EP_SPIN_MISSES) {
		ep->spin_misses++;
	}
}

/* Counts a message sent by p (see hr_ep_stats.sent): the exchange is its
 * only writer, a relaxed store of the whole count keeps hr_ep_sent_get's
 * readers on other threads from seeing a torn one, at the cost of a plain
 * add and store. */
static inline void hrp_count_sent(hr_ep *ep, uint32_t p)
{
	__atomic_store_n(&ep->st.sent[p], ep->st.sent[p] + 1, __ATOMIC_RELAXED);
}

/* hr_ep.parked: which exchange parked. */
enum { EP_PARK_NONE = 0, EP_PARK_CALL = 1, EP_PARK_RECV = 2 };

/* hr_proto.c */
int hrp_fail(hr_ep *ep, int st);
int hrp_region_ensure(hr_ep *ep, hr_region *r, uint64_t need, uint64_t keep);
int hrp_post(hr_ep *ep, hr_send_wr *wr, uint32_t n);
int hrp_repost(hr_ep *ep, uint32_t slot);
int hrp_progress(hr_ep *ep);
void hrp_unpark(hr_ep *ep);
int hrp_check(hr_ep *ep);
void hrp_wait_seen(hr_ep *ep);
int hrp_check_flags(hr_ep *ep);
uint64_t hrp_deadline(hr_ep *ep, uint64_t now);
int hrp_wait_read(hr_ep *ep, uint64_t wr_id);
uint8_t *hrp_ctl(hr_ep *ep);
uint8_t *hrp_slot(hr_ep *ep, uint32_t slot);
uint64_t hrp_sum(const void *p, uint64_t n, uint64_t seed);
uint64_t hrp_msg_sum(const hr_msg *m);

/* A memory-polled message's payload p (h->len bytes, the tail after it) is
 * whole: the canary is the payload's sum seeded by seq, so a matching tail
 * and sum mean the WRITE (or copy) has fully landed, whatever order it was
 * done in. h's own sum must have matched first. */
static inline int hrp_payload_ok(const hr_msg *h, const uint8_t *p)
{
	uint64_t tail;
	memcpy(&tail, p + h->len, sizeof tail);
	return tail == h->canary && hrp_sum(p, h->len, h->seq) == h->canary;
}

/* hr_proto_msg.c */
int hrp_send_msg(hr_ep *ep, uint32_t proto, const void *p, uint64_t len, uint32_t flags, uint64_t server_ns);
int hrp_recv_msg(hr_ep *ep, int listen_mem, uint64_t want_seq, hr_msg *hdr, uint8_t **payload, uint64_t *len);
int hrp_stage(hr_ep *ep, const void *p, uint64_t len, uint64_t extra);
int hrp_region_in(const hr_region *r, const void *p);

#endif
