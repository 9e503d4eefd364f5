package hints

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSubscriptionOf(t *testing.T) {
	tests := []struct {
		conc, cores int
		want        Subscription
	}{
		{1, 8, Under}, {7, 8, Under}, {8, 8, Full}, {9, 8, Over}, {512, 16, Over},
		{0, 1, Full}, {0, 0, Full}, {-3, 4, Under}, {2, 0, Over},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, SubscriptionOf(tt.conc, tt.cores), "%d/%d", tt.conc, tt.cores)
	}
}

// TestPlanDesignSpace covers every cell of HatRPC Fig. 6: three goals ×
// three subscription levels × small/large messages.
func TestPlanDesignSpace(t *testing.T) {
	const cores = 8
	conc := map[Subscription]int{Under: 4, Full: 8, Over: 64}
	const small, large = 512, 128 << 10
	tests := []struct {
		goal     Goal
		sub      Subscription
		size     int
		protocol Protocol
		polling  Polling
	}{
		{Latency, Under, small, ProtoDirectWriteIMM, PollBusy},
		{Latency, Under, large, ProtoDirectWriteIMM, PollBusy},
		{Latency, Full, small, ProtoDirectWriteIMM, PollBusy},
		{Latency, Full, large, ProtoDirectWriteIMM, PollBusy},
		{Latency, Over, small, ProtoDirectWriteIMM, PollAdaptive},
		{Latency, Over, large, ProtoDirectWriteIMM, PollAdaptive},
		{Throughput, Under, small, ProtoDirectWriteIMM, PollBusy},
		{Throughput, Under, large, ProtoDirectWriteIMM, PollBusy},
		{Throughput, Full, small, ProtoDirectWriteIMM, PollEvent},
		{Throughput, Full, large, ProtoDirectWriteIMM, PollEvent},
		{Throughput, Over, small, ProtoDirectWriteIMM, PollEvent},
		{Throughput, Over, large, ProtoRFP, PollEvent},
		{ResUtil, Under, small, ProtoDirectWriteIMM, PollEvent},
		{ResUtil, Under, large, ProtoWriteRNDV, PollEvent},
		{ResUtil, Full, small, ProtoEager, PollEvent},
		{ResUtil, Full, large, ProtoWriteRNDV, PollEvent},
		{ResUtil, Over, small, ProtoEager, PollEvent},
		{ResUtil, Over, large, ProtoWriteRNDV, PollEvent},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%d", tt.goal, tt.sub, tt.size), func(t *testing.T) {
			p := planFor(Set{PerfGoal: tt.goal, Concurrency: conc[tt.sub]}, cores, tt.size)
			assert.Equal(t, tt.sub, p.Subscription)
			assert.Equal(t, tt.size == large, p.Large)
			assert.Equal(t, tt.protocol, p.Protocol)
			assert.Equal(t, tt.polling, p.Polling)
			assert.Equal(t, TransportAuto, p.Transport, "auto stays auto for the runtime")
		})
	}
}

func TestPlanEagerThresholdBoundary(t *testing.T) {
	rs := Set{PerfGoal: ResUtil, Concurrency: 8}
	tests := []struct {
		set  Set
		size int
		want Protocol
	}{
		{rs, 4096, ProtoEager},     // 4 KiB is still small (HatRPC §5.2: small is <= 4KB)
		{rs, 4097, ProtoWriteRNDV}, // one byte more is large
		{rs, 0, ProtoEager},        // unknown size plans as small
		{Set{PerfGoal: ResUtil, Concurrency: 8, PayloadSize: 64 << 10}, 0, ProtoWriteRNDV}, // payload_size stands in
		{Set{PerfGoal: ResUtil, Concurrency: 8, PayloadSize: 64 << 10}, 100, ProtoEager},   // the actual size wins
		{Set{PerfGoal: ResUtil, Concurrency: 8, EagerThreshold: 16 << 10}, 8192, ProtoEager},
		{Set{PerfGoal: ResUtil, Concurrency: 8, EagerThreshold: 1024}, 2048, ProtoWriteRNDV},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, planFor(tt.set, 8, tt.size).Protocol, "size %d", tt.size)
	}
}

