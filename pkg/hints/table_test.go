package hints

import (
	"encoding/json"
	"testing"

	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// at is a row's route and protocol, what a boundary test checks.
type at struct {
	n     int
	route Route
	proto Protocol
}

func TestTableRows(t *testing.T) {
	eager := DefaultEagerThreshold
	inline := DefaultInlineThreshold
	shm := Env{Side: SideClient, Transport: TransportSHM, Cores: 2}
	rdma := Env{Side: SideClient, Transport: TransportRDMA, Cores: 2}
	cases := []struct {
		name string
		set  Set
		env  Env
		want []at
	}{
		{"tcp is one row", Set{}, Env{Transport: TransportTCP, Cores: 2},
			[]at{{0, RouteTCP, ProtoAuto}, {1 << 30, RouteTCP, ProtoAuto}}},
		{"auto transport plans TCP", Set{}, Env{Cores: 2}, []at{{64, RouteTCP, ProtoAuto}}},
		{"a bidirectional stream takes lanes on a granted lane transport", Set{Protocol: ProtoEager, QPSharing: SwitchOn}, Env{Side: SideServer, Transport: TransportRDMA, Cores: 2, Stream: stream.Bidi},
			[]at{{0, RouteLane, ProtoEager}, {64 << 10, RouteLane, ProtoEager}}},
		{"a client stream takes lanes, never FLOCK", Set{Protocol: ProtoEager, QPSharing: SwitchOn}, Env{Side: SideClient, Transport: TransportSHM, Cores: 2, Stream: stream.Client},
			[]at{{0, RouteLane, ProtoEager}, {64 << 10, RouteLane, ProtoEager}}},
		{"a stream on TCP", Set{}, Env{Side: SideClient, Transport: TransportTCP, Cores: 2, Stream: stream.Bidi},
			[]at{{0, RouteTCP, ProtoAuto}, {64 << 10, RouteTCP, ProtoAuto}}},
		{"a server stream takes a lane, never FLOCK", Set{Protocol: ProtoEager, QPSharing: SwitchOn}, Env{Side: SideClient, Transport: TransportRDMA, Cores: 2, Stream: stream.Server},
			[]at{{0, RouteLane, ProtoEager}, {64 << 10, RouteLane, ProtoEager}}},
		{"tiny shm latency on a lane: direct_write_imm", Set{}, shm,
			[]at{{63, RouteLane, ProtoDirectWriteIMM}, {64, RouteLane, ProtoDirectWriteIMM}, {65, RouteLane, ProtoDirectWriteIMM},
				{ShmTinyMessage, RouteLane, ProtoDirectWriteIMM}, {ShmTinyMessage + 1, RouteLane, ProtoDirectWriteIMM}}},
		{"tiny shm to a memory-polling peer: rfp", Set{}, Env{Transport: TransportSHM, Cores: 2, PeerPollsMemory: true},
			[]at{{1, RouteLane, ProtoRFP}, {ShmTinyMessage, RouteLane, ProtoRFP}, {ShmTinyMessage + 1, RouteLane, ProtoDirectWriteIMM}}},
		{"hybrid is two rows at the eager threshold", Set{Protocol: ProtoHybrid}, rdma,
			[]at{{eager - 1, RouteLane, ProtoEager}, {eager, RouteLane, ProtoEager}, {eager + 1, RouteLane, ProtoWriteRNDV}}},
		{"hybrid with its own threshold", Set{Protocol: ProtoHybrid, EagerThreshold: 16 << 10}, shm,
			[]at{{16<<10 - 1, RouteLane, ProtoEager}, {16 << 10, RouteLane, ProtoEager}, {16<<10 + 1, RouteLane, ProtoWriteRNDV}}},
		{"throughput over: rfp large on ibv", Set{PerfGoal: Throughput, Concurrency: 8, QPSharing: SwitchOff}, rdma,
			[]at{{eager, RouteLane, ProtoDirectWriteIMM}, {eager + 1, RouteLane, ProtoRFP}}},
		{"throughput over: read_rndv large on shm", Set{PerfGoal: Throughput, Concurrency: 8, QPSharing: SwitchOff}, shm,
			[]at{{eager, RouteLane, ProtoDirectWriteIMM}, {eager + 1, RouteLane, ProtoReadRNDV}}},
		{"qp_sharing on: FLOCK up to its largest frame, a lane above", Set{QPSharing: SwitchOn, PayloadSize: 64}, shm,
			[]at{{0, RouteFLOCK, ProtoAuto}, {FlockMaxFrame - 1, RouteFLOCK, ProtoAuto}, {FlockMaxFrame, RouteFLOCK, ProtoAuto},
				{FlockMaxFrame + 1, RouteLane, ProtoDirectWriteIMM}}},
		{"qp_sharing on, payload too large to share: lanes", Set{QPSharing: SwitchOn, PayloadSize: FlockMaxMessage/2 + 1}, shm,
			[]at{{64, RouteLane, ProtoDirectWriteIMM}}},
		{"qp_sharing on, the server's payload too large: lanes", Set{QPSharing: SwitchOn},
			Env{Side: SideClient, Transport: TransportSHM, Cores: 2, PeerPayload: FlockMaxMessage}, []at{{64, RouteLane, ProtoDirectWriteIMM}}},
		{"qp_sharing auto over-subscribed shares", Set{Concurrency: 9}, rdma, []at{{64, RouteFLOCK, ProtoAuto}}},
		{"the server replies on lanes", Set{QPSharing: SwitchOn}, Env{Side: SideServer, Transport: TransportSHM, Cores: 2},
			[]at{{64, RouteLane, ProtoDirectWriteIMM}}},
		{"granted tcp beats a pinned transport", Set{Transport: TransportSHM}, Env{Transport: TransportTCP, Cores: 2},
			[]at{{64, RouteTCP, ProtoAuto}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := TableFor(tc.set, tc.env)
			for _, w := range tc.want {
				r := tb.RowFor(w.n)
				assert.Equal(t, w.route, r.Route, "route at %d\n%s", w.n, tb)
				assert.Equal(t, w.proto, r.Protocol, "protocol at %d\n%s", w.n, tb)
				assert.True(t, r.Contains(w.n))
			}
			checkCovers(t, tb.Rows)
			if tb.FastPath() {
				checkCovers(t, tb.Lane)
				assert.LessOrEqual(t, len(tb.Lane), MaxLaneRows)
				for _, r := range tb.Lane {
					assert.Equal(t, RouteLane, r.Route)
					assert.NotContains(t, []Protocol{ProtoAuto, ProtoHybrid}, r.Protocol, "lane rows are concrete")
				}
			}
		})
	}
	// Inline is a row of its own: yes up to the threshold.
	tb := TableFor(Set{}, shm)
	assert.True(t, tb.RowFor(inline).Inline)
	assert.False(t, tb.RowFor(inline+1).Inline)
	off := TableFor(Set{InlineThreshold: InlineDisabled}, shm)
	assert.False(t, off.RowFor(1).Inline)
}

// checkCovers: rows run from 0 to NoBound without gap or overlap.
func checkCovers(t *testing.T, rows []Row) {
	t.Helper()
	require.NotEmpty(t, rows)
	require.Equal(t, 0, rows[0].Min)
	require.Equal(t, NoBound, rows[len(rows)-1].Max)
	for i := 1; i < len(rows); i++ {
		require.Equal(t, rows[i-1].Max+1, rows[i].Min, "row %d", i)
		require.NotEqual(t, rows[i-1], Row{Min: rows[i-1].Min, Max: rows[i-1].Max, Route: rows[i].Route,
			Protocol: rows[i].Protocol, Polling: rows[i].Polling, Inline: rows[i].Inline}, "rows %d and %d merge", i-1, i)
	}
}

func TestTableAdapts(t *testing.T) {
	shm := Env{Side: SideClient, Transport: TransportSHM, Cores: 2}
	cases := []struct {
		name     string
		set      Set
		env      Env
		has, not []Adaptation
	}{
		{"busy latency", Set{}, shm, []Adaptation{AdaptTunerSpin, AdaptFlockOverflow, AdaptTCPFallback, AdaptRendezvous},
			[]Adaptation{AdaptRFPServerReply, AdaptFlockToLane, AdaptFlockReply}},
		{"rfp switches to server-reply", Set{Protocol: ProtoRFP}, shm, []Adaptation{AdaptRFPServerReply}, nil},
		{"batching does not overflow", Set{Batch: 4}, shm, nil, []Adaptation{AdaptFlockOverflow}},
		{"qp_sharing off does not overflow", Set{QPSharing: SwitchOff}, shm, nil, []Adaptation{AdaptFlockOverflow}},
		{"sharing leaves FLOCK for a lane", Set{QPSharing: SwitchOn}, shm, []Adaptation{AdaptFlockToLane}, []Adaptation{AdaptFlockOverflow}},
		{"event polling has no tuner", Set{Polling: PollEvent}, shm, nil, []Adaptation{AdaptTunerSpin}},
		{"server", Set{}, Env{Side: SideServer, Transport: TransportRDMA}, []Adaptation{AdaptFlockReply}, []Adaptation{AdaptTCPFallback}},
		{"batch auto", Set{Batch: BatchAuto}, shm, []Adaptation{AdaptBatchSize}, nil},
		{"tcp adapts nothing", Set{}, Env{Transport: TransportTCP}, nil, []Adaptation{AdaptTunerSpin, AdaptTCPFallback}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := TableFor(tc.set, tc.env)
			for _, a := range tc.has {
				assert.True(t, tb.Has(a), "%s in\n%s", a, tb)
			}
			for _, a := range tc.not {
				assert.False(t, tb.Has(a), "%s in\n%s", a, tb)
			}
		})
	}
}

