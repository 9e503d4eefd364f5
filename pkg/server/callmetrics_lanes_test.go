//go:build cgo && linux

package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
)

// The lane routes of the call metrics tests: dedicated lanes (their
// meters count) and FLOCK (its session's calls count as TCP's do).
func init() {
	lanes := []server.Option{server.WithRDMA(fastpathtest.Provider())}
	callRoutes = append(callRoutes,
		callRoute{name: "lane", server: lanes,
			method: &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo"}},
			went: func(t *testing.T, c *client.Conn, calls int) {
				var n uint64
				for _, st := range c.LaneStats() {
					for _, k := range st.Requests {
						n += k
					}
				}
				require.Equal(t, uint64(calls), n, "calls by lane")
			}},
		callRoute{name: "flock", server: lanes,
			method: &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo",
				Client: hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64}}},
			went: func(t *testing.T, c *client.Conn, calls int) {
				var n uint64
				for _, st := range c.LaneStats() {
					n += st.Requests["flock"]
				}
				require.Equal(t, uint64(calls), n, "calls by FLOCK")
			}},
	)
}
