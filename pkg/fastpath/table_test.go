//go:build cgo && linux

package fastpath

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// TestEngineProtocolTable: every concrete hint protocol maps to the engine
// protocol of the same name, each engine protocol is reached once, and
// auto (or anything out of range) is hybrid.
func TestEngineProtocolTable(t *testing.T) {
	seen := map[rdma.Protocol]bool{}
	for p := hints.ProtoEager; p <= hints.ProtoHybrid; p++ {
		e := EngineProtocol(p)
		require.Equal(t, p.String(), e.String(), "hint %v", p)
		require.False(t, seen[e], "engine protocol %v reached twice", e)
		seen[e] = true
	}
	require.Len(t, seen, rdma.NumProtocols)
	require.Equal(t, rdma.ProtoHybrid, EngineProtocol(hints.ProtoAuto))
	require.Equal(t, rdma.ProtoHybrid, EngineProtocol(hints.Protocol(99)))
	require.Equal(t, rdma.ProtoHybrid, EngineProtocol(hints.Protocol(-1)))
}

// TestPlanSideStreamProtocol: a side's StreamProtocol is its table's
// batch rows (a client stream's), and its lane rows where the table has
// none; Protocol stays the lane rows' either way.
func TestPlanSideStreamProtocol(t *testing.T) {
	for _, tr := range []hints.Transport{hints.TransportSHM, hints.TransportRDMA} {
		for _, mode := range []stream.Mode{stream.None, stream.Server, stream.Client, stream.Bidi} {
			tab := hints.TableFor(hints.Set{}, hints.Env{Side: hints.SideClient, Transport: tr, Cores: 2, Stream: mode})
			sd := PlanSide(&tab, 0)
			for _, n := range []int{0, 64, 4 << 10, hints.BufferFor(0), hints.BufferFor(0) + 1, 690 << 10} {
				require.Equal(t, EngineProtocol(tab.LaneRowFor(n).Protocol), sd.Protocol(n), "%v %v lane at %d", tr, mode, n)
				require.Equal(t, EngineProtocol(tab.StreamBatchRowFor(n).Protocol), sd.StreamProtocol(n), "%v %v batch at %d", tr, mode, n)
			}
			want := rdma.ProtoDirectWriteIMM
			if mode.ClientSends() {
				want = rdma.ProtoReadRNDV
			}
			require.Equal(t, want, sd.StreamProtocol(690<<10), "%v %v", tr, mode)
		}
	}
}
