package rdma

/*
#include "hr_goglue.h"
*/
import "C"

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Protocol is an RPC protocol of the HatRPC engine (HatRPC §3.1, Fig. 3).
// The names match the `protocol` hint of pkg/hints.
type Protocol uint32

// Protocols; values mirror enum hr_proto.
const (
	ProtoEager            Protocol = C.HR_PROTO_EAGER
	ProtoWriteRNDV        Protocol = C.HR_PROTO_WRITE_RNDV
	ProtoReadRNDV         Protocol = C.HR_PROTO_READ_RNDV
	ProtoDirectWriteSend  Protocol = C.HR_PROTO_DIRECT_WRITE_SEND
	ProtoChainedWriteSend Protocol = C.HR_PROTO_CHAINED_WRITE_SEND
	ProtoDirectWriteIMM   Protocol = C.HR_PROTO_DIRECT_WRITE_IMM
	ProtoRFP              Protocol = C.HR_PROTO_RFP
	ProtoHybrid           Protocol = C.HR_PROTO_HYBRID
	NumProtocols                   = C.HR_PROTO_COUNT // how many there are: Protocol(0) .. Protocol(NumProtocols-1)
)

var protoNames = [...]string{"eager", "write_rndv", "read_rndv", "direct_write_send",
	"chained_write_send", "direct_write_imm", "rfp", "hybrid"}

// Protocols lists every protocol.
func Protocols() []Protocol {
	out := make([]Protocol, NumProtocols)
	for i := range out {
		out[i] = Protocol(i)
	}
	return out
}

