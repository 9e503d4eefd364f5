//go:build cgo && linux

package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestHintTimeoutUnderCallerDeadline: a function's timeout hint bounds its
// calls on top of the caller's deadline, on every route: the handler sees
// the hint's deadline, not the caller's longer one, and a call the handler
// holds ends at the hint's deadline while the caller's context is still
// live. (The hint used to apply only to a context without a deadline.)
func TestHintTimeoutUnderCallerDeadline(t *testing.T) {
	ts := serve(t, "", server.WithRDMA(fastpathtest.Provider()))
	cases := []struct {
		name  string
		set   hints.Set
		opts  []client.Option
		route string // the LaneStats request key the calls count under; "" for TCP
	}{
		{"tcp", hints.Set{}, []client.Option{client.WithRDMA("off")}, ""},
		{"lane", hints.Set{}, nil, "lane"},
		{"flock", hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput}, nil, "flock"},
	}
	const long, hint = 10 * time.Minute, time.Minute
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts.addr, tc.opts...)
			drain(ts.echo.Deadlines)
			mk := func(d time.Duration) *client.Method {
				set := tc.set
				set.Timeout = d
				return &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo", Client: set}}
			}
			ctx, cancel := context.WithTimeout(context.Background(), long)
			defer cancel()

			var res wiretest.EchoResult
			require.NoError(t, c.Call(ctx, mk(hint), &wiretest.EchoArgs{Msg: "x"}, &res))
			require.Equal(t, "x", *res.Success)
			left := recvWithin(t, ts.echo.Deadlines, time.Minute, "the handler saw no deadline")
			require.LessOrEqual(t, left, hint, "the handler got the hint's deadline, not the caller's %v", long)
			require.Greater(t, left, time.Duration(0))
			if tc.route != "" {
				requireRoute(t, c, tc.route)
			}

			// A held call ends at the hint's deadline (short here), not
			// the caller's.
			done := make(chan error, 1)
			go func() {
				done <- c.Call(ctx, mk(50*time.Millisecond), &wiretest.EchoArgs{Msg: "held", Mode: wiretest.ModeWaitCtx}, &wiretest.EchoResult{})
			}()
			err := recvWithin(t, done, 2*time.Minute, "the call outlived its timeout hint")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, ctx.Err(), "the caller's deadline has not passed")
		})
	}
}

// requireRoute asserts c's calls ran on the fast path: under FLOCK when
// route is "flock", on a dedicated lane otherwise.
func requireRoute(t *testing.T, c *client.Conn, route string) {
	t.Helper()
	st := c.LaneStats()
	require.Len(t, st, 1)
	n := uint64(0)
	for k, v := range st[0].Requests {
		if (k == "flock") == (route == "flock") {
			n += v
		}
	}
	require.NotZero(t, n, "calls on route %s: %v", route, st[0].Requests)
}

func drain(ch chan time.Duration) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