func TestTableValues(t *testing.T) {
	tb := TableFor(Set{PayloadSize: 1 << 20, RFPFetchSize: 16, Credits: 8, SignalInterval: 16},
		Env{Side: SideClient, Transport: TransportRDMA, Cores: 4, Concurrency: 16, PeerPayload: 100})
	assert.Equal(t, TransportRDMA, tb.Transport)
	assert.Equal(t, "ibv", tb.Provider)
	assert.Equal(t, Over, tb.Subscription, "--concurrency overrides the hint")
	assert.Equal(t, 16, tb.Concurrency)
	assert.Equal(t, RFPFetchOverhead, tb.RFPFetchSize, "never below the engine's minimum fetch")
	assert.Equal(t, 8, tb.Credits)
	assert.Equal(t, 16, tb.SignalInterval)
	assert.Equal(t, MinBuffer, tb.DirectSize)
	assert.Equal(t, 1<<20+FrameRoom, tb.RespSize)
	assert.Equal(t, "", TableFor(Set{}, Env{Transport: TransportTCP}).Provider)
	assert.Equal(t, TransportTCP, Granted(TransportAuto, TransportAuto))
	assert.Equal(t, TransportSHM, Granted(TransportAuto, TransportSHM))
	assert.Equal(t, TransportTCP, Granted(TransportRDMA, TransportSHM))
	assert.Equal(t, TransportTCP, Granted(TransportTCP, TransportSHM))
	assert.Equal(t, TransportRDMA, Granted(TransportRDMA, TransportRDMA))
	// A row past the end falls in the last row; an empty table is TCP.
	assert.Equal(t, RouteTCP, (&Table{}).RowFor(5).Route)
}