func (p Protocol) String() string {
	if int(p) < len(protoNames) {
		return protoNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", uint32(p))
}

// ParseProtocol maps a hint name ("eager", "rfp", ...) to a Protocol.
func ParseProtocol(s string) (Protocol, error) {
	for i, n := range protoNames {
		if n == s {
			return Protocol(i), nil
		}
	}
	return 0, &Error{Op: fmt.Sprintf("parse protocol %q", s), Status: StatusInvalid}
}

// MinFetchSize is the smallest RFP fetch size F: a message header and tail.
const MinFetchSize = C.HR_MSG_HDR + C.HR_MSG_TAIL

// Polling is how an endpoint waits: spinning on its CQ (and, on a server,
// its pre-known buffer) or blocking on the completion channel.
type Polling int

// Polling modes.
const (
	PollBusy Polling = iota
	PollEvent
)

func (p Polling) String() string {
	if p == PollEvent {
		return "event"
	}
	return "busy"
}

// EndpointConfig sizes an RPC endpoint; zero fields take the defaults
// (pkg/hints' defaults where the hint exists).
type EndpointConfig struct {
	SlotSize        int // eager capacity of a receive slot (4 KiB)
	Slots           int // pre-posted receive slots (16)
	DirectSize      int // pre-known buffer for the Direct-* protocols and RFP requests (64 KiB)
	RespSize        int // RFP response buffer (64 KiB)
	EagerThreshold  int // hybrid: eager up to here (4 KiB)
	InlineThreshold int // post inline up to here, header included (128; -1 disables)
	SignalInterval  int // signal one send WR in this many (16)
	MaxSendWR       int // 64
	Polling         Polling
	RFPRetries      int // R (5)
	RFPFetchSize    int // F, header included (256)
	// RFPStayReply keeps an RFP client in server-reply mode once it got
	// there, whatever the server's time (HERD's protocol, emulated).
	RFPStayReply bool
	MaxMessage   int // largest payload either way (64 MiB)
	PoolSize     int // initial rendezvous pool (1 MiB)
	// SpinTime, with PollEvent, polls this long before blocking (adaptive
	// polling); SetSpin changes it later.
	SpinTime time.Duration
}

func (c EndpointConfig) toC() C.hr_ep_cfg {
	or := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	inl := or(c.InlineThreshold, 128)
	if inl < 0 {
		inl = 0
	}
	ev := 0
	if c.Polling == PollEvent {
		ev = 1
	}
	return C.hr_ep_cfg{
		slot_size:        C.uint32_t(or(c.SlotSize, 4<<10)),
		nslots:           C.uint32_t(or(c.Slots, 16)),
		direct_size:      C.uint32_t(or(c.DirectSize, 64<<10)),
		resp_size:        C.uint32_t(or(c.RespSize, 64<<10)),
		eager_threshold:  C.uint32_t(or(c.EagerThreshold, 4<<10)),
		inline_threshold: C.uint32_t(inl),
		signal_interval:  C.uint32_t(or(c.SignalInterval, 16)),
		max_send_wr:      C.uint32_t(or(c.MaxSendWR, 64)),
		event:            C.uint32_t(ev),
		rfp_retries:      C.uint32_t(or(c.RFPRetries, 5)),
		rfp_fetch:        C.uint32_t(or(c.RFPFetchSize, 256)),
		rfp_stay_reply:   C.uint32_t(boolInt(c.RFPStayReply)),
		max_msg:          C.uint64_t(or(c.MaxMessage, 64<<20)),
		pool_size:        C.uint64_t(or(c.PoolSize, 1<<20)),
	}
}

// EndpointStats is what an endpoint did (see hr_ep_stats).
type EndpointStats struct {
	Calls, Served, RNDVFallbacks                      uint64
	RFPFetches, RFPRetries, RFPRestReads, RFPExceeded uint64
	RFPToReply, RFPToFetch, RFPReplyCalls             uint64
	FetchNS                                           uint64
	LastServerNS                                      uint64 // server time of the last server-reply call
	RFPServerReply                                    bool   // currently in server-reply mode
	// SpinSkips counts waits that blocked without the spin the tuner set:
	// the endpoint's last spins all ended in a sleep anyway.
	SpinSkips uint64
	// SpinHandoffs counts spin yields that handed the CPU to another
	// thread (the host had more runnable threads than CPUs); after two
	// waits in a row answered while their yield had handed it over, the
	// next waits block at once (hr_proto_int.h).
	SpinHandoffs uint64
	// SpinMoves counts moves of the waiting thread off the CPU its peer's
	// thread was on, to another CPU idle more than half the time lately
	// (shm; hr_proto_int.h, hrp_move_away).
	SpinMoves uint64
	// SentByProtocol counts the messages this side sent (a client's
	// requests, a server's replies) by the protocol they actually went by:
	// hybrid as eager or write_rndv by size, a message too large for its
	// protocol's buffer as the write_rndv it fell back to, an RFP reply
	// left for the client to fetch as rfp (one in server-reply mode as
	// what hybrid chose). SentByProtocol[ProtoHybrid] stays 0.
	SentByProtocol [NumProtocols]uint64
}

// RPCEndpoint is one side of one RDMA RPC connection: a QP, one CQ and
// registered buffers owned by C. One call (or one request) is in flight at
// a time; every exchange runs in C in one cgo crossing.
type RPCEndpoint struct {
	pd *PD
	p  *C.hr_ep
	qp *QP // wraps the endpoint's QP for bootstrap and counters; not owned

	mu     sync.Mutex // one exchange at a time
	cmu    sync.RWMutex
	closed bool // written under mu and cmu: readable under either
	gen    uint32
	out    *C.hr_ep_out // the C exchange's out-parameters (guarded by mu)
	// The watch on the context of the last exchanges (see run): one
	// context.AfterFunc for as long as the caller keeps passing contexts
	// that end together (the same Done channel: the same context, or
	// values derived from it, as a runtime adds per call), instead of one
	// (and its allocations and the parent's lock) per exchange.
	wmu     sync.Mutex
	wdone   <-chan struct{}
	wstop   func() bool
	watches int           // watches set up (tests)
	cur     atomic.Uint32 // gen of the exchange running or last run

	yielded time.Duration        // last yield to the Go scheduler, on now's clock; 0: none yet (guarded by mu)
	yields  int                  // yields made (tests)
	splits  int                  // replies sent apart from the next wait, for AfterReply (tests)
	now     func() time.Duration // the clock of yieldSometimes (tests replace it)
	// spins: the endpoint polls (busy, or event mode with a spin phase),
	// so its goroutine may go on in C without ever blocking (see
	// yieldSometimes); a pure event endpoint blocks in the kernel instead.
	busy  bool
	spins atomic.Bool
	// spinMu orders SetSpin and BlockWaits: spin is the spin SetSpin
	// asked for last, blocked whether BlockWaits holds it at 0.
	spinMu  sync.Mutex
	spin    time.Duration
	blocked bool

	// Parking (proto_park.go): park is what BlockWaits asks for, pk the
	// parker while waits park, cpark the engine's switch as last set
	// (guarded by mu), parkMs the engine's slice for a parked wait.
	park   atomic.Bool
	pk     atomic.Pointer[parker]
	cpark  bool
	parkMs *C.int32_t
	parks  atomic.Uint64 // waits parked (ParkedWaits)

	arrival *C.uint64_t // when the request in hand was taken in (hr_ep_arrival)
	spun    *C.uint64_t // the time its waits polled (hr_ep_spun_ns)

	sentAtClose  [NumProtocols]uint64 // SentByProtocol once closed (written under cmu)
	callsAtClose [NumProtocols]uint64 // CallsByProtocol once closed (written under cmu)

	// hold is the message of the exchange in C (guarded by mu). The
	// exchange passes it to C as an integer, which cgo neither checks nor
	// treats as a reference; storing it here as a pointer does both jobs
	// of a pointer argument: escape analysis moves the caller's buffer to
	// the heap (heap objects never move, a stack could grow under C's
	// feet), and the collector keeps it while C reads it. The buffers are
	// byte slices, which hold no Go pointers, and C keeps no reference
	// past the exchange (it stages what it sends): the rules a checked
	// pointer argument is held to.
	hold unsafe.Pointer
}

// injectSetupFailure makes the steps-th setup step of the next endpoint
// creation fail (tests only; < 0 disarms).
func injectSetupFailure(steps int) { C.hr_ep_inject_setup_failure(C.int(steps)) }

// NewRPCEndpoint creates an endpoint on pd; connect it with Bootstrap.
func NewRPCEndpoint(pd *PD, cfg EndpointConfig) (*RPCEndpoint, error) {
	c := cfg.toC()
	var p *C.hr_ep
	if err := statusErr("create endpoint", C.int(C.hr_ep_create(pd.dev.p, pd.p, &c, &p))); err != nil {
		return nil, err
	}
	if cfg.SpinTime > 0 {
		C.hr_ep_set_spin(p, C.uint64_t(cfg.SpinTime))
	}
	out := (*C.hr_ep_out)(C.calloc(1, C.sizeof_hr_ep_out))
	if out == nil {
		C.hr_ep_destroy(p)
		return nil, &Error{Op: "create endpoint", Status: StatusNoMem}
	}
	C.hr_ep_leases(p, &out.lv)
	e := &RPCEndpoint{pd: pd, p: p, out: out, qp: &QP{pd: pd, p: C.hr_ep_qp(p), provider: pd.dev.provider},
		now: monoNow, busy: cfg.Polling == PollBusy, arrival: C.hr_ep_arrival(p), spun: C.hr_ep_spun_ns(p), spin: max(cfg.SpinTime, 0),
		parkMs: C.hr_ep_park_ms(p)}
	e.spins.Store(e.busy || cfg.SpinTime > 0)
	return e, nil
}

// Abort makes the exchange in progress, and every later one, fail with
// ErrClosed: for a runtime that learned the peer is gone (its bootstrap
// connection closed) while a call waits in C. Safe from any goroutine.
func (e *RPCEndpoint) Abort() {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	if !e.closed {
		C.hr_ep_abort(e.p)
		e.wakeParked()
	}
}

// descMagic marks the third bootstrap buffer entry, which carries the
// endpoint's parameters rather than a region: "HREP" and, in the low 16
// bits, the engine's wire version (HR_EP_WIRE_VERSION), which both sides
// must share: a message one version sends unchecked the other may reject.
const (
	descMagicHREP = 0x4852_4550_0000
	descMagic     = descMagicHREP | C.HR_EP_WIRE_VERSION
)

// checkDescMagic says whether a peer's third bootstrap entry is an RPC
// endpoint's parameters and of this side's wire version.
func checkDescMagic(m uint64) error {
	if m&^0xffff != descMagicHREP {
		return fmt.Errorf("%w: peer is not an RPC endpoint", ErrBadBootstrap)
	}
	if m != descMagic {
		return fmt.Errorf("%w: peer's engine wire version %d, this side's %d", ErrBootstrapVersion,
			m&0xffff, descMagic&0xffff)
	}
	return nil
}

// Bootstrap exchanges endpoints with the peer over conn (buffers: the
// pre-known buffer, the RFP response buffer, the parameters) and connects.
func (e *RPCEndpoint) Bootstrap(ctx context.Context, conn net.Conn) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		return &Error{Op: "bootstrap endpoint", Status: StatusClosed}
	}
	var d C.hr_ep_desc
	C.hr_ep_local(e.p, &d)
	bufs := []RemoteBuffer{
		{Addr: uint64(d.direct_addr), RKey: uint32(d.direct_rkey), Len: uint64(d.direct_len)},
		{Addr: uint64(d.resp_addr), RKey: uint32(d.resp_rkey), Len: uint64(d.resp_len)},
		{Addr: uint64(d.slot_size)<<32 | uint64(d.nslots), RKey: uint32(d.event), Len: descMagic},
	}
	peer, err := e.qp.Bootstrap(ctx, conn, bufs...)
	if err != nil {
		return err
	}
	b := peer.Buffers
	if len(b) != 3 || b[0].Len > 1<<32-1 || b[1].Len > 1<<32-1 {
		return fmt.Errorf("%w: peer is not an RPC endpoint", ErrBadBootstrap)
	}
	if err := checkDescMagic(b[2].Len); err != nil {
		return err
	}
	pd := C.hr_ep_desc{
		direct_addr: C.uint64_t(b[0].Addr), direct_rkey: C.uint32_t(b[0].RKey), direct_len: C.uint32_t(b[0].Len),
		resp_addr: C.uint64_t(b[1].Addr), resp_rkey: C.uint32_t(b[1].RKey), resp_len: C.uint32_t(b[1].Len),
		slot_size: C.uint32_t(b[2].Addr >> 32), nslots: C.uint32_t(b[2].Addr), event: C.uint32_t(b[2].RKey),
	}
	return statusErr("endpoint peer", C.int(C.hr_ep_set_peer(e.p, &pd)))
}

