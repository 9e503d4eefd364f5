/* hr_proto.h - the HatRPC engine: RPC protocols as C state machines over the
 * provider table (hr.h).
 *
 * An endpoint (hr_ep) is one side of one connection: its own QP, one CQ
 * shared by send and receive (so one wait covers both, in busy and in event
 * mode), and registered buffers allocated through the provider. A call runs
 * its whole exchange in C: the client crosses cgo once per call
 * (hr_ep_call), the server once per request (hr_ep_recv, hr_ep_reply).
 *
 * One call is outstanding per endpoint at a time (synchronous RPC): that is
 * what lets a side receive into one pre-known buffer and lets leases stay
 * valid until the next call without any overwrite protection.
 */
#ifndef HR_PROTO_H
#define HR_PROTO_H

#include "hr.h"

/* Protocol numbers; values are part of the Go contract (proto_endpoint.go). */
enum hr_proto {
	HR_PROTO_EAGER = 0,              /* SEND into a pre-posted slot */
	HR_PROTO_WRITE_RNDV = 1,         /* RTS, CTS, WRITE, FIN */
	HR_PROTO_READ_RNDV = 2,          /* RTS with the source, READ, FIN */
	HR_PROTO_DIRECT_WRITE_SEND = 3,  /* WRITE to the pre-known buffer, then SEND */
	HR_PROTO_CHAINED_WRITE_SEND = 4, /* the same, both in one post */
	HR_PROTO_DIRECT_WRITE_IMM = 5,   /* one WRITE_WITH_IMM */
	HR_PROTO_RFP = 6,                /* remote fetching (client READs) */
	HR_PROTO_HYBRID = 7,             /* eager below the threshold, else Write-RNDV */
	HR_PROTO_COUNT
};

/* What the message headers mean, exchanged at bootstrap (proto_endpoint.go's
 * descMagic): endpoints of different versions refuse each other. 2: only
 * memory-polled messages carry sums (hr_proto_int.h, hr_msg). */
#define HR_EP_WIRE_VERSION 2

/* Bytes in front of every message in a slot, in the pre-known buffer and in
 * the RFP response buffer; memory-polled messages add an 8-byte tail canary. */
#define HR_MSG_HDR 64
#define HR_MSG_TAIL 8

typedef struct hr_ep_cfg {
	uint32_t slot_size;        /* receive slot payload capacity (eager) */
	uint32_t nslots;           /* pre-posted receive slots */
	uint32_t direct_size;      /* pre-known buffer payload capacity */
	uint32_t resp_size;        /* RFP response buffer payload capacity */
	uint32_t eager_threshold;  /* hybrid: eager up to here */
	uint32_t inline_threshold; /* post inline up to here (whole WR) */
	uint32_t signal_interval;  /* signal one in this many send WRs */
	uint32_t max_send_wr;
	uint32_t event;            /* 1: block on the completion channel */
	uint32_t rfp_retries;      /* R */
	uint32_t rfp_fetch;        /* F: first READ size, header included */
	uint32_t rfp_stay_reply;   /* 1: once in server-reply mode, stay there */
	uint64_t max_msg;          /* largest payload either way */
	uint64_t pool_size;        /* initial rendezvous pool size */
} hr_ep_cfg;

/* What the peer needs: exchanged at bootstrap next to the QP attributes. */
typedef struct hr_ep_desc {
	uint64_t direct_addr;
	uint64_t resp_addr;
	uint32_t direct_rkey;
	uint32_t direct_len; /* payload capacity */
	uint32_t resp_rkey;
	uint32_t resp_len;   /* payload capacity */
	uint32_t slot_size;
	uint32_t nslots;
	uint32_t event;
	uint32_t pad_;
} hr_ep_desc;

/* What the endpoint did, for tests and the planner's feedback. */
typedef struct hr_ep_stats {
	uint64_t calls;          /* client calls completed */
	uint64_t served;         /* server responses sent */
	uint64_t rndv_fallbacks; /* messages sent by rendezvous because too large */
	uint64_t rfp_fetches;    /* first READs of F bytes, retries included */
	uint64_t rfp_retries;    /* first READs that found no response */
	uint64_t rfp_rest_reads; /* READs of the part beyond F */
	uint64_t rfp_exceeded;   /* calls that needed more than R retries */
	uint64_t rfp_to_reply;   /* switches to server-reply */
	uint64_t rfp_to_fetch;   /* switches back to fetching */
	uint64_t rfp_reply_calls;/* calls made in server-reply mode */
	uint64_t fetch_ns;       /* moving average of one fetch READ */
	uint64_t last_server_ns; /* server time of the last server-reply call */
	uint64_t spin_skips;     /* waits that blocked at once: their spins kept missing */
	uint64_t spin_handoffs;  /* spin yields that handed the CPU to another thread */
	uint64_t spin_moves;     /* moves off the peer's CPU to an idle one (hrp_move_away) */
	uint32_t rfp_mode;       /* 0 fetch, 1 server-reply */
	uint32_t pad_;
	/* Messages this side sent (requests, replies), by the protocol they
	 * went by once the size switch resolved: hybrid counts as eager or
	 * write_rndv, a fallback as the rendezvous it became, an RFP reply
	 * left for fetching as rfp. One increment on the send path. */
	uint64_t sent[HR_PROTO_COUNT];
} hr_ep_stats;

