package hints

import (
	"math"
	"slices"
	"time"

	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/wire"

	"github.com/hatrpc/hatrpc/pkg/stream"
)

// Route is how a message of a function leaves its side: a lane of the
// function (an endpoint pair of its own), the process's FLOCK handle (QPs
// shared among callers), or the connection's TCP session.
type Route int

const (
	RouteLane Route = iota
	RouteFLOCK
	RouteTCP
)

var routeNames = []string{"lane", "flock", "tcp"}

func (r Route) String() string               { return enumString(routeNames, "Route", int(r)) }
func (r Route) MarshalText() ([]byte, error) { return enumText(routeNames, "Route", int(r)) }

// MarshalText makes a side read "client" or "server" in JSON.
func (s Side) MarshalText() ([]byte, error) {
	return enumText([]string{"client", "server"}, "Side", int(s))
}

// Provider is what the planner knows of a fast-path provider: plain data,
// so the planner (and hatgen, which has no cgo) needs no engine.
type Provider struct {
	Name      string    `json:"name"`      // as WithRDMA spells it
	Transport Transport `json:"transport"` // the transport it carries
	// LocalRead: an RDMA READ is a local memcpy (shared memory), not a
	// network round trip; it shifts the design space (see shmSpace).
	LocalRead bool `json:"local_read"`
}

// The providers the engine has.
var (
	ProviderSHM = Provider{Name: "shm", Transport: TransportSHM, LocalRead: true}
	ProviderIBV = Provider{Name: "ibv", Transport: TransportRDMA}
)

// ProviderFor is the provider that carries tr; the zero Provider for TCP.
func ProviderFor(tr Transport) Provider {
	switch tr {
	case TransportSHM:
		return ProviderSHM
	case TransportRDMA:
		return ProviderIBV
	}
	return Provider{}
}

// Granted is the transport a function asking for want runs on when the
// server offers offered (TCP, or the one fast path of a provider): the
// one rule, which the runtime applies to each lane transport the
// handshake granted (pkg/internal/transport's Pick, behind
// fastpath.PickTransport) and hatgen explain to the provider it is given.
func Granted(want, offered Transport) Transport {
	if want == TransportTCP || offered == TransportAuto || (want != TransportAuto && want != offered) {
		return TransportTCP
	}
	return offered
}

// FLOCK sizing: the largest message that travels over a shared handle,
// FLOCK's own header in it (pkg/fastpath holds it equal to pkg/flock's),
// the largest request frame one carries (the table's FLOCK rows end
// there: a larger request takes a lane), and the ring each QP receives
// into. A function planned with qp_sharing whose declared payloads exceed
// FlockMaxMessage/2 uses lanes of its own.
const (
	FlockMaxMessage    = 60 << 10
	FlockMessageHeader = 64
	FlockMaxFrame      = (FlockMaxMessage - FlockMessageHeader) &^ 7
	FlockRing          = 512 << 10
)

// Lane buffer sizing: a pre-known buffer holds a declared payload plus
// FrameRoom (the runtime's frame and Thrift message headers), at least
// MinBuffer and at most BufferCap; beyond that a message goes by rendezvous
// over the pools, which costs one round trip more.
const (
	MinBuffer = 64 << 10
	BufferCap = 4 << 20
	FrameRoom = 1 << 10
)

// BufferFor is the pre-known buffer for messages of payload bytes.
func BufferFor(payload int) int {
	return min(max(payload+FrameRoom, MinBuffer), BufferCap)
}

// MaxLaneRows is the most lane rows TableFor makes: it cuts at most at
// the eager threshold, the inline threshold, the tiny RFP limit and the
// FLOCK message. A stream's batch rows (no FLOCK cut) add one at the
// server's buffer: as many at most.
const MaxLaneRows = 5

// NoBound is the open upper end of a table's last row.
const NoBound = math.MaxInt

// Env is what a table is built for besides the function's hints.
type Env struct {
	Side Side
	// Transport is the transport the session granted the function (tcp,
	// shm or rdma); auto plans with the hint's own transport, like TCP
	// when that is auto too.
	Transport Transport
	// Provider of the fast path; zero: ProviderFor(Transport).
	Provider Provider
	Cores    int
	// Concurrency overrides the concurrency hint when > 0 (hatgen
	// explain --concurrency).
	Concurrency int
	// PeerPayload is the other side's declared payload_size: what this
	// side receives, sizing its pre-known buffer; a client shares FLOCK
	// only if both directions fit a FLOCK message.
	PeerPayload int
	// PeerPollsMemory: the peer is a bare endpoint busy-polling memory
	// (internal/bench), not a lane, whose server is event-capable. Only
	// then do tiny shm messages go by RFP (see ShmTinyMessage).
	PeerPollsMemory bool
	// Stream: the function is a stream. Streams take lanes of their own
	// where the transport granted lanes (LanesCarry: one for a server
	// stream, two for a client or bidirectional one). FLOCK and batching
	// carry no stream (docs/design/streams.md).
	Stream stream.Mode
}