func (e *RPCEndpoint) isClosed() bool {
	// Close writes closed holding both mu and cmu, and every exchange
	// reads it holding mu: no read lock (two atomic read-modify-writes a
	// crossing, on both sides of a call) needed here. cmu is for the
	// callers that cannot take mu while an exchange runs (Abort, SetSpin,
	// Counters).
	return e.closed
}

// run performs one C exchange under ctx: its deadline becomes the C timeout
// (capped at limit when limit > 0) and cancellation flags the C loop.
func (e *RPCEndpoint) run(ctx context.Context, limit time.Duration, f func(ms C.int, gen C.uint32_t) C.int) C.int {
	ms := -1
	if dl, ok := ctx.Deadline(); ok {
		ms = timeoutMs(time.Until(dl))
	}
	if limit > 0 && (ms < 0 || ms > int(limit/time.Millisecond)) {
		ms = int(limit / time.Millisecond)
	}
	return e.runMs(ctx, ms, f)
}

// timeoutMs is the C timeout for what remains of a deadline: rounded up
// and one more, so C gives up only after ctx has (the caller then reports
// ctx's error).
func timeoutMs(d time.Duration) int {
	return max(int((d+time.Millisecond-1)/time.Millisecond)+1, 0)
}

// runMs is run with the C timeout ms (-1: none) worked out already.
func (e *RPCEndpoint) runMs(ctx context.Context, ms int, f func(ms C.int, gen C.uint32_t) C.int) C.int {
	e.gen++
	if e.gen == 1<<32-1 {
		e.gen = 1
	}
	e.yieldSometimes()
	gen := e.gen
	done := ctx.Done()
	if done == nil {
		return f(C.int(ms), C.uint32_t(gen))
	}
	if done != e.wdone {
		e.watch(ctx, done)
	}
	// The watch cancels the exchange cur names when ctx ends: cur is set
	// before ctx is looked at, and the watch runs after ctx ended, so
	// either it sees this gen or this sees ctx done (and cancels itself).
	// C checks the cancel against its gen throughout, from the start.
	e.cur.Store(gen)
	if ctx.Err() != nil {
		e.cancel(gen)
	}
	return f(C.int(ms), C.uint32_t(gen))
}

