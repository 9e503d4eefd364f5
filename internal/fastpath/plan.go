package fastpath

import (
	"fmt"
	"runtime"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Side is one side's plan for one function on a lane: the protocol of the
// messages it sends (by size) and how its endpoint is built.
type Side struct {
	Tiny, Small, Large rdma.Protocol
	TinyMax            int // messages up to this are Tiny (shm: hints.ShmTinyMessage)
	Threshold          int // messages above this are Large
	Polling            hints.Polling
	Config             rdma.EndpointConfig
	QPSharing          bool // the plan shares QPs among callers (FLOCK)
}

// Protocol picks the protocol for an n-byte message.
func (s *Side) Protocol(n int) rdma.Protocol {
	switch {
	case n > s.Threshold:
		return s.Large
	case n <= s.TinyMax:
		return s.Tiny
	}
	return s.Small
}

// OnTransport is set planned for lanes of transport tr: a set that leaves
// the transport to the runtime (auto) takes the lane's, so the planner can
// use its shared-memory design space on shm.
func OnTransport(set hints.Set, tr hints.Transport) hints.Set {
	if set.Transport == hints.TransportAuto {
		set.Transport = tr
	}
	return set
}

// Spin is the spin phase an endpoint of this side starts with: busy polls
// until the message comes, event blocks at once, adaptive starts spinning
// and lets the tuner decide.
func (s *Side) Spin() time.Duration {
	switch s.Polling {
	case hints.PollBusy:
		return BusySpin
	case hints.PollAdaptive:
		return AdaptiveSpin
	}
	return 0
}

// BusySpin is the spin phase of a busy-polling lane: far longer than any
// gap between calls of a busy caller, so it does not block while calls
// come, yet an idle lane stops burning a core 20 ms after its last one.
const BusySpin = 20 * time.Millisecond

// AdaptiveSpin is the spin phase the tuner gives adaptive lanes while the
// CPU has room: a few round trips long, so a quick answer costs no wakeup.
const AdaptiveSpin = 100 * time.Microsecond

// MaxMessage is the largest request or response a lane carries: the
// default 64 MiB message limit plus room for the frame header (the
// runtime's own limit still applies to the Thrift message).
const MaxMessage = 64<<20 + 4<<10

// PlanSide turns a resolved hint set into a lane side. Protocols follow the
// planner (pkg/hints.PlanFor) for a small and a large message; the hybrid
// hint keeps the engine's own size switch. Every endpoint is built in event
// mode and spins per its polling hint, so the tuner can move it later and
// peers always get a completion for RFP requests (see docs/design/lanes.md).
//
// The pre-known (direct) buffer receives the peer's messages and the RFP
// response buffer holds this side's, so each is sized from the declared
// payload_size of the side that writes it (at least 64 KiB, at most
// bufferCap): a planned message then never falls back to rendezvous.
func PlanSide(set hints.Set, peerPayload, maxMsg int) Side {
	cores := runtime.NumCPU()
	tiny := hints.PlanFor(set, cores, 1)
	small := hints.PlanFor(set, cores, min(hints.ShmTinyMessage+1, tiny.EagerThreshold))
	large := hints.PlanFor(set, cores, small.EagerThreshold+1)
	sd := Side{
		Tiny:      engineProto(set.Protocol, tiny.Protocol),
		Small:     engineProto(set.Protocol, small.Protocol),
		Large:     engineProto(set.Protocol, large.Protocol),
		TinyMax:   min(hints.ShmTinyMessage, small.EagerThreshold),
		Threshold: small.EagerThreshold,
		Polling:   small.Polling,
		QPSharing: small.QPSharing,
	}
	if maxMsg <= 0 || maxMsg > MaxMessage {
		maxMsg = MaxMessage
	}
	inline := small.InlineThreshold
	if inline == 0 {
		inline = -1
	}
	sig := small.SignalInterval
	sd.Config = rdma.EndpointConfig{
		SlotSize:        small.EagerThreshold,
		Slots:           16,
		DirectSize:      bufferFor(peerPayload),
		RespSize:        bufferFor(set.PayloadSize),
		EagerThreshold:  small.EagerThreshold,
		InlineThreshold: inline,
		SignalInterval:  sig,
		MaxSendWR:       max(64, 2*sig),
		Polling:         rdma.PollEvent,
		RFPRetries:      small.RFPRetries,
		RFPFetchSize:    max(small.RFPFetchSize, rdma.MinFetchSize),
		MaxMessage:      maxMsg,
		PoolSize:        256 << 10,
		SpinTime:        sd.Spin(),
	}
	return sd
}

// Sized returns the side with its pre-known buffer grown to receive
// messages of recv bytes and its RFP response buffer grown to publish
// messages of publish bytes (both capped like the declared sizes): what the
// client tells at attach about the sizes it declared or has seen.
func (s Side) Sized(recv, publish int) Side {
	s.Config.DirectSize = max(s.Config.DirectSize, bufferFor(recv))
	s.Config.RespSize = max(s.Config.RespSize, bufferFor(publish))
	return s
}

// bufferCap bounds the registered buffers of one lane: beyond it a message
// goes by rendezvous over the pools, which costs one round trip more.
const bufferCap = 4 << 20

// frameRoom covers the runtime's frame and Thrift message headers around a
// declared payload.
const frameRoom = 1 << 10

func bufferFor(payload int) int {
	return min(max(payload+frameRoom, 64<<10), bufferCap)
}

func engineProto(hint hints.Protocol, planned hints.Protocol) rdma.Protocol {
	if hint == hints.ProtoHybrid {
		return rdma.ProtoHybrid
	}
	p, err := rdma.ParseProtocol(planned.String())
	if err != nil {
		return rdma.ProtoHybrid // the planner never returns auto; hybrid is safe for any size
	}
	return p
}

// PlanError is a client plan the server cannot serve; it names the
// function, and matches ErrPlanConflict.
type PlanError struct {
	Function string
	Reason   string
}

// ErrPlanConflict matches every PlanError.
var ErrPlanConflict = fmt.Errorf("fastpath: client and server plans conflict")

func (e *PlanError) Error() string {
	return fmt.Sprintf("function %s: %s", e.Function, e.Reason)
}

// Is makes errors.Is(err, ErrPlanConflict) true.
func (e *PlanError) Is(target error) bool { return target == ErrPlanConflict }

// CheckPair reports whether a client that asks for a lane of transport
// lane, with its own transport and protocol hints for fn, can work with the
// server's hints for fn. The engine accepts any pair of protocols (each
// side picks its own, and an RFP server answers a client that does not
// fetch by sending), so what can conflict is where the function runs.
func CheckPair(fn string, lane hints.Transport, clientTransport hints.Transport, server hints.Set) error {
	switch {
	case server.Transport == hints.TransportTCP:
		return &PlanError{fn, fmt.Sprintf("the client asks for a %s lane but the server pins the function to transport=tcp", lane)}
	case server.Transport != hints.TransportAuto && server.Transport != lane:
		return &PlanError{fn, fmt.Sprintf("the client asks for a %s lane but the server pins the function to transport=%s", lane, server.Transport)}
	case clientTransport == hints.TransportTCP:
		return &PlanError{fn, "the client pins the function to transport=tcp, yet asked for a lane"}
	case clientTransport != hints.TransportAuto && clientTransport != lane:
		return &PlanError{fn, fmt.Sprintf("the client pins transport=%s but the lane is %s", clientTransport, lane)}
	}
	return nil
}

// FlockFunction is the attach name that asks for the process's shared
// FLOCK handle (qp_sharing) instead of a lane of one function.
const FlockFunction = "__flock"

// FLOCK sizing: the largest request or response frame that travels over a
// shared handle, and the ring each QP receives into. Functions planned
// with qp_sharing whose declared payloads exceed FlockMaxMessage use
// lanes of their own.
const (
	FlockMaxMessage = 60 << 10
	FlockRing       = 512 << 10
)
