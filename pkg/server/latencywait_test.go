package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestLatencyExcludesSlotWait: a TCP call's handler time starts when its
// frame is parsed (the clock read that also gives its deadline) unless it
// then waits, here for the only call slot, held by a call that runs until
// its 500 ms deadline: the waiting call's recorded latency is its
// handler's, not the wait. A call that counted the wait would land at
// ~0.5 s; the bound checked is the histogram's 0.12 s bucket.
func TestLatencyExcludesSlotWait(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, e, addr := start(t, server.WithRegistry(reg), server.WithMaxConcurrentCalls(1))
	c := dial(t, addr)
	// A first call tells the server the reply's size: later calls do not
	// wait for a cold call's place (replygate.go), only for the slot.
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "warm"})
	require.NoError(t, err)
	slowCtx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	slow := make(chan error, 1)
	go func() {
		_, err := echo(slowCtx, c, &wiretest.EchoArgs{Msg: "slow", Mode: wiretest.ModeWaitCtx})
		slow <- err
	}()
	select {
	case <-e.Waiting: // the slot is taken
	case <-time.After(testenv.HangGuard(5 * time.Second)):
		t.Fatal("the slow call did not start")
	}
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "queued"})
	require.NoError(t, err)
	require.Equal(t, "queued", got)
	require.ErrorIs(t, <-slow, context.DeadlineExceeded)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "hatrpc_server_call_duration_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		require.EqualValues(t, 3, h.GetSampleCount())
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() > 0.1 && b.GetUpperBound() < 0.2 {
				require.EqualValues(t, 2, b.GetCumulativeCount(), "the warm call and the queued one, without its wait")
				return
			}
		}
		t.Fatal("no bucket between 0.1 and 0.2 s")
	}
	t.Fatal("no call duration histogram")
}