// A goroutine that runs exchange after exchange (a lane's poller, a caller
// in a loop) never blocks in Go, so its P keeps one scheduler tick. After
// 10 ms on one tick the runtime's sysmon takes the P away in the middle of
// a C call and, having taken one, drops back to waking every 20 µs (~80 µs
// with the kernel's timer slack) for milliseconds; every wake-up lands on a
// CPU where a poller spins and costs that call ~20-30 µs on a VM (measured:
// 1-3 % of 64 B calls, the whole p99). Yielding to the scheduler every few
// milliseconds gives the P a new tick, so sysmon never retakes it and backs
// off to 10 ms sleeps. The clock is read once every yieldCheck exchanges.
//
// Only a polling endpoint yields: one that blocks in the kernel for its
// completions comes back from C through the scheduler anyway, and there a
// yield is pure cost: many event-mode callers each yielding every 2 ms
// halved the engine's 512 B throughput at 8 and 64 callers (eager and
// Direct-WriteIMM, ~115k → ~55k calls/s in atb).
const (
	yieldCheck = 8
	yieldAfter = 2 * time.Millisecond
)

// yieldSometimes yields once yieldAfter passed since the last yield (e.mu
// held, called once per exchange).
func (e *RPCEndpoint) yieldSometimes() {
	if e.gen%yieldCheck != 0 || !e.spins.Load() {
		return
	}
	now := e.now()
	if now-e.yielded < yieldAfter {
		return
	}
	if e.yielded != 0 {
		e.yields++
		goyield()
	}
	e.yielded = now
}