typedef struct hr_ep hr_ep;

/* Creates the QP (left in INIT), CQ, channel and buffers, and pre-posts the
 * receive slots. The QP is connected by the caller (hr_ep_qp) after the
 * descriptors are exchanged. */
int hr_ep_create(hr_dev *dev, hr_pd *pd, const hr_ep_cfg *cfg, hr_ep **out);
/* Test hook: the steps-th setup step of the next hr_ep_create calls fails
 * with HR_ENOMEM (0 = the first step); < 0 disarms it. */
void hr_ep_inject_setup_failure(int steps);
void hr_ep_destroy(hr_ep *ep);
hr_qp *hr_ep_qp(hr_ep *ep);
void hr_ep_local(hr_ep *ep, hr_ep_desc *out);
int hr_ep_set_peer(hr_ep *ep, const hr_ep_desc *peer);

/* A lease on the send staging buffer for n payload bytes; passing it back as
 * a call's or reply's payload avoids the copy. NULL if n is too large. */
void *hr_ep_tx(hr_ep *ep, uint64_t n);

/* A lease on the spare staging buffer for n payload bytes (allocated at the
 * first call, sized for that n; NULL if n does not fit it). A message sent
 * from it (a call's or reply's payload inside it) swaps it with the staging
 * buffer, which becomes the spare: so the runtime fills the next message
 * while this one goes out, and neither is copied. C never reads or writes
 * the spare otherwise, so another thread may fill it while an exchange
 * runs. The spare's last message has always landed (the peer answered it
 * before the exchange after it began), so it may be overwritten at once. */
void *hr_ep_tx_spare(hr_ep *ep, uint64_t n);

/* The leases hr_ep_tx and hr_ep_reply_buf would give now without growing
 * any buffer: a runtime that keeps this, refreshed after each exchange and
 * each of those calls (the only times it changes), hands out leases that
 * fit without a crossing per message. */
typedef struct hr_ep_lease_view {
	void *tx;           /* hr_ep_tx's lease (NULL before the buffer exists) */
	uint64_t tx_room;   /* hr_ep_tx(n) is tx for n <= tx_room; 0 while the peer holds the buffer */
	void *resp;         /* hr_ep_reply_buf's lease when the pending request's client fetches */
	uint64_t resp_room; /* hr_ep_reply_buf(n) is resp for n <= resp_room, else hr_ep_tx(n) */
	uint32_t pending;   /* a request awaits its reply: hr_ep_reply_buf is NULL without one */
	uint32_t pad_;
	void *spare;        /* hr_ep_tx_spare's lease (NULL before the spare exists) */
	uint64_t spare_room;/* hr_ep_tx_spare(n) is spare for n <= spare_room */
} hr_ep_lease_view;
void hr_ep_leases(hr_ep *ep, hr_ep_lease_view *out);

/* Client: sends req by proto, waits for the response. *resp points into the
 * endpoint's memory until the next call. gen identifies the call for
 * hr_ep_cancel; timeout_ms < 0 waits forever. A positive timeout counts
 * from the call's first look at the clock once it waits (a few µs in, at
 * most), not from its entry: a call that is answered at once reads no
 * clock at all. */
int hr_ep_call(hr_ep *ep, uint32_t proto, const void *req, uint64_t len, int timeout_ms,
	       uint32_t gen, void **resp, uint64_t *resp_len);

/* Server: waits up to idle_ms for the next request to start (HR_ETIMEDOUT
 * with nothing started is benign), then up to timeout_ms in all for it to
 * complete (a rendezvous); *req stays valid until hr_ep_reply. */
int hr_ep_recv(hr_ep *ep, int idle_ms, int timeout_ms, uint32_t gen, void **req, uint64_t *len);
/* Server: answers the pending request by proto. HR_PROTO_RFP leaves the
 * response for the client to fetch when the client fetches, and replies by
 * Hybrid when the client has switched to server-reply. */
int hr_ep_reply(hr_ep *ep, uint32_t proto, const void *resp, uint64_t len, int timeout_ms, uint32_t gen);
/* Server, one crossing per request: hr_ep_reply, then hr_ep_recv of the
 * next request. *replied tells whether the reply went out (a failure after
 * that is the receive's: HR_ETIMEDOUT with the endpoint intact is idle). */
