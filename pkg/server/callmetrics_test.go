package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// callRoute is a way calls reach the server, for the exactness tests of
// its call metrics: the server's and the client's options and the method
// the client calls.
type callRoute struct {
	name   string
	server []server.Option
	dial   []client.Option
	method *client.Method
	// went, if set, checks that a connection's calls (calls of them)
	// took the route.
	went func(t *testing.T, c *client.Conn, calls int)
}

// callRoutes: TCP and plain Thrift here; the lanes and FLOCK where cgo
// builds them (callmetrics_lanes_test.go).
var callRoutes = []callRoute{
	{name: "tcp", method: wiretest.EchoMethod},
	{name: "thrift", dial: []client.Option{client.WithoutUpgrade()}, method: wiretest.EchoMethod},
}

// TestCallMetricsSumAcrossConns: the calls of many connections at once,
// more connections than the server's metric shards on a small host, sum
// exactly in every per-call series: each adds what one call alone adds.
func TestCallMetricsSumAcrossConns(t *testing.T) {
	const (
		conns   = 12
		callers = 4 // per connection
		each    = 25
	)
	for _, tc := range callRoutes {
		t.Run(tc.name, func(t *testing.T) {
			s, _, addr := start(t, tc.server...)
			cs := make([]*client.Conn, conns)
			for i := range cs {
				cs[i] = dial(t, addr, tc.dial...)
			}
			call := func(ctx context.Context, c *client.Conn) error {
				var res wiretest.EchoResult
				return c.Call(ctx, tc.method, &wiretest.EchoArgs{Msg: "metrics"}, &res)
			}
			series := []string{
				"hatrpc_server_calls_total", "hatrpc_server_call_duration_seconds",
				"hatrpc_server_request_bytes_total", "hatrpc_server_reply_bytes_total",
			}
			fn := map[string]string{"function": "echo"}
			scrape := func() map[string]float64 {
				t.Helper()
				mfs, err := s.Registry().Gather()
				require.NoError(t, err)
				out := map[string]float64{}
				for _, n := range series {
					out[n] = metricValue(mfs, n, fn)
				}
				out["ok"] = metricValue(mfs, "hatrpc_server_handled_total", map[string]string{"function": "echo", "outcome": "ok"})
				out["in_flight"] = metricValue(mfs, "hatrpc_server_in_flight", fn)
				return out
			}
			// A reply's bytes are counted once it is out, maybe just after
			// its client has it, and a lane files a call's end then too
			// (rdma.AfterReply): so wait for what is known. From zero, one
			// call's counts are all there once each is above zero.
			var one map[string]float64
			require.NoError(t, call(tctx(t), cs[0]))
			require.Eventually(t, func() bool {
				one = scrape()
				for _, k := range append(series, "ok") {
					if one[k] == 0 {
						return false
					}
				}
				return one["in_flight"] == 0
			}, eventually, time.Millisecond)
			for _, c := range cs[1:] { // every connection's lanes or sessions in place
				require.NoError(t, call(tctx(t), c))
			}
			var wg sync.WaitGroup
			errs := make(chan error, conns*callers)
			for _, c := range cs {
				for range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range each {
							if err := call(tctx(t), c); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			const n = conns + conns*callers*each
			var after map[string]float64
			exact := func() bool {
				after = scrape()
				for _, k := range append(series, "ok") {
					if after[k] != n*one[k] {
						return false
					}
				}
				return after["in_flight"] == 0
			}
			assert.Eventually(t, exact, eventually, time.Millisecond) // the loop below says what differs
			for _, k := range append(series, "ok") {
				require.Equal(t, n*one[k], after[k], "%s: %v a call", k, one[k])
			}
			if tc.went != nil {
				tc.went(t, cs[1], callers*each+1)
			}
		})
	}
}

// TestCallMetricsOutliveConn: what a connection's calls counted stays in
// the series once it closed, and later connections add to it.
func TestCallMetricsOutliveConn(t *testing.T) {
	for _, tc := range callRoutes {
		t.Run(tc.name, func(t *testing.T) {
			s, _, addr := start(t, tc.server...)
			value := func(name string, labels map[string]string) float64 {
				t.Helper()
				mfs, err := s.Registry().Gather()
				require.NoError(t, err)
				return metricValue(mfs, name, labels)
			}
			fn := map[string]string{"function": "echo"}
			calls := func(c *client.Conn, n int) {
				t.Helper()
				for range n {
					var res wiretest.EchoResult
					require.NoError(t, c.Call(tctx(t), tc.method, &wiretest.EchoArgs{Msg: "gone"}, &res))
				}
			}
			ended := func(n float64) {
				t.Helper()
				require.Eventually(t, func() bool {
					return value("hatrpc_server_in_flight", fn) == 0 && value("hatrpc_server_call_duration_seconds", fn) == n
				}, eventually, time.Millisecond)
				require.Equal(t, n, value("hatrpc_server_calls_total", fn))
				require.Equal(t, n, value("hatrpc_server_handled_total", map[string]string{"function": "echo", "outcome": "ok"}))
			}
			a := dial(t, addr, tc.dial...)
			calls(a, 7)
			ended(7)
			reqBytes := value("hatrpc_server_request_bytes_total", fn)
			require.NoError(t, a.Close())
			require.Eventually(t, func() bool { return value("hatrpc_server_connections", nil) == 0 },
				eventually, time.Millisecond, "the connection outlived its client")
			ended(7)
			require.Equal(t, reqBytes, value("hatrpc_server_request_bytes_total", fn))
			calls(dial(t, addr, tc.dial...), 3)
			ended(10)
		})
	}
}
