//go:build cgo && linux

package fastpath

import (
	"time"

	"github.com/hatrpc/hatrpc/pkg/flock"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Side is one side's plan for one function on a lane, read from its
// hints.Table: the protocol of the messages it sends (by size) and how its
// endpoint is built.
type Side struct {
	lane rowSet // the table's lane rows
	// batch: its stream batch rows (a client or bidirectional stream's
	// requests, StreamProtocol); the lane rows where it has none.
	batch     rowSet
	Polling   hints.Polling
	Config    rdma.EndpointConfig
	QPSharing bool // the plan shares QPs among callers (FLOCK)
}

// maxLaneRows bounds a table's lane rows: TableFor cuts at most at the
// eager threshold, inline threshold, tiny RFP limit and FLOCK message
// (hints' TestTableRowsBounded holds it to hints.MaxLaneRows).
const maxLaneRows = hints.MaxLaneRows

// rowSet is a table's rows in arrays: max[i] is the largest message of
// row i (the last is unbounded), proto[i] its protocol: a few compares
// per message, no lookup.
type rowSet struct {
	max   [maxLaneRows]int
	proto [maxLaneRows]rdma.Protocol
	rows  int
}

// Protocol is the protocol of an n-byte message: its lane row's.
func (s *Side) Protocol(n int) rdma.Protocol { return s.lane.protocol(n) }

// StreamProtocol is the protocol of an n-byte request of a stream on
// lanes (a batch of this side's frames): its stream batch row's
// (hints.Table.StreamBatch), the lane row's where the table has none.
func (s *Side) StreamProtocol(n int) rdma.Protocol { return s.batch.protocol(n) }

func (rs *rowSet) protocol(n int) rdma.Protocol {
	i := 0
	for i < rs.rows-1 && n > rs.max[i] {
		i++
	}
	return rs.proto[i]
}

// rowSetOf puts rows into arrays (hybrid, safe for any size, for none).
func rowSetOf(rows []hints.Row) rowSet {
	var rs rowSet
	for _, r := range rows[:min(len(rows), maxLaneRows)] {
		p := EngineProtocol(r.Protocol)
		if rs.rows > 0 && rs.proto[rs.rows-1] == p {
			rs.max[rs.rows-1] = r.Max // rows apart only by inlining: one compare less per message
			continue
		}
		rs.max[rs.rows], rs.proto[rs.rows] = r.Max, p
		rs.rows++
	}
	if rs.rows == 0 { // not a fast-path table: anything is safe by hybrid
		rs.max[0], rs.proto[0], rs.rows = hints.NoBound, rdma.ProtoHybrid, 1
	}
	return rs
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

// PlanSide builds a lane side from t, the function's table on a fast-path
// transport: the lane rows (and a stream's batch rows) give the protocol
// of each size (always a concrete one: the engine's own hybrid switch is
// never asked), the table-wide values the endpoint. Every endpoint is built in event mode and
// spins per its polling hint, so the tuner can move it later and peers
// always get a completion for RFP requests (see docs/design/lanes.md).
//
// The pre-known (direct) buffer receives the peer's messages and the RFP
// response buffer holds this side's, sized in the table from the declared
// payload_size of the side that writes each: a planned message then never
// falls back to rendezvous.
func PlanSide(t *hints.Table, maxMsg int) Side {
	sd := Side{Polling: t.Polling, QPSharing: t.QPSharing, lane: rowSetOf(t.Lane)}
	sd.batch = sd.lane
	if t.StreamBatch != nil {
		sd.batch = rowSetOf(t.StreamBatch)
	}
	if maxMsg <= 0 || maxMsg > MaxMessage {
		maxMsg = MaxMessage
	}
	inline := t.InlineThreshold
	if inline == 0 {
		inline = -1
	}
	sig := t.SignalInterval
	// No buffer or slot is larger than the largest message: the engine
	// refuses such an endpoint, and under a message limit below the
	// buffers' 64 KiB minimum every lane failed (create endpoint: invalid
	// argument) and its calls went over TCP.
	eager := min(t.EagerThreshold, maxMsg)
	sd.Config = rdma.EndpointConfig{
		SlotSize:        eager,
		Slots:           16,
		DirectSize:      min(t.DirectSize, maxMsg),
		RespSize:        min(t.RespSize, maxMsg),
		EagerThreshold:  eager,
		InlineThreshold: inline,
		SignalInterval:  sig,
		MaxSendWR:       max(64, 2*sig),
		Polling:         rdma.PollEvent,
		RFPRetries:      t.RFPRetries,
		RFPFetchSize:    max(t.RFPFetchSize, rdma.MinFetchSize),
		MaxMessage:      maxMsg,
		PoolSize:        256 << 10,
		SpinTime:        sd.Spin(),
	}
	return sd
}

// Sized returns the side with its pre-known buffer grown to receive
// messages of recv bytes and its RFP response buffer grown to publish
// messages of publish bytes (both capped like the declared sizes): what the
// client tells at attach about the sizes it declared or has seen. Neither
// grows past the largest message (PlanSide).
func (s Side) Sized(recv, publish int) Side {
	s.Config.DirectSize = min(max(s.Config.DirectSize, bufferFor(recv)), s.Config.MaxMessage)
	s.Config.RespSize = min(max(s.Config.RespSize, bufferFor(publish)), s.Config.MaxMessage)
	return s
}

func bufferFor(payload int) int { return hints.BufferFor(payload) }

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

// FLOCK sizing (hints.FlockMaxMessage: the table's FLOCK rows end at
// FlockMaxFrame, the message less FLOCK's own header).
const (
	FlockMaxMessage = hints.FlockMaxMessage
	FlockMaxFrame   = hints.FlockMaxFrame
	FlockRing       = hints.FlockRing
)

// hints cannot import pkg/flock (cgo): its copy of FLOCK's message header
// size must be the real one (these fail to compile otherwise).
var (
	_ [hints.FlockMessageHeader - flock.SingleOverhead]struct{}
	_ [flock.SingleOverhead - hints.FlockMessageHeader]struct{}
)
