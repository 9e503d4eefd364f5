//go:build cgo && linux

package client_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestPlanIsWhatLanesSend: the table Conn.Plan returns is the one the lane
// runs. A small call (a frame well under 4 KiB) and a large one (over the
// eager threshold) are each counted under their row's protocol; the tiny
// latency call on shm, which the planner once sent by RFP on paper, is
// direct_write_imm in both.
func TestPlanIsWhatLanesSend(t *testing.T) {
	cases := []struct {
		name string
		set  hints.Set
	}{
		{"latency", hints.Set{QPSharing: hints.SwitchOff}},
		{"hybrid", hints.Set{Protocol: hints.ProtoHybrid, QPSharing: hints.SwitchOff}},
		{"throughput over", hints.Set{PerfGoal: hints.Throughput, Concurrency: 64, QPSharing: hints.SwitchOff}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := laneServer(t)
			c := dial(t, ts.addr)
			m := methodWith(tc.set)
			want := map[string]uint64{}
			for _, n := range []int{10, 8 << 10} {
				args := &wiretest.EchoArgs{Msg: strings.Repeat("x", n)}
				var res wiretest.EchoResult
				require.NoError(t, c.Call(tctx(t), m, args, &res))
				plan := c.Plan("Echo:echo")
				require.Equal(t, fastpathtest.Transport(), plan.Transport.String())
				// The frame is the message plus headers under 100 bytes:
				// its row is that of n+100 as of n.
				row := plan.RowFor(n + 100)
				require.Equal(t, row, plan.RowFor(n), "n and its frame share a row")
				require.Equal(t, hints.RouteLane, row.Route)
				want[fastpath.EngineProtocol(row.Protocol).String()]++
			}
			var got map[string]uint64
			for _, st := range c.LaneStats() {
				if st.Function == "Echo:echo" {
					got = st.Requests
				}
			}
			require.Equal(t, want, got)
			if tc.name == "latency" && fastpathtest.Transport() == "shm" {
				plan := c.Plan("Echo:echo")
				require.Equal(t, hints.ProtoDirectWriteIMM, plan.RowFor(64).Protocol)
			}
		})
	}
}