int hr_ep_reply_recv(hr_ep *ep, uint32_t proto, const void *resp, uint64_t len, int idle_ms, int timeout_ms,
		     uint32_t gen, int *replied, void **req, uint64_t *req_len);
/* A lease to fill with the pending request's response (n bytes) so that
 * hr_ep_reply needs no copy; NULL if none fits. */
void *hr_ep_reply_buf(hr_ep *ep, uint64_t n);

/* Makes the call or wait identified by gen return HR_ETIMEDOUT soon; safe
 * from any thread while the endpoint exists. */
void hr_ep_cancel(hr_ep *ep, uint32_t gen);
/* Ends every current and later wait with HR_ECLOSED (breaking the endpoint
 * if an exchange was under way): the runtime calls it when the peer is known
 * to be gone. Safe from any thread while the endpoint exists. */
void hr_ep_abort(hr_ep *ep);
/* Event mode: poll for ns before arming the CQ and blocking (0: block at
 * once). The adaptive poller moves this with the CPU load; any thread. */
void hr_ep_set_spin(hr_ep *ep, uint64_t ns);
/* Parking (event mode): with park on, a long wait that would sleep on the
 * completion channel (a call's wait for its reply, a server's wait for its
 * next request, before any of the message has arrived) returns
 * HR_EP_PARKED instead, its CQ armed and re-polled (no completion missed
 * between the poll and the arm), so the runtime waits for the channel's fd
 * (hr_ep_fd) to turn readable without holding a thread, then calls
 * hr_ep_call_resume or hr_ep_recv_resume, which take the event in (get and
 * ack, as ibv asks) and go on with the same exchange: same gen, deadline
 * and spin state. *hr_ep_park_ms is how long the runtime may wait before
 * it resumes anyway (the wait's slice: cancel, abort and deadline are
 * looked at on resuming). Any thread sets park; it takes effect at the
 * next wait. A parked call must be resumed (it fails there if cancelled);
 * a parked receive may also be left, its endpoint intact. */
#define HR_EP_PARKED 1000
void hr_ep_set_park(hr_ep *ep, int on);
/* The completion channel's fd; -1 for a busy-polling endpoint. */
int hr_ep_fd(hr_ep *ep);
const int32_t *hr_ep_park_ms(hr_ep *ep);
int hr_ep_call_resume(hr_ep *ep, void **resp, uint64_t *resp_len);
int hr_ep_recv_resume(hr_ep *ep, void **req, uint64_t *len);
/* Test hook: the longest slice of an event wait, in C or parked (ms; <= 0:
 * the default, 50 ms), so a test can tell a wake-up from a slice's end. */
void hr_ep_set_event_slice(hr_ep *ep, int ms);
/* Where the endpoint keeps when the pending request was taken in
 * (CLOCK_MONOTONIC ns, set by hr_ep_recv and hr_ep_reply_recv once
 * hr_ep_time_arrivals turned it on): valid for the endpoint's life, read
 * by its server between exchanges, so a runtime gets the arrival time
 * without a crossing or a clock read of its own. */
const uint64_t *hr_ep_arrival(hr_ep *ep);
/* Server: stamp each request's arrival (a clock read, ~25 ns on a VM, on
 * the way from the request to its handler) for hr_ep_arrival. Off, only
 * RFP requests are stamped (their reply carries the server's time). Set
 * on the serving thread between exchanges. */
void hr_ep_time_arrivals(hr_ep *ep, int on);
/* The time the endpoint's waits have spent polling since it was created
 * (a busy wait's polls, a spin phase's), in ns: a count its exchange
 * stores whole, for a tuner on any thread to read (relaxed) while the
 * endpoint exists. Estimated, with no clock read on a message's path: a
 * wait's empty polls at a calibrated cost each, a long spin's time by the
 * clock reads it makes anyway. */
const uint64_t *hr_ep_spun_ns(hr_ep *ep);
void hr_ep_stats_get(hr_ep *ep, hr_ep_stats *out);
/* Copies st.sent (HR_PROTO_COUNT counters); safe from any thread while the
 * endpoint exists, an exchange running or not: the one writer stores each
 * count whole, so a scrape never waits for an exchange. */
void hr_ep_sent_get(hr_ep *ep, uint64_t *out);
/* Copies the calls made, by the protocol each asked for (HR_PROTO_COUNT
 * counters; the one sent by is in hr_ep_sent_get); safe from any thread
 * as hr_ep_sent_get. The runtime's per-protocol request count, kept here
 * by the call's one writer instead of by an atomic add in Go. */
void hr_ep_asked_get(hr_ep *ep, uint64_t *out);
/* HR_OK, or the status that broke the endpoint (its QP is then in error). */
int hr_ep_broken(hr_ep *ep);

#endif
