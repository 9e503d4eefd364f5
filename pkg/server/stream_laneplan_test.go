//go:build cgo && linux

package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestPlanShowsWhatStreamsRan: the table Conn.Plan shows for a client
// stream is the one its lanes ran by, however its hints came (none at
// all, service level only, function level): every protocol the lanes'
// endpoints sent by is one of the table's batch rows, the large batches'
// one included, and the server's Plan is a stream's table too.
func TestPlanShowsWhatStreamsRan(t *testing.T) {
	s, _, addr := laneStreams(t)
	s.Register(&server.Service{Name: "Q", Methods: []server.Method{{Name: "plansum", Stream: stream.Client,
		HandleStream: digestStream}}})
	// A function-level protocol hint holds for batches too (the lane
	// rows); a service level without one plans read_rndv past the
	// server's buffer.
	fnLevel := &hints.Function{Name: "plansum", Stream: stream.Client, Client: hints.Set{Protocol: hints.ProtoWriteRNDV}}
	svc := &hints.Service{Name: "Q", Functions: []hints.Function{{Name: "plansum", Stream: stream.Client}}}
	for _, tc := range []struct {
		name  string
		opts  []client.Option
		hints *hints.Function
		big   hints.Protocol // the 1 MiB batch's protocol the plan shows
	}{
		{name: "no hints", big: hints.ProtoReadRNDV},
		{name: "service level", opts: []client.Option{client.WithHints(svc), client.WithServiceLevelHints()},
			hints: fnLevel, big: hints.ProtoReadRNDV},
		{name: "function level", hints: fnLevel, big: hints.ProtoWriteRNDV},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr, tc.opts...)
			m := &client.Method{Service: "Q", Name: "plansum", Stream: stream.Client, Hints: tc.hints}
			var res wiretest.EchoResult
			st, err := c.NewStream(tctx(t), m, &res)
			require.NoError(t, err)
			h := sha256.New()
			for i := range 32 {
				a := &wiretest.EchoArgs{Msg: "m", Blob: make([]byte, 200<<10)}
				a.Blob[i] = byte(i + 1)
				digestMsg(h, a)
				require.NoError(t, st.SendMsg(a))
			}
			require.NoError(t, st.CloseSend())
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			require.NotNil(t, res.Success)
			require.Equal(t, hex.EncodeToString(h.Sum(nil)), *res.Success)

			plan := c.Plan("Q:plansum")
			require.Equal(t, plan, c.Plan("plansum"), "by either name")
			require.NotNil(t, plan.StreamBatch, "a client stream's table has batch rows\n%s", plan)
			require.Equal(t, tc.big, plan.StreamBatchRowFor(1<<20).Protocol, "%s", plan)
			shown := map[string]bool{}
			for _, r := range plan.StreamBatch {
				shown[fastpath.EngineProtocol(r.Protocol).String()] = true
			}
			var st0 *client.LaneStats
			for _, ls := range c.LaneStats() {
				if ls.Function == "Q:plansum" {
					st0 = &ls
				}
			}
			require.NotNil(t, st0, "the stream ran on lanes")
			big := fastpath.EngineProtocol(tc.big).String()
			require.Positive(t, st0.Requests[big], "large batches asked for %s: %v", big, st0.Requests)
			require.Positive(t, st0.Sent[big], "large batches sent by %s: %v", big, st0.Sent)
			for p, n := range st0.Requests {
				require.True(t, n == 0 || shown[p], "%d requests asked for %s, not in the plan's batch rows\n%s", n, p, plan)
			}

			sp := s.Plan("Q:plansum", plan.Transport)
			require.Equal(t, hints.RouteLane, sp.Rows[0].Route, "the server's table is a stream's (no FLOCK)\n%s", sp)
		})
	}
}
