package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func gauge(t *testing.T, s *server.Server, name string) float64 {
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	return metricValue(mfs, name, nil)
}

// holdBudget runs a call that keeps size bytes of request memory until
// the returned function is called. It returns once the call's handler
// runs: its reply's reservation is made before that, and made later (on
// a loaded machine, after the test's next call told the method's reply
// size) it would hold that estimate too (CI, 2026-12-04).
func holdBudget(t *testing.T, s *server.Server, e *wiretest.Echo, addr string, size int) func() {
	t.Helper()
	a := dial(t, addr, client.WithConns(1))
	ctx, cancel := context.WithCancel(tctx(t))
	done := make(chan error, 1)
	go func() {
		_, err := echo(ctx, a, &wiretest.EchoArgs{Msg: "hold", Mode: wiretest.ModeWaitCtx, Blob: make([]byte, size)})
		done <- err
	}()
	require.Eventually(t, func() bool { return gauge(t, s, "hatrpc_server_request_memory_bytes") >= float64(size) },
		eventually, time.Millisecond)
	select {
	case msg := <-e.Waiting:
		require.Equal(t, "hold", msg)
	case <-tctx(t).Done():
		t.Fatal("the holding call's handler did not start")
	}
	return func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.Equal(t, "hold", <-e.Cancelled)
	}
}

// A request that does not fit the memory budget waits for memory
// (back-pressure) and is served once a call ends.
func TestMemoryBudgetBackPressure(t *testing.T) {
	s, e, addr := start(t, server.WithMemoryBudget(300<<10, 300<<10))
	release := holdBudget(t, s, e, addr, 200<<10)
	b := dial(t, addr, client.WithConns(1))
	res := make(chan error, 1)
	go func() {
		got, err := echo(tctx(t), b, &wiretest.EchoArgs{Msg: "b", Blob: []byte(strings.Repeat("x", 200<<10))})
		if err == nil && len(got) != 1+200<<10 {
			err = context.DeadlineExceeded
		}
		res <- err
	}()
	select {
	case err := <-res:
		t.Fatalf("admitted over the budget: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	require.LessOrEqual(t, gauge(t, s, "hatrpc_server_request_memory_bytes"), float64(300<<10))
	release()
	require.NoError(t, <-res)
	require.Eventually(t, func() bool { return gauge(t, s, "hatrpc_server_request_memory_bytes") == 0 },
		eventually, time.Millisecond, "every request's memory is released")
}

// With WithBusyTimeout a request that waited that long for memory gets
// "server busy"; its connection goes on where the message's length is
// known, and closes for unframed plain Thrift.
func TestMemoryBudgetBusy(t *testing.T) {
	s, e, addr := start(t, server.WithMemoryBudget(300<<10, 300<<10), server.WithBusyTimeout(20*time.Millisecond))
	release := holdBudget(t, s, e, addr, 200<<10)
	defer release()
	cases := []struct {
		name   string
		opts   []client.Option
		closed bool
	}{
		{"hatrpc", nil, false},
		{"plain-framed", []client.Option{client.WithoutUpgrade(), client.WithFramed()}, false},
		{"plain-unframed", []client.Option{client.WithoutUpgrade()}, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := dial(t, addr, append([]client.Option{client.WithConns(1)}, tc.opts...)...)
			_, err := echo(tctx(t), b, &wiretest.EchoArgs{Msg: "b", Blob: make([]byte, 200<<10)})
			if tc.closed {
				require.ErrorIs(t, err, client.ErrConnClosed)
			} else {
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae)
				require.Equal(t, proto.ExcInternalError, ae.Type)
				require.Equal(t, "server busy: request memory budget exhausted", ae.Message)
			}
			mfs, gerr := s.Registry().Gather()
			require.NoError(t, gerr)
			require.Equal(t, float64(i+1), metricValue(mfs, "hatrpc_server_rejected_total", map[string]string{"reason": "memory_budget"}))
			got, err := echo(tctx(t), b, &wiretest.EchoArgs{Msg: "small"})
			require.NoError(t, err, "the connection (or a new one) serves small calls")
			require.Equal(t, "small", got)
		})
	}
}

// A large request following a large one on its connection is charged
// before its payload is read, refused busy, its payload skipped, and the
// connection serves the next call.
//
// The budget leaves room for the 64 KiB calls' replies too: a connection
// whose last reply was large has the next one's memory reserved alike.
func TestMemoryBudgetBusyAfterLargeFrame(t *testing.T) {
	s, e, addr := start(t, server.WithMemoryBudget(400<<10, 400<<10), server.WithBusyTimeout(20*time.Millisecond))
	release := holdBudget(t, s, e, addr, 200<<10)
	defer release()
	b := dial(t, addr, client.WithConns(1))
	got, err := echo(tctx(t), b, &wiretest.EchoArgs{Msg: "fits", Blob: make([]byte, 64<<10)})
	require.NoError(t, err, "64 KiB fits beside the 200 KiB held")
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	require.Zero(t, metricValue(mfs, "hatrpc_server_rejected_total", map[string]string{"reason": "memory_budget"}))
	require.Len(t, got, 4+64<<10)
	_, err = echo(tctx(t), b, &wiretest.EchoArgs{Msg: "b", Blob: make([]byte, 210<<10)})
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	require.Equal(t, proto.ExcInternalError, ae.Type)
	require.Equal(t, "server busy: request memory budget exhausted", ae.Message)
	mfs, err = s.Registry().Gather()
	require.NoError(t, err)
	require.Equal(t, float64(1), metricValue(mfs, "hatrpc_server_rejected_total", map[string]string{"reason": "memory_budget"}))
	require.LessOrEqual(t, gauge(t, s, "hatrpc_server_request_memory_bytes"), float64(400<<10))
	got, err = echo(tctx(t), b, &wiretest.EchoArgs{Msg: "small"})
	require.NoError(t, err, "the connection serves small calls")
	require.Equal(t, "small", got)
	got, err = echo(tctx(t), b, &wiretest.EchoArgs{Msg: "again", Blob: make([]byte, 64<<10)})
	require.NoError(t, err, "and large ones that fit")
	require.Len(t, got, 5+64<<10)
}

// A request larger than the budget could never be served: it is refused
// like an oversized message, and the server serves others.
func TestMemoryBudgetTooLarge(t *testing.T) {
	_, _, addr := start(t, server.WithMemoryBudget(128<<10, 128<<10))
	c := dial(t, addr, client.WithConns(1))
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "big", Blob: make([]byte, 200<<10)})
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	require.Equal(t, proto.ExcProtocolError, ae.Type)
	require.Contains(t, ae.Message, "request larger than the memory budget")
	got, err := echo(tctx(t), dial(t, addr), &wiretest.EchoArgs{Msg: "alive", Blob: make([]byte, 100<<10)})
	require.NoError(t, err)
	require.Len(t, got, 5+100<<10)
}

// Once large requests ended and the budget is empty, memory goes back
// to the OS.
func TestMemoryGivenBackAfterLargeRequests(t *testing.T) {
	s, _, addr := start(t)
	c := dial(t, addr, client.WithConns(1))
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "big", Blob: make([]byte, 2<<20)})
	require.NoError(t, err)
	require.Len(t, got, 3+2<<20)
	require.Eventually(t, func() bool { return server.GiveBacks(s) >= 1 }, eventually, time.Millisecond)
	require.Zero(t, gauge(t, s, "hatrpc_server_request_memory_bytes"))
}
