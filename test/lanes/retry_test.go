package lanes_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestFastPathRetriedAfterFallback: a budget refusal is transient. An auto
// client refused because another client holds the only lane carries its
// calls over TCP, and once that lane is given back it is on the fast path
// again by itself (re-tried with backoff), without a new Conn; it fell
// back, and counted, once.
func TestFastPathRetriedAfterFallback(t *testing.T) {
	srv, addr := mixServer(t, false, server.WithLaneLimits(server.LaneLimits{Lanes: 1}))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	ping := func(c *client.Conn) {
		t.Helper()
		got, err := mix.NewMixClient(c).Ping(ctx, []byte("ping"))
		require.NoError(t, err)
		require.Equal(t, "ping", string(got))
	}
	lanes := func(c *client.Conn) int {
		n := 0
		for _, st := range c.LaneStats() {
			n += st.Lanes
		}
		return n
	}

	holder, err := client.Dial(ctx, addr, client.WithRDMA(fastProvider))
	require.NoError(t, err)
	ping(holder)
	require.Equal(t, 1, lanes(holder), "the first client holds the only lane")

	before := client.FastPathFallbacks()
	c, err := client.Dial(ctx, addr, client.WithRDMA(fastProvider),
		client.WithFastPathRetry(time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	ping(c)
	require.ErrorIs(t, c.FastPathErr(), client.ErrFastPathSetup)
	assert.Contains(t, c.FastPathErr().Error(), "fast-path budget exhausted")
	assert.Equal(t, 0, lanes(c))
	tcpCalls := serverMetric(t, srv, "hatrpc_server_calls_total", "tcp")
	require.GreaterOrEqual(t, tcpCalls, 1.0)

	// While the budget is held, re-tries keep failing and calls keep
	// succeeding over TCP.
	for i := 0; i < 5; i++ {
		ping(c)
	}
	assert.Equal(t, 0, lanes(c))

	require.NoError(t, holder.Close())
	require.Eventually(t, func() bool { return serverMetric(t, srv, "hatrpc_server_lanes") == 0 },
		testenv.HangGuard(time.Minute), time.Millisecond, "the server did not release the first client's lane")
	// Every call succeeds; within a bounded number of them (the backoff is
	// at most 20 ms) the client is back on a lane.
	require.Eventually(t, func() bool {
		ping(c)
		return lanes(c) == 1
	}, testenv.HangGuard(time.Minute), time.Millisecond, "the client never re-tried the fast path")
	require.NoError(t, c.FastPathErr())
	assert.Equal(t, before+1, client.FastPathFallbacks(), "one fallback counted per Conn")
	fast := serverMetric(t, srv, "hatrpc_server_calls_total") - serverMetric(t, srv, "hatrpc_server_calls_total", "tcp")
	ping(c)
	assert.Equal(t, fast+1, serverMetric(t, srv, "hatrpc_server_calls_total")-serverMetric(t, srv, "hatrpc_server_calls_total", "tcp"),
		"the call after the re-try went by the fast path")
}