func TestPlanOverrides(t *testing.T) {
	over := Set{PerfGoal: Throughput, Concurrency: 64}
	tests := []struct {
		name     string
		set      Set
		size     int
		protocol Protocol
		polling  Polling
	}{
		{"protocol beats goal", Set{PerfGoal: Latency, Protocol: ProtoEager}, 1 << 20, ProtoEager, PollBusy},
		{"read_rndv by hint", Set{PerfGoal: ResUtil, Concurrency: 64, Protocol: ProtoReadRNDV}, 1 << 20, ProtoReadRNDV, PollEvent},
		{"polling beats goal", Set{PerfGoal: Latency, Polling: PollEvent}, 64, ProtoDirectWriteIMM, PollEvent},
		{"both", Set{PerfGoal: Throughput, Concurrency: 64, Protocol: ProtoChainedWriteSend, Polling: PollBusy}, 1 << 20, ProtoChainedWriteSend, PollBusy},
		{"hybrid small", Set{Protocol: ProtoHybrid}, 4096, ProtoEager, PollBusy},
		{"hybrid large", Set{Protocol: ProtoHybrid}, 4097, ProtoWriteRNDV, PollBusy},
		{"explicit auto keeps the table", Set{PerfGoal: Throughput, Concurrency: 64, Protocol: ProtoAuto, Polling: PollAuto}, 1 << 20, ProtoRFP, PollEvent},
		{"direct_write_send", Set{Protocol: ProtoDirectWriteSend}, 10, ProtoDirectWriteSend, PollBusy},
		{"rfp small", func() Set { s := over; s.Protocol = ProtoRFP; return s }(), 64, ProtoRFP, PollEvent},
		{"adaptive", Set{Polling: PollAdaptive}, 64, ProtoDirectWriteIMM, PollAdaptive},
		{"out-of-range goal plans as latency", Set{PerfGoal: Goal(9)}, 64, ProtoDirectWriteIMM, PollBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planFor(tt.set, 8, tt.size)
			assert.Equal(t, tt.protocol, p.Protocol)
			assert.Equal(t, tt.polling, p.Polling)
		})
	}
}

func TestPlanParameters(t *testing.T) {
	def := planFor(Set{}, 4, 100)
	assert.Equal(t, Plan{
		Goal: Latency, Subscription: Under, Concurrency: 1, Cores: 4, MsgSize: 100,
		Transport: TransportAuto, Protocol: ProtoDirectWriteIMM, Polling: PollBusy,
		Inline: true, InlineThreshold: DefaultInlineThreshold, EagerThreshold: 4096, SignalInterval: 64,
		RFPRetries: 5, RFPFetchSize: 256,
		Batching: Batching{Batch: BatchOff, BatchBytes: 2048, BatchTimeout: 5 * time.Millisecond, BatchAlpha: 0.05, LatencyLimit: time.Millisecond},
		NUMA:     NUMANone, QPSharing: false, Credits: 32,
	}, def)

	tests := []struct {
		name  string
		set   Set
		cores int
		size  int
		check func(t *testing.T, p Plan)
	}{
		{"inline above threshold", Set{}, 4, 129, func(t *testing.T, p Plan) { assert.False(t, p.Inline) }},
		{"inline at threshold", Set{}, 4, 128, func(t *testing.T, p Plan) { assert.True(t, p.Inline) }},
		{"inline unknown size", Set{}, 4, 0, func(t *testing.T, p Plan) { assert.False(t, p.Inline) }},
		{"inline disabled", Set{InlineThreshold: InlineDisabled}, 4, 8, func(t *testing.T, p Plan) {
			assert.False(t, p.Inline)
			assert.Zero(t, p.InlineThreshold)
		}},
		{"inline raised", Set{InlineThreshold: 256}, 4, 200, func(t *testing.T, p Plan) { assert.True(t, p.Inline) }},
		{"rfp parameters", Set{RFPRetries: 2, RFPFetchSize: 1024}, 4, 8, func(t *testing.T, p Plan) {
			assert.Equal(t, 2, p.RFPRetries)
			assert.Equal(t, 1024, p.RFPFetchSize)
		}},
		{"batch parameters", Set{Batch: BatchAuto, BatchBytes: 4096, BatchTimeout: time.Millisecond, BatchAlpha: 0.1, LatencyLimit: 50 * time.Microsecond}, 4, 8,
			func(t *testing.T, p Plan) {
				assert.Equal(t, BatchAuto, p.Batch)
				assert.Equal(t, 4096, p.BatchBytes)
				assert.Equal(t, time.Millisecond, p.BatchTimeout)
				assert.InDelta(t, 0.1, p.BatchAlpha, 1e-12)
				assert.Equal(t, 50*time.Microsecond, p.LatencyLimit)
			}},
		{"credits by goal", Set{PerfGoal: Throughput}, 4, 8, func(t *testing.T, p Plan) { assert.Equal(t, 64, p.Credits) }},
		{"credits res_util", Set{PerfGoal: ResUtil}, 4, 8, func(t *testing.T, p Plan) { assert.Equal(t, 16, p.Credits) }},
		{"credits hinted", Set{PerfGoal: ResUtil, Credits: 100}, 4, 8, func(t *testing.T, p Plan) { assert.Equal(t, 100, p.Credits) }},
		{"qp sharing auto over", Set{Concurrency: 9}, 4, 8, func(t *testing.T, p Plan) { assert.True(t, p.QPSharing) }},
		{"qp sharing auto res_util", Set{PerfGoal: ResUtil}, 4, 8, func(t *testing.T, p Plan) { assert.True(t, p.QPSharing) }},
		{"qp sharing off beats auto", Set{PerfGoal: ResUtil, QPSharing: SwitchOff}, 4, 8, func(t *testing.T, p Plan) { assert.False(t, p.QPSharing) }},
		{"qp sharing on", Set{QPSharing: SwitchOn}, 4, 8, func(t *testing.T, p Plan) { assert.True(t, p.QPSharing) }},
		{"transport hinted", Set{Transport: TransportTCP}, 4, 8, func(t *testing.T, p Plan) { assert.Equal(t, TransportTCP, p.Transport) }},
		{"numa and timeout copied", Set{NUMA: NUMANIC, Timeout: time.Second, SignalInterval: 8}, 4, 8, func(t *testing.T, p Plan) {
			assert.Equal(t, NUMANIC, p.NUMA)
			assert.Equal(t, time.Second, p.Timeout)
			assert.Equal(t, 8, p.SignalInterval)
		}},
		{"nonsense inputs are clamped", Set{Concurrency: -5}, -1, -100, func(t *testing.T, p Plan) {
			assert.Equal(t, 1, p.Concurrency)
			assert.Equal(t, 1, p.Cores)
			assert.Equal(t, 0, p.MsgSize)
			assert.Equal(t, Full, p.Subscription)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, planFor(tt.set, tt.cores, tt.size)) })
	}
}

