//go:build cgo && linux

package fastpath

import (
	"runtime"
	"time"

	"github.com/hatrpc/hatrpc/pkg/flock"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Side is one side's plan for one function on a lane: the protocol of the
// messages it sends (by size) and how its endpoint is built.
type Side struct {
	Tiny, Small, Large rdma.Protocol
	TinyMax            int // messages up to this are Tiny (shm: hints.ShmTinyLimit)
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
	tinyMax := hints.ShmTinyLimit(set.RFPFetchSize)
	small := hints.PlanFor(set, cores, min(tinyMax+1, tiny.EagerThreshold))
	large := hints.PlanFor(set, cores, small.EagerThreshold+1)
	tinyProto := engineProto(set.Protocol, tiny.Protocol)
	if set.Protocol == hints.ProtoAuto && tiny.Protocol == hints.ProtoRFP {
		// The planner sends tiny shm messages by RFP for a busy-polling
		// server, which finds the request by polling memory, and a client
		// that polls by fetching. A lane's server is event-capable: the
		// request must carry an immediate anyway, so RFP costs what
		// Direct-WriteIMM costs plus the payload canary and the fetch
		// loop's READs racing the server's writes. Measured on lanes
		// (atb, 64 B, 10 alternating rounds): Direct-WriteIMM 2.02-2.06
		// against RFP 2.09-2.13 µs p50, 256 B 2.06-2.10 against 2.29-2.33;
		// 512 B calls/s the same. An explicit protocol hint still rules.
		tinyProto = rdma.ProtoDirectWriteIMM
	}
	sd := Side{
		Tiny:      tinyProto,
		Small:     engineProto(set.Protocol, small.Protocol),
		Large:     engineProto(set.Protocol, large.Protocol),
		TinyMax:   min(tinyMax, small.EagerThreshold),
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

// engineOf is the one hints → engine protocol table; auto, which the
// planner never returns, maps to hybrid, safe for any size.
var engineOf = [NumProtocols + 1]rdma.Protocol{
	hints.ProtoAuto:             rdma.ProtoHybrid,
	hints.ProtoEager:            rdma.ProtoEager,
	hints.ProtoWriteRNDV:        rdma.ProtoWriteRNDV,
	hints.ProtoReadRNDV:         rdma.ProtoReadRNDV,
	hints.ProtoDirectWriteSend:  rdma.ProtoDirectWriteSend,
	hints.ProtoChainedWriteSend: rdma.ProtoChainedWriteSend,
	hints.ProtoDirectWriteIMM:   rdma.ProtoDirectWriteIMM,
	hints.ProtoRFP:              rdma.ProtoRFP,
	hints.ProtoHybrid:           rdma.ProtoHybrid,
}

// The engine has exactly one protocol per concrete hint value (these fail
// to compile otherwise).
var (
	_ [NumProtocols - rdma.NumProtocols]struct{}
	_ [rdma.NumProtocols - NumProtocols]struct{}
)

// EngineProtocol is the engine protocol of a planned hint protocol.
func EngineProtocol(p hints.Protocol) rdma.Protocol {
	if p < 0 || int(p) >= len(engineOf) {
		return rdma.ProtoHybrid
	}
	return engineOf[p]
}

func engineProto(hint hints.Protocol, planned hints.Protocol) rdma.Protocol {
	if hint == hints.ProtoHybrid {
		return rdma.ProtoHybrid
	}
	return EngineProtocol(planned)
}

// FLOCK sizing: the largest message that travels over a shared handle,
// the largest request frame one carries (FlockMaxFrame: the message less
// FLOCK's own header; a client sends a larger frame on a lane of its
// function), and the ring each QP receives into. Functions planned with
// qp_sharing whose declared payloads exceed FlockMaxMessage use lanes of
// their own.
const (
	FlockMaxMessage = 60 << 10
	FlockMaxFrame   = (FlockMaxMessage - flock.SingleOverhead) &^ 7
	FlockRing       = 512 << 10
)