// monoEpoch is monoNow's zero.
var monoEpoch = time.Now()

// monoNow is the time since monoEpoch, at least 1: one read of the
// monotonic clock, where time.Now reads the wall clock too (on this
// project's VMs ~50 against ~120 ns, once every yieldCheck exchanges).
func monoNow() time.Duration { return max(time.Since(monoEpoch), 1) }

// goyield is runtime.Gosched without its wake-up: the goroutine goes to its
// own P's run queue, not the global one, and no idle thread is woken to
// look for work, so the same thread picks it up again at once with a new
// scheduler tick (all the yield is for). runtime.Gosched wakes an idle
// thread (wakep) on every call; on a host whose CPUs both spin (a poller
// on each side) that thread's run took a poller's CPU for ~6-35 µs, every
// 2 ms on each side: with perf on 64 B echoes, one futex wake-up per yield
// on each side, and the largest share of the calls over 5x p50 that the
// trace could explain (history.md, "The tail traced"). A goroutine locked
// to its thread still hands its P to another thread and back on any yield.
//
//go:linkname goyield runtime.goyield
func goyield()

// watch moves the context watch to ctx, whose Done channel is done (e.mu
// held). A callback of the old watch that is still running finds itself
// stale under wmu and does nothing, so it cannot cancel an exchange of the
// new context.
func (e *RPCEndpoint) watch(ctx context.Context, done <-chan struct{}) {
	e.wmu.Lock()
	if e.wstop != nil {
		e.wstop()
	}
	e.wdone = done
	e.watches++
	e.wstop = context.AfterFunc(ctx, func() {
		e.wmu.Lock()
		defer e.wmu.Unlock()
		if e.wdone == done {
			e.cancel(e.cur.Load())
		}
	})
	e.wmu.Unlock()
}

// cancel flags exchange gen in C, unless the endpoint is gone.
func (e *RPCEndpoint) cancel(gen uint32) {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	if !e.closed {
		C.hr_ep_cancel(e.p, C.uint32_t(gen))
		e.wakeParked()
	}
}

// noProto names an exchange that is not by one protocol (a receive).
const noProto = ^Protocol(0)

