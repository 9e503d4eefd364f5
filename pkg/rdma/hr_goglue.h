/* hr_goglue.h - the Go side's crossings into the engine (cgo preambles of
 * proto_endpoint.go and proto_park.go): static inline, so each file's C has its
 * own copy. */
#ifndef HR_GOGLUE_H
#define HR_GOGLUE_H

#include <stdlib.h>
#include "hr_proto.h"

// An exchange's out-parameters, in C memory: Go locals passed to C by
// pointer escape to the heap (allocations per call), and Go memory
// holding pointers may not be handed to C at all.
// in_c is set while an exchange runs in C: the adaptive poller counts the
// lanes waiting from it every tick (RPCEndpoint.InExchange), which costs
// the exchange two plain stores instead of two locked updates of a shared
// count in Go. lv is the endpoint's leases as every crossing here left
// them (hr_ep_leases): RequestBuffer and ReplyBuffer lend from it without
// a crossing of their own (two a round trip, ~60 ns each, were on the
// path of every caller that builds its message in place).
typedef struct { void *rp; uint64_t rl; int replied; uint32_t in_c; hr_ep_lease_view lv; } hr_ep_out;

static inline void hrgo_in_c(hr_ep_out *o, uint32_t v) { __atomic_store_n(&o->in_c, v, __ATOMIC_RELAXED); }

// The end of every crossing that may change the leases: the exchange is
// over, so in_c goes 0 after the view is current.
static inline void hrgo_out_c(hr_ep_out *o, uintptr_t ep)
{
	hr_ep_leases((hr_ep *)ep, &o->lv);
	hrgo_in_c(o, 0);
}

// The per-message crossings take the endpoint, the message and the
// out-parameters as integers: cgo checks every pointer argument (is it Go
// memory, and does what it points at hold Go pointers?), and those checks
// were ~70 ns of each crossing here, two crossings a lane call (see
// RPCEndpoint.hold). The endpoint is C memory, but cgo cannot know that:
// its check was still one call of runtime.cgoCheckPointer a crossing.
static inline int hrgo_call(uintptr_t ep, uint32_t proto, uintptr_t req, uint64_t len, int timeout_ms, uint32_t gen,
		     uintptr_t out)
{
	hr_ep_out *o = (hr_ep_out *)out;
	hrgo_in_c(o, 1);
	int st = hr_ep_call((hr_ep *)ep, proto, (const void *)req, len, timeout_ms, gen, &o->rp, &o->rl);
	hrgo_out_c(o, ep);
	return st;
}

static inline int hrgo_reply_recv(uintptr_t ep, uint32_t proto, uintptr_t resp, uint64_t len, int idle_ms, int timeout_ms,
			   uint32_t gen, uintptr_t out)
{
	hr_ep_out *o = (hr_ep_out *)out;
	hrgo_in_c(o, 1);
	int st = hr_ep_reply_recv((hr_ep *)ep, proto, (const void *)resp, len, idle_ms, timeout_ms, gen,
				  &o->replied, &o->rp, &o->rl);
	hrgo_out_c(o, ep);
	return st;
}

static inline int hrgo_reply(uintptr_t ep, uint32_t proto, uintptr_t resp, uint64_t len, int timeout_ms, uint32_t gen,
			     uintptr_t out)
{
	int st = hr_ep_reply((hr_ep *)ep, proto, (const void *)resp, len, timeout_ms, gen);
	hr_ep_leases((hr_ep *)ep, &((hr_ep_out *)out)->lv);
	return st;
}

// The leases that did not fit the view: they may grow the staging buffer.
static inline void *hrgo_tx(uintptr_t ep, uint64_t n, uintptr_t out)
{
	void *p = hr_ep_tx((hr_ep *)ep, n);
	hr_ep_leases((hr_ep *)ep, &((hr_ep_out *)out)->lv);
	return p;
}

static inline void *hrgo_tx_spare(uintptr_t ep, uint64_t n, uintptr_t out)
{
	void *p = hr_ep_tx_spare((hr_ep *)ep, n);
	hr_ep_leases((hr_ep *)ep, &((hr_ep_out *)out)->lv);
	return p;
}

static inline void *hrgo_reply_buf(uintptr_t ep, uint64_t n, uintptr_t out)
{
	void *p = hr_ep_reply_buf((hr_ep *)ep, n);
	hr_ep_leases((hr_ep *)ep, &((hr_ep_out *)out)->lv);
	return p;
}

static inline int hrgo_recv(uintptr_t ep, int idle_ms, int timeout_ms, uint32_t gen, uintptr_t out)
{
	hr_ep_out *o = (hr_ep_out *)out;
	hrgo_in_c(o, 1);
	int st = hr_ep_recv((hr_ep *)ep, idle_ms, timeout_ms, gen, &o->rp, &o->rl);
	hrgo_out_c(o, ep);
	return st;
}

// The resumes of a parked exchange (hr_ep_set_park): a call's wait for its
// reply, a server's wait for its next request.
static inline int hrgo_call_resume(uintptr_t ep, uintptr_t out)
{
	hr_ep_out *o = (hr_ep_out *)out;
	hrgo_in_c(o, 1);
	int st = hr_ep_call_resume((hr_ep *)ep, &o->rp, &o->rl);
	hrgo_out_c(o, ep);
	return st;
}

static inline int hrgo_recv_resume(uintptr_t ep, uintptr_t out)
{
	hr_ep_out *o = (hr_ep_out *)out;
	hrgo_in_c(o, 1);
	int st = hr_ep_recv_resume((hr_ep *)ep, &o->rp, &o->rl);
	hrgo_out_c(o, ep);
	return st;
}

#endif
