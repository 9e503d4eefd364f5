//go:build cgo && linux

package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestLaneSessionEndsWithItsConnection: the fast-path session a connection
// became (a lane, or a FLOCK handle's link) is torn down when its TCP
// connection closes: the lane or FLOCK peer is gone from the metrics, its
// share of the budgets is given back and the connection leaves the
// server's books.
func TestLaneSessionEndsWithItsConnection(t *testing.T) {
	cases := []struct {
		name      string
		fn        *hints.Function
		lanes     int
		peers     int
		gauge     string
		fromBytes bool
	}{
		{"lane", &hints.Function{Name: "echo"}, 1, 0, "hatrpc_server_lanes", true},
		{"flock", &hints.Function{Name: "echo",
			Client: hints.Set{QPSharing: hints.SwitchOn, PayloadSize: 64}, Server: hints.Set{PayloadSize: 64}},
			0, 1, "flock_peers", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, addr := start(t, server.WithRDMA(fastpathtest.Provider()))
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
			defer cancel()
			c, err := client.Dial(ctx, addr)
			require.NoError(t, err)
			m := &client.Method{Service: "Echo", Name: "echo", Hints: tc.fn}
			for range 3 {
				var res wiretest.EchoResult
				require.NoError(t, c.Call(ctx, m, &wiretest.EchoArgs{Msg: "x"}, &res))
				require.Equal(t, "x", *res.Success)
			}
			lanes, peers, bytes, pending := server.FastPathInUse(s)
			require.Equal(t, tc.lanes, lanes)
			require.Equal(t, tc.peers, peers)
			require.Equal(t, tc.fromBytes, bytes > 0, "registered bytes held: %d", bytes)
			require.Zero(t, pending)
			require.Len(t, server.Conns(s), 2, "the Conn's session and the fast path's link")
			gauge := func() float64 {
				mfs, err := s.Registry().Gather()
				require.NoError(t, err)
				return metricValue(mfs, tc.gauge, nil)
			}
			require.Equal(t, 1.0, gauge())

			require.NoError(t, c.Close())
			require.Eventually(t, func() bool {
				lanes, peers, bytes, pending := server.FastPathInUse(s)
				return lanes == 0 && peers == 0 && bytes == 0 && pending == 0 &&
					len(server.Conns(s)) == 0 && gauge() == 0
			}, eventually, time.Millisecond, "the fast-path session outlived its connection")
		})
	}
}