// err maps an exchange's status; op and proto name it (the name is built
// only for a failure: a string per call would be an allocation per call).
func (e *RPCEndpoint) err(ctx context.Context, op string, proto Protocol, st C.int) error {
	if st == C.HR_OK {
		return nil
	}
	if proto != noProto {
		op += " " + proto.String()
	}
	if st == C.HR_ETIMEDOUT {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			<-ctx.Done() // the deadline passed; ctx's timer is about to fire
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return statusErr(op, st)
}

func ptrLen(b []byte) (unsafe.Pointer, C.uint64_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(&b[0]), C.uint64_t(len(b))
}

// outAddr is the out-parameters' address for C (C memory: nothing to
// check).
func (e *RPCEndpoint) outAddr() C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(e.out))) }

// epAddr is the endpoint as the per-message crossings take it (C memory,
// as an integer: no cgo pointer check).
func (e *RPCEndpoint) epAddr() C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(e.p))) }

// Call sends req by proto and returns the response: a lease on the
// endpoint's registered memory, valid until the next Call or Close.
// A failed or interrupted call breaks the endpoint (its QP goes to error).
func (e *RPCEndpoint) Call(ctx context.Context, proto Protocol, req []byte) ([]byte, error) {
	return e.call(ctx, proto, req, msFromCtx)
}

// CallWithin is Call for a caller that read ctx's deadline already (to
// send it with the request, say): timeout, what then remained of it (0:
// ctx has none), bounds the exchange in its place, which saves a clock
// read per call. ctx's cancellation and its end still end the exchange.
func (e *RPCEndpoint) CallWithin(ctx context.Context, proto Protocol, req []byte, timeout time.Duration) ([]byte, error) {
	ms := -1
	if timeout > 0 {
		ms = timeoutMs(timeout)
	}
	return e.call(ctx, proto, req, ms)
}

// msFromCtx: call takes its C timeout from ctx's deadline, once it holds
// the endpoint.
const msFromCtx = -2

func (e *RPCEndpoint) call(ctx context.Context, proto Protocol, req []byte, ms int) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		return nil, &Error{Op: "call", Status: StatusClosed}
	}
	if ms == msFromCtx {
		ms = -1
		if dl, ok := ctx.Deadline(); ok {
			ms = timeoutMs(time.Until(dl))
		}
	}
	p, n := ptrLen(req)
	e.hold = p
	st := e.runMs(ctx, ms, func(ms C.int, gen C.uint32_t) C.int {
		if pk := e.parking(); pk != nil {
			pk.kind, pk.proto, pk.n, pk.ms, pk.gen = parkCall, C.uint32_t(proto), n, ms, gen
			return pk.exchange()
		}
		return C.hrgo_call(e.epAddr(), C.uint32_t(proto), C.uintptr_t(uintptr(e.hold)), n, ms, gen, e.outAddr())
	})
	e.hold = nil
	e.parkDone()
	rp, rl := e.out.rp, e.out.rl
	if err := e.err(ctx, "call", proto, st); err != nil {
		return nil, err
	}
	if rl == 0 {
		return []byte{}, nil
	}
	return unsafe.Slice((*byte)(rp), int(rl)), nil
}

// recvSlice bounds one idle server wait, so Stats and Close are not held
// off and ctx is honoured even if the cancel flag is missed.
const recvSlice = 100 * time.Millisecond

// Recv waits for the next request; the slice is a lease valid until Reply.
// The endpoint lock is dropped between wait slices so Stats and Close are
// not held off by an idle server.
func (e *RPCEndpoint) Recv(ctx context.Context) ([]byte, error) {
	for {
		req, idle, err := e.recvSlice(ctx)
		if !idle {
			return req, err
		}
	}
}

func (e *RPCEndpoint) recvSlice(ctx context.Context) ([]byte, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		return nil, false, &Error{Op: "recv", Status: StatusClosed}
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	st := e.run(ctx, 0, func(ms C.int, gen C.uint32_t) C.int {
		if pk := e.parking(); pk != nil {
			pk.kind, pk.idle, pk.ms, pk.gen = parkRecv, C.int(recvSlice/time.Millisecond), ms, gen
			return pk.exchange()
		}
		return C.hrgo_recv(e.epAddr(), C.int(recvSlice/time.Millisecond), ms, gen, e.outAddr())
	})
	e.parkDone()
	rp, rl := e.out.rp, e.out.rl
	if st == C.HR_ETIMEDOUT && C.hr_ep_broken(e.p) == 0 && ctx.Err() == nil {
		return nil, true, nil
	}
	if err := e.err(ctx, "recv", noProto, st); err != nil {
		return nil, false, err
	}
	if rl == 0 {
		return []byte{}, false, nil
	}
	return unsafe.Slice((*byte)(rp), int(rl)), false, nil
}