func TestTableText(t *testing.T) {
	tb := TableFor(Set{QPSharing: SwitchOn}, Env{Side: SideClient, Transport: TransportSHM, Cores: 2})
	s := tb.String()
	for _, want := range []string{
		"goal=latency subscription=under(1/2 cores) transport=shm (shm) polling=busy",
		"SIZE", "ROUTE", "PROTOCOL", "INLINE",
		"61377-...  lane   direct_write_imm  busy     no",
		"lane rows (a call that leaves FLOCK for a lane):",
		"adapts flock_to_lane: a request > 61376",
	} {
		assert.Contains(t, s, want)
	}
	assert.Regexp(t, `(?m)^0-61376 +flock +- +busy +no$`, s)
	assert.Equal(t, "0-4096 lane eager busy", Row{Max: 4096, Protocol: ProtoEager, Polling: PollBusy}.String())
	assert.Equal(t, "4097-... lane write_rndv busy inline", Row{Min: 4097, Max: NoBound, Protocol: ProtoWriteRNDV, Polling: PollBusy, Inline: true}.String())
	b, err := json.Marshal(tb)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, "client", back["side"])
	assert.Equal(t, "shm", back["transport"])
	rows := back["rows"].([]any)
	assert.Equal(t, "flock", rows[0].(map[string]any)["route"])
	assert.NotEmpty(t, back["adapts"])
}