// Row is one size range of a table: messages of Min to Max bytes (both
// included; the bytes a route sends, frame headers included).
type Row struct {
	Min   int   `json:"min"`
	Max   int   `json:"max"` // NoBound: no bound
	Route Route `json:"route"`
	// Protocol is the engine protocol a lane sends these messages by:
	// never auto or hybrid on a lane row; auto on FLOCK and TCP rows,
	// which have no engine protocol of their own.
	Protocol Protocol `json:"protocol"`
	Polling  Polling  `json:"polling"`
	Inline   bool     `json:"inline"` // posted inline (lane rows)
}

// Contains reports whether an n-byte message falls in the row.
func (r Row) Contains(n int) bool { return n >= r.Min && n <= r.Max }

// Adaptation names what changes at run time by design.
type Adaptation string

// The run-time adaptations a table may list.
const (
	AdaptTunerSpin      Adaptation = "tuner_spin"       // the tuner moves an endpoint's spin phase
	AdaptRFPServerReply Adaptation = "rfp_server_reply" // an RFP client stops fetching
	AdaptFlockOverflow  Adaptation = "flock_overflow"   // qp_sharing=auto past the dedicated lanes
	AdaptFlockToLane    Adaptation = "flock_to_lane"    // a call FLOCK cannot carry takes a lane
	AdaptFlockReply     Adaptation = "flock_reply"      // the server answers FLOCK requests by FLOCK
	AdaptRendezvous     Adaptation = "rndv_fallback"    // past the peer's buffer: write_rndv
	AdaptBufferGrowth   Adaptation = "buffer_growth"    // buffers sized for the largest message seen
	AdaptTCPFallback    Adaptation = "tcp_fallback"     // fast-path setup failed: TCP, retried later
	AdaptBatchSize      Adaptation = "batch_auto"       // batch=auto sizes batches by latency
)

// Adapt is one run-time adaptation of a table and what triggers it.
type Adapt struct {
	What    Adaptation `json:"what"`
	Trigger string     `json:"trigger"`
}

// Table is the plan of one side of one function: built once, read-only
// after. The lane pool, the FLOCK route, the server's lane session,
// hatgen explain and Conn.Plan all read it (docs/design/plan.md).
type Table struct {
	Side         Side         `json:"side"`
	Transport    Transport    `json:"transport"` // granted: tcp, shm or rdma (auto: not settled)
	Provider     string       `json:"provider,omitempty"`
	Goal         Goal         `json:"goal"`
	Subscription Subscription `json:"subscription"`
	Concurrency  int          `json:"concurrency"`
	Cores        int          `json:"cores"`
	PayloadSize  int          `json:"payload_size"` // this side's declared messages; 0: auto

	// Rows cover every size from 0 up, in order: the route a message takes
	// and, on a lane, its engine protocol.
	Rows []Row `json:"rows"`
	// Lane is what a lane sends at every size, whatever route the rows
	// choose (a call can leave FLOCK for a lane: AdaptFlockToLane); nil
	// on TCP.
	Lane []Row `json:"lane,omitempty"`
	// StreamBatch is what a client or bidirectional stream's lanes send
	// their requests by, at every size: each is a batch of this side's
	// frames (up to about 1 MiB: the second lane's requests, and the
	// first lane's opening one, which carries what was queued with the
	// open; its polls are tiny). The lane rows up to the server's
	// pre-known buffer for the function's requests, past it
	// streamBatchProtocol (see streamBatchRows). Client tables of such
	// streams on a fast path only; nil elsewhere (a server stream's lane
	// sends by the lane rows).
	StreamBatch []Row `json:"stream_batch,omitempty"`

	Polling         Polling `json:"polling"`
	InlineThreshold int     `json:"inline_threshold"` // 0 = inlining off
	EagerThreshold  int     `json:"eager_threshold"`
	SignalInterval  int     `json:"signal_interval"`
	RFPRetries      int     `json:"rfp_retries"`
	RFPFetchSize    int     `json:"rfp_fetch_size"`
	Credits         int     `json:"credits"`
	DirectSize      int     `json:"direct_size"` // pre-known buffer: the peer's messages
	RespSize        int     `json:"resp_size"`   // RFP response buffer: this side's messages

	QPSharing bool `json:"qp_sharing"` // the plan shares QPs (FLOCK rows when the payloads fit)
	// Overflow: qp_sharing=auto, a caller past the dedicated lanes goes
	// by FLOCK (AdaptFlockOverflow); FlockMax bounds what FLOCK carries.
	Overflow bool `json:"overflow"`
	FlockMax int  `json:"flock_max"`

	Batching
	NUMA    NUMA          `json:"numa"`
	Timeout time.Duration `json:"timeout"`

	// StreamWindow, StreamWindowMessages: a stream's receive window on
	// this side (stream_window), bytes and the message count derived
	// from them; 0: the connection's (docs/design/streams.md).
	StreamWindow         int `json:"stream_window,omitempty"`
	StreamWindowMessages int `json:"stream_window_messages,omitempty"`

	Adapts []Adapt `json:"adapts"`
}