// Reply answers the pending request by proto. ProtoRFP leaves the response
// for the client to fetch (the client decides: a client in server-reply
// mode gets it by Hybrid).
func (e *RPCEndpoint) Reply(ctx context.Context, proto Protocol, resp []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		return &Error{Op: "reply", Status: StatusClosed}
	}
	p, n := ptrLen(resp)
	e.hold = p
	st := e.run(ctx, 0, func(ms C.int, gen C.uint32_t) C.int {
		return C.hrgo_reply(e.epAddr(), C.uint32_t(proto), C.uintptr_t(uintptr(e.hold)), n, ms, gen, e.outAddr())
	})
	e.hold = nil
	return e.err(ctx, "reply", proto, st)
}

// replyRecv answers the pending request and waits (one idle slice) for the
// next one; idle reports that the reply went out and nothing arrived yet.
func (e *RPCEndpoint) replyRecv(ctx context.Context, proto Protocol, resp []byte) ([]byte, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		return nil, false, &Error{Op: "reply", Status: StatusClosed}
	}
	p, n := ptrLen(resp)
	e.hold = p
	e.out.replied = 0
	st := e.run(ctx, 0, func(ms C.int, gen C.uint32_t) C.int {
		if pk := e.parking(); pk != nil {
			pk.kind, pk.proto, pk.n, pk.idle, pk.ms, pk.gen = parkReplyRecv, C.uint32_t(proto), n,
				C.int(recvSlice/time.Millisecond), ms, gen
			return pk.exchange()
		}
		return C.hrgo_reply_recv(e.epAddr(), C.uint32_t(proto), C.uintptr_t(uintptr(e.hold)), n,
			C.int(recvSlice/time.Millisecond), ms, gen, e.outAddr())
	})
	e.hold = nil
	e.parkDone()
	rp, rl, replied := e.out.rp, e.out.rl, e.out.replied
	if replied == 0 {
		return nil, false, e.err(ctx, "reply", proto, st)
	}
	if st == C.HR_ETIMEDOUT && C.hr_ep_broken(e.p) == 0 && ctx.Err() == nil {
		return nil, true, nil
	}
	if err := e.err(ctx, "recv", noProto, st); err != nil {
		return nil, false, err
	}
	if rl == 0 {
		return []byte{}, false, nil
	}
	return unsafe.Slice((*byte)(rp), int(rl)), false, nil
}

// InExchange reports whether an exchange (a call, or a server's wait for
// a request) runs in C now: what the adaptive poller counts as a lane
// waiting (fastpath.CountWaits). A wait parked in Go (BlockWaits) is not
// in C: it holds no thread. Safe from any goroutine; false once closed.
func (e *RPCEndpoint) InExchange() bool {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	return !e.closed && atomic.LoadUint32((*uint32)(unsafe.Pointer(&e.out.in_c))) != 0
}

// Arrived is when the request in hand (the last one Recv returned or
// ServeCalls handed to its handler) was taken in, on the engine's clock
// (MonotonicNow, CLOCK_MONOTONIC): a server's start of the call without a
// clock read of its own. It is kept for every request once ServeCalls
// ran with TimeArrivals, else only for RFP requests. With TimeArrivals a
// request a polling wait saw carries the wait's last clock read before
// it (at most a few polls earlier, never before the wait began); an RFP
// request, or one seen after the wait armed its channel or yielded, is
// stamped when it is seen. Read it on the serving goroutine, before the
// reply; 0 before the first request timed.
func (e *RPCEndpoint) Arrived() int64 { return int64(*e.arrival) }

// timeArrivals turns on the arrival time of every request (TimeArrivals).
func (e *RPCEndpoint) timeArrivals() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		return &Error{Op: "serve", Status: StatusClosed}
	}
	C.hr_ep_time_arrivals(e.p, 1)
	return nil
}

