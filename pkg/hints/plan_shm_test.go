package hints

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanAtSharedMemory: with transport=shm the planner uses the
// shared-memory adaptation of Fig. 6; every other transport plans as before.
func TestPlanAtSharedMemory(t *testing.T) {
	cases := []struct {
		name     string
		set      Set
		cores    int
		size     int
		want     Protocol
		unlessSH Protocol // the plan for the same set on another transport
	}{
		{"tiny latency", Set{PerfGoal: Latency}, 2, 64, ProtoRFP, ProtoDirectWriteIMM},
		{"128 B latency", Set{PerfGoal: Latency}, 2, 128, ProtoRFP, ProtoDirectWriteIMM},
		{"129 B latency", Set{PerfGoal: Latency}, 2, 129, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"56 B, fetch 128 B", Set{PerfGoal: Latency, RFPFetchSize: 128}, 2, 56, ProtoRFP, ProtoDirectWriteIMM},
		{"57 B, fetch 128 B", Set{PerfGoal: Latency, RFPFetchSize: 128}, 2, 57, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"128 B, fetch 1 KiB", Set{PerfGoal: Latency, RFPFetchSize: 1 << 10}, 2, 128, ProtoRFP, ProtoDirectWriteIMM},
		{"129 B, fetch 1 KiB", Set{PerfGoal: Latency, RFPFetchSize: 1 << 10}, 2, 129, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"1 B, fetch below the header", Set{PerfGoal: Latency, RFPFetchSize: 64}, 2, 1, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"512 B throughput", Set{PerfGoal: Throughput}, 2, 512, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"1 KiB latency", Set{PerfGoal: Latency}, 2, 1 << 10, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"unknown size", Set{PerfGoal: Latency}, 2, 0, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"tiny res_util", Set{PerfGoal: ResUtil}, 4, 64, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"tiny over-subscribed", Set{PerfGoal: Latency, Concurrency: 8}, 2, 64, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"large throughput over", Set{PerfGoal: Throughput, Concurrency: 16}, 2, 128 << 10, ProtoReadRNDV, ProtoRFP},
		{"large throughput under", Set{PerfGoal: Throughput}, 2, 128 << 10, ProtoDirectWriteIMM, ProtoDirectWriteIMM},
		{"explicit protocol wins", Set{PerfGoal: Latency, Protocol: ProtoEager}, 2, 64, ProtoEager, ProtoEager},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shm := tc.set
			shm.Transport = TransportSHM
			require.Equal(t, tc.want, planFor(shm, tc.cores, tc.size).Protocol)
			for _, tr := range []Transport{TransportAuto, TransportRDMA, TransportTCP} {
				other := tc.set
				other.Transport = tr
				require.Equal(t, tc.unlessSH, planFor(other, tc.cores, tc.size).Protocol, "transport %v", tr)
			}
		})
	}
}