// RowFor is the row of an n-byte message (the last row past the end).
func (t *Table) RowFor(n int) Row { return rowIn(t.Rows, n) }

// LaneRowFor is what a lane sends an n-byte message by.
func (t *Table) LaneRowFor(n int) Row { return rowIn(t.Lane, n) }

// StreamBatchRowFor is what a stream's lanes send an n-byte request by:
// its StreamBatch row, the lane row where the table has none.
func (t *Table) StreamBatchRowFor(n int) Row {
	if t.StreamBatch == nil {
		return t.LaneRowFor(n)
	}
	return rowIn(t.StreamBatch, n)
}

func rowIn(rows []Row, n int) Row {
	for _, r := range rows {
		if n <= r.Max {
			return r
		}
	}
	if len(rows) == 0 {
		return Row{Max: NoBound, Route: RouteTCP}
	}
	return rows[len(rows)-1]
}

// FastPath reports whether the table plans lanes (transport shm or rdma).
func (t *Table) FastPath() bool { return t.Lane != nil }

// Has reports whether the table lists adaptation a.
func (t *Table) Has(a Adaptation) bool {
	return slices.ContainsFunc(t.Adapts, func(x Adapt) bool { return x.What == a })
}

// TableFor builds the table of one side of a function with resolved hints
// set: the one place that decides route and protocol.
func TableFor(set Set, env Env) Table {
	if env.Transport != TransportAuto {
		set.Transport = env.Transport // granted: what runs, whatever was asked
	}
	if env.Stream != stream.None {
		if !LanesCarry(env.Stream) {
			set.Transport = TransportTCP
		}
		// A stream holds its lane for its life: no FLOCK, no batches.
		set.QPSharing, set.Batch = SwitchOff, BatchOff
	}
	if env.Concurrency > 0 {
		set.Concurrency = env.Concurrency
	}
	prov := env.Provider
	if prov == (Provider{}) {
		prov = ProviderFor(set.Transport)
	}
	fast := set.Transport == TransportSHM || set.Transport == TransportRDMA
	if !fast {
		prov = Provider{}
	}
	pc := planCaps{localRead: prov.LocalRead, tinyRFP: env.PeerPollsMemory}
	tinyMax := ShmTinyLimit(set.RFPFetchSize)
	eager := or(set.EagerThreshold, DefaultEagerThreshold)
	base := planAt(set, env.Cores, min(tinyMax+1, eager), pc)
	t := Table{
		Side: env.Side, Transport: set.Transport, Provider: prov.Name,
		Goal: base.Goal, Subscription: base.Subscription, Concurrency: base.Concurrency, Cores: base.Cores,
		PayloadSize: max(set.PayloadSize, 0),
		Polling:     base.Polling, InlineThreshold: base.InlineThreshold, EagerThreshold: base.EagerThreshold,
		SignalInterval: base.SignalInterval, RFPRetries: base.RFPRetries,
		RFPFetchSize: max(base.RFPFetchSize, RFPFetchOverhead), Credits: base.Credits,
		DirectSize: BufferFor(env.PeerPayload), RespSize: BufferFor(set.PayloadSize),
		QPSharing: base.QPSharing, FlockMax: FlockMaxFrame,
		Batching: base.Batching, NUMA: base.NUMA, Timeout: base.Timeout,
	}
	if env.Stream != stream.None {
		t.StreamWindow, t.StreamWindowMessages = StreamWindowOf(set)
	}
	if !fast {
		t.Rows = []Row{{Max: NoBound, Route: RouteTCP, Polling: base.Polling}}
		t.Adapts = []Adapt{}
		return t
	}
	// A client shares only if it declares no payload too large for a
	// FLOCK message either way: a request that turns out larger takes a
	// lane (AdaptFlockToLane), a reply that does travels in parts.
	client := env.Side == SideClient
	fits := client && set.PayloadSize <= FlockMaxMessage/2 && env.PeerPayload <= FlockMaxMessage/2
	share := fits && base.QPSharing
	// A batching function coalesces its callers itself (RF-RPC); one
	// that shares anyway has nothing to overflow from.
	t.Overflow = fits && !share && set.QPSharing == SwitchAuto && set.Batch == BatchOff

	cuts := []int{eager}
	if pc.tinyRFP && pc.localRead {
		cuts = append(cuts, min(tinyMax, eager))
	}
	if t.InlineThreshold > 0 {
		cuts = append(cuts, t.InlineThreshold)
	}
	if share {
		cuts = append(cuts, FlockMaxFrame)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	lo := 0
	for i := 0; i <= len(cuts); i++ {
		hi := NoBound
		if i < len(cuts) {
			hi = cuts[i]
		}
		if hi < lo {
			continue
		}
		p := planAt(set, env.Cores, max(lo, 1), pc)
		lane := Row{Min: lo, Max: hi, Route: RouteLane, Protocol: p.Protocol, Polling: p.Polling,
			Inline: t.InlineThreshold > 0 && hi <= t.InlineThreshold}
		t.Lane = appendRow(t.Lane, lane)
		if share && hi <= FlockMaxFrame {
			t.Rows = appendRow(t.Rows, Row{Min: lo, Max: hi, Route: RouteFLOCK, Polling: p.Polling})
		} else {
			t.Rows = appendRow(t.Rows, lane)
		}
		if hi == NoBound {
			break
		}
		lo = hi + 1
	}
	if env.Side == SideClient && env.Stream.ClientSends() {
		t.StreamBatch = streamBatchRows(t.Lane, t.RespSize, set.Protocol)
	}
	t.Adapts = adaptsOf(&t, share)
	return t
}

// streamBatchProtocol is the protocol of a client or bidirectional
// stream's batch past the server's pre-known buffer (where a lane row's
// direct protocol would fall back to write_rndv anyway): read_rndv, on
// every provider. The stream's lanes park their waits in Go's netpoller
// (client streamBlock), and a write rendezvous makes the client wait
// for the server's clear-to-send before the data moves, one more
// hand-off an exchange; a read rendezvous sends the request's address
// and lets the server's engine (on ibv its NIC) pull the batch at once,
// one control message fewer. Measured (64 KiB client stream, 2 cores,
// docs/performance/history.md "Client-stream batches by the plan"): on
// shm 2.1-2.5 GB/s and 28-31 CPU-µs a message against 0.9-1.3 GB/s and
// 41-46 µs by write_rndv; on ibv (Soft-RoCE in an emulated guest only)
// faster in 5 of 6 alternated pairs, with half the context switches.
const streamBatchProtocol = ProtoReadRNDV

// streamBatchRows are a stream's batch rows (Table.StreamBatch):
// lane up to buf, the pre-known buffer the server receives the
// function's requests into (BufferFor the client's declared payload, as
// the server's table sizes it), then one row by streamBatchProtocol. A
// protocol hint is explicit: it holds for batches too (the lane rows).
func streamBatchRows(lane []Row, buf int, hint Protocol) []Row {
	if hint != ProtoAuto || len(lane) == 0 {
		return slices.Clone(lane)
	}
	var out []Row
	for _, r := range lane {
		if r.Min > buf {
			break
		}
		r.Max = min(r.Max, buf)
		out = appendRow(out, r)
	}
	last := out[len(out)-1]
	if last.Max == NoBound {
		return out
	}
	return appendRow(out, Row{Min: last.Max + 1, Max: NoBound, Route: RouteLane,
		Protocol: streamBatchProtocol, Polling: last.Polling})
}

// StreamWindowOf is the per-stream receive window set asks for, in
// bytes and messages (0, 0: the connection's): the message count is
// derived from the bytes as for a connection's window
// (streamcore.WithDefaults), so both follow one rule.
func StreamWindowOf(set Set) (bytes, messages int) {
	if set.StreamWindow <= 0 {
		return 0, 0
	}
	w := streamcore.WithDefaults(wire.StreamWindows{Bytes: int32(min(set.StreamWindow, MaxStreamWindow))})
	return int(w.Bytes), int(w.Messages)
}

// LanesCarry reports whether lanes carry streams of mode m: every mode
// (docs/design/streams-lanes.md). A server stream holds
// one lane; a client or bidirectional stream two, since a client holding
// a poll on a lane could not send its own messages on it until the
// server answered: the second carries them. A stream goes over TCP only
// where no lane was granted, its hints pin TCP, or every lane is busy.
func LanesCarry(m stream.Mode) bool { return m != stream.None }

// appendRow appends r, merged into the last row when they differ only in
// their range.
func appendRow(rows []Row, r Row) []Row {
	if n := len(rows); n > 0 {
		last := rows[n-1]
		last.Max, r.Min = r.Max, last.Min
		if last == r {
			rows[n-1] = r
			return rows
		}
		r.Min = rows[n-1].Max + 1
	}
	return append(rows, r)
}