func TestPlanString(t *testing.T) {
	tests := []struct {
		set  Set
		size int
		want string
	}{
		{Set{}, 512, "goal=latency subscription=under(1/8 cores) msg=512(small) transport=auto protocol=direct_write_imm polling=busy" +
			" inline=<=128(no) eager_threshold=4KiB signal_interval=64 batch=off qp_sharing=off credits=32 numa=none timeout=none"},
		{Set{PerfGoal: Throughput, Concurrency: 64, NUMA: NUMANode(1), Timeout: 2 * time.Millisecond, InlineThreshold: InlineDisabled}, 128 << 10,
			"goal=throughput subscription=over(64/8 cores) msg=128KiB(large) transport=auto protocol=rfp polling=event" +
				" inline=off eager_threshold=4KiB signal_interval=64 rfp_retries=5 rfp_fetch_size=256 batch=off qp_sharing=on credits=64 numa=1 timeout=2ms"},
		{Set{Batch: BatchAuto, LatencyLimit: 50 * time.Microsecond}, 0,
			"goal=latency subscription=under(1/8 cores) msg=unknown(small) transport=auto protocol=direct_write_imm polling=busy" +
				" inline=<=128(no) eager_threshold=4KiB signal_interval=64 batch=auto batch_bytes=2KiB batch_timeout=5ms latency_limit=50us batch_alpha=0.05" +
				" qp_sharing=off credits=32 numa=none timeout=none"},
		{Set{Batch: 4}, 64, "goal=latency subscription=under(1/8 cores) msg=64(small) transport=auto protocol=direct_write_imm polling=busy" +
			" inline=<=128(yes) eager_threshold=4KiB signal_interval=64 batch=4 batch_bytes=2KiB batch_timeout=5ms qp_sharing=off credits=32 numa=none timeout=none"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, planFor(tt.set, 8, tt.size).String())
	}
}

func TestPlanJSON(t *testing.T) {
	p := planFor(Set{PerfGoal: ResUtil, Concurrency: 16, NUMA: NUMANIC, Batch: 8}, 8, 64<<10)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, "res_util", m["goal"])
	assert.Equal(t, "over", m["subscription"])
	assert.Equal(t, "write_rndv", m["protocol"])
	assert.Equal(t, "event", m["polling"])
	assert.Equal(t, "nic", m["numa"])
	assert.Equal(t, "8", m["batch"])
	var back Plan
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, p, back)
}

// planFor is one cell of the design space as a bare engine sees it: shm
// by the transport hint, the peer polling memory (tiny shm messages by
// RFP).
func planFor(s Set, cores, n int) Plan {
	return planAt(s, cores, n, planCaps{localRead: s.Transport == TransportSHM, tinyRFP: true})
}