// TestTableStreamWindow: a stream's table carries its stream_window, the
// message count derived from the bytes as for a connection's window; a
// unary function's table and an unhinted stream's carry none.
func TestTableStreamWindow(t *testing.T) {
	tests := []struct {
		name        string
		set         Set
		mode        stream.Mode
		bytes, msgs int
		text        string
	}{
		{"256KiB server stream", Set{StreamWindow: 256 << 10}, stream.Server, 256 << 10, 2048, "stream_window=256KiB (2048 messages) per stream\n"},
		{"1KiB: at least 16 messages", Set{StreamWindow: 1 << 10}, stream.Bidi, 1 << 10, 16, "stream_window=1KiB (16 messages) per stream\n"},
		{"unhinted stream", Set{}, stream.Client, 0, 0, ""},
		{"unary function", Set{StreamWindow: 64 << 10}, stream.None, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, tr := range []Transport{TransportTCP, TransportSHM} {
				tab := TableFor(tt.set, Env{Side: SideClient, Transport: tr, Cores: 2, Stream: tt.mode})
				assert.Equal(t, tt.bytes, tab.StreamWindow)
				assert.Equal(t, tt.msgs, tab.StreamWindowMessages)
				if tt.text != "" {
					assert.Contains(t, tab.String(), tt.text)
				} else {
					assert.NotContains(t, tab.String(), "stream_window")
				}
			}
		})
	}
}