// MonotonicNow reads the engine's clock (CLOCK_MONOTONIC, ns): what
// Arrived is measured on. One cgo crossing, for calibration, not per call.
func MonotonicNow() int64 { return int64(C.hr_now_ns()) }

// Stats reports what the endpoint did; it waits for an exchange in
// progress. Once closed only SentByProtocol is kept.
func (e *RPCEndpoint) Stats() EndpointStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		return EndpointStats{SentByProtocol: e.sentAtClose}
	}
	var s C.hr_ep_stats
	C.hr_ep_stats_get(e.p, &s)
	st := EndpointStats{
		Calls: uint64(s.calls), Served: uint64(s.served), RNDVFallbacks: uint64(s.rndv_fallbacks),
		RFPFetches: uint64(s.rfp_fetches), RFPRetries: uint64(s.rfp_retries), RFPRestReads: uint64(s.rfp_rest_reads),
		RFPExceeded: uint64(s.rfp_exceeded), RFPToReply: uint64(s.rfp_to_reply), RFPToFetch: uint64(s.rfp_to_fetch),
		RFPReplyCalls: uint64(s.rfp_reply_calls), FetchNS: uint64(s.fetch_ns), LastServerNS: uint64(s.last_server_ns), RFPServerReply: s.rfp_mode != 0,
		SpinSkips: uint64(s.spin_skips), SpinHandoffs: uint64(s.spin_handoffs),
		SpinMoves: uint64(s.spin_moves),
	}
	for i := range st.SentByProtocol {
		st.SentByProtocol[i] = uint64(s.sent[i])
	}
	return st
}

// SentByProtocol is Stats().SentByProtocol without waiting for the
// exchange in progress (Stats does): for a runtime's metrics, read from any
// goroutine at any time. After Close it is the endpoint's final count.
func (e *RPCEndpoint) SentByProtocol() [NumProtocols]uint64 {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	if e.closed {
		return e.sentAtClose
	}
	var out [NumProtocols]uint64
	C.hr_ep_sent_get(e.p, (*C.uint64_t)(unsafe.Pointer(&out[0])))
	return out
}

// CallsByProtocol counts the calls made (Call, CallWithin), by the
// protocol each asked for (SentByProtocol has the one it went by); read as
// SentByProtocol, from any goroutine at any time, the final count after
// Close. A caller that owns an endpoint counts its calls here without an
// atomic add of its own.
func (e *RPCEndpoint) CallsByProtocol() [NumProtocols]uint64 {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	if e.closed {
		return e.callsAtClose
	}
	var out [NumProtocols]uint64
	C.hr_ep_asked_get(e.p, (*C.uint64_t)(unsafe.Pointer(&out[0])))
	return out
}

// Counters are the endpoint QP's verbs counters; safe while an exchange
// runs (the provider keeps them under its own lock).
func (e *RPCEndpoint) Counters() (Counters, error) {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	if e.closed {
		return Counters{}, &Error{Op: "endpoint counters", Status: StatusClosed}
	}
	return e.qp.Counters()
}

// Close destroys the endpoint; a Call or Recv in progress is interrupted
// first by the caller's context.
func (e *RPCEndpoint) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cmu.Lock()
	if e.closed {
		e.cmu.Unlock()
		return &Error{Op: "close endpoint", Status: StatusClosed}
	}
	e.closed = true
	C.hr_ep_sent_get(e.p, (*C.uint64_t)(unsafe.Pointer(&e.sentAtClose[0])))
	C.hr_ep_asked_get(e.p, (*C.uint64_t)(unsafe.Pointer(&e.callsAtClose[0])))
	e.closeParker()
	C.hr_ep_destroy(e.p)
	C.free(unsafe.Pointer(e.out))
	e.cmu.Unlock()
	// After cmu: a watch callback holds wmu while it waits for cmu.
	e.wmu.Lock()
	if e.wstop != nil {
		e.wstop() // the context must not keep a closed endpoint reachable
		e.wdone, e.wstop = nil, nil
	}
	e.wmu.Unlock()
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
