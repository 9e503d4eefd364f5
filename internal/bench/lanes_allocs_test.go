//go:build cgo && linux

package bench

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestLanesEchoAllocs: a 64 B echo over engine lanes as atb's
// hatrpc-lanes makes it (server and client in this process) allocates
// nothing a call: the generated code reuses the lane's arguments and
// result, borrow_args decodes the payload in the lease and borrow_ctx
// lets the lane reuse the call's context (without it, 72 bytes a call in
// blocks of 14, a server collection every ~60,000 calls, each stalling
// 5-10 calls of a 64 B lane run for 0.1-0.7 ms: docs/performance/history.md,
// "The tuner's tick in the lanes' tail"). testing.AllocsPerRun would
// round the runtime's and the tuner's occasional allocations to 0, so
// this counts mallocs and bytes over many calls.
func TestLanesEchoAllocs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := Hat{Lanes: true}
	srv, err := h.Serve(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Stop(ctx)) }()
	cs, err := h.Callers(ctx, srv.Addr(), 1)
	require.NoError(t, err)
	defer CloseAll(cs)
	e := newEchoer(cs[0], Payload(64))
	calls := func(n int) {
		for range n {
			if err := e.call(ctx); err != nil {
				require.NoError(t, err)
			}
		}
	}
	calls(2000) // lanes open, buffers and pools filled, the tuner started

	const n = 20000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	calls(n)
	runtime.ReadMemStats(&after)

	var sent uint64
	for _, s := range cs[0].(hatBorrowCaller).conn.LaneStats() {
		for _, k := range s.Requests {
			sent += k
		}
	}
	require.GreaterOrEqual(t, sent, uint64(n), "every call went over lanes")
	mallocs := float64(after.Mallocs-before.Mallocs) / n
	bytes := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("per call: %.4f mallocs, %.1f bytes", mallocs, bytes)
	if testenv.Race {
		// The race detector's build drops pooled values (codecs,
		// buffers, call values) at random: ~0.5 allocations a call.
		require.Less(t, mallocs, 2.5, "beyond what the race detector's pools drop")
		return
	}
	// Room for the runtime's and the tuner's own now and then (~60 in
	// 20,000 calls); one context a call would be 72 bytes.
	require.LessOrEqual(t, mallocs, 0.015, "mallocs per call")
	require.LessOrEqual(t, bytes, 16.0, "bytes per call")
}