// TestTableStreamBatch: a client or bidirectional stream's second lane
// sends its batches by the lane rows up to the server's pre-known buffer
// for the function's requests, and by read_rndv past it, on shm and ibv
// alike; an explicit protocol hint holds for batches too; no other table
// has batch rows.
func TestTableStreamBatch(t *testing.T) {
	buf := BufferFor(0)
	env := func(tr Transport, side Side, m stream.Mode) Env {
		return Env{Side: side, Transport: tr, Cores: 2, Stream: m}
	}
	type want struct {
		n     int
		proto Protocol
	}
	cases := []struct {
		name string
		set  Set
		env  Env
		want []want // nil: no batch rows
	}{
		{"client stream on shm", Set{}, env(TransportSHM, SideClient, stream.Client),
			[]want{{64, ProtoDirectWriteIMM}, {8 << 10, ProtoDirectWriteIMM}, {buf, ProtoDirectWriteIMM}, {buf + 1, ProtoReadRNDV}, {690 << 10, ProtoReadRNDV}}},
		{"client stream on ibv", Set{}, env(TransportRDMA, SideClient, stream.Client),
			[]want{{64, ProtoDirectWriteIMM}, {buf, ProtoDirectWriteIMM}, {buf + 1, ProtoReadRNDV}, {690 << 10, ProtoReadRNDV}}},
		{"bidirectional stream on shm", Set{PerfGoal: Throughput}, env(TransportSHM, SideClient, stream.Bidi),
			[]want{{64, ProtoDirectWriteIMM}, {buf, ProtoDirectWriteIMM}, {buf + 1, ProtoReadRNDV}}},
		{"a declared payload moves the cut", Set{PayloadSize: 256 << 10}, env(TransportSHM, SideClient, stream.Client),
			[]want{{256 << 10, ProtoDirectWriteIMM}, {BufferFor(256 << 10), ProtoDirectWriteIMM}, {BufferFor(256<<10) + 1, ProtoReadRNDV}}},
		{"throughput over on ibv: rfp up to the buffer", Set{PerfGoal: Throughput, Concurrency: 8}, env(TransportRDMA, SideClient, stream.Client),
			[]want{{64, ProtoDirectWriteIMM}, {8 << 10, ProtoRFP}, {buf, ProtoRFP}, {buf + 1, ProtoReadRNDV}}},
		{"throughput over on shm: read_rndv past eager", Set{PerfGoal: Throughput, Concurrency: 8}, env(TransportSHM, SideClient, stream.Client),
			[]want{{64, ProtoDirectWriteIMM}, {8 << 10, ProtoReadRNDV}, {buf + 1, ProtoReadRNDV}}},
		{"res_util keeps write_rndv up to the buffer", Set{PerfGoal: ResUtil}, env(TransportRDMA, SideClient, stream.Client),
			[]want{{8 << 10, ProtoWriteRNDV}, {buf, ProtoWriteRNDV}, {buf + 1, ProtoReadRNDV}}},
		{"every cut: still within MaxLaneRows", Set{}, Env{Side: SideClient, Transport: TransportSHM, Cores: 2, Stream: stream.Client, PeerPollsMemory: true},
			[]want{{64, ProtoRFP}, {ShmTinyMessage + 1, ProtoDirectWriteIMM}, {buf, ProtoDirectWriteIMM}, {buf + 1, ProtoReadRNDV}}},
		{"a protocol hint holds for batches", Set{Protocol: ProtoEager}, env(TransportSHM, SideClient, stream.Client),
			[]want{{64, ProtoEager}, {690 << 10, ProtoEager}}},
		{"hybrid too", Set{Protocol: ProtoHybrid}, env(TransportRDMA, SideClient, stream.Bidi),
			[]want{{64, ProtoEager}, {690 << 10, ProtoWriteRNDV}}},
		{"the server's side has none", Set{}, env(TransportSHM, SideServer, stream.Client), nil},
		{"a server stream has none", Set{}, env(TransportSHM, SideClient, stream.Server), nil},
		{"a unary function has none", Set{}, env(TransportRDMA, SideClient, stream.None), nil},
		{"tcp has none", Set{}, env(TransportTCP, SideClient, stream.Client), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := TableFor(tc.set, tc.env)
			if tc.want == nil {
				assert.Nil(t, tb.StreamBatch, "%s", tb)
				assert.Equal(t, tb.LaneRowFor(690<<10), tb.StreamBatchRowFor(690<<10), "no batch rows: the lane's")
				return
			}
			checkCovers(t, tb.StreamBatch)
			assert.LessOrEqual(t, len(tb.StreamBatch), MaxLaneRows)
			for _, w := range tc.want {
				r := tb.StreamBatchRowFor(w.n)
				assert.True(t, r.Contains(w.n))
				assert.Equal(t, RouteLane, r.Route)
				assert.Equal(t, w.proto, r.Protocol, "batch protocol at %d\n%s", w.n, tb)
			}
			// Up to the buffer a batch goes as any message of its size.
			cut := BufferFor(tc.set.PayloadSize)
			for _, n := range []int{0, 64, 200, 4 << 10, 4<<10 + 1, cut} {
				l, b := tb.LaneRowFor(n), tb.StreamBatchRowFor(n)
				assert.Equal(t, []any{l.Protocol, l.Polling, l.Inline}, []any{b.Protocol, b.Polling, b.Inline}, "at %d\n%s", n, tb)
			}
		})
	}
}
