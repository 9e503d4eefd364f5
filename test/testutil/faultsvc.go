package testutil

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// SleepHandler implements the ping and sleep methods of the Interop
// service and records what happened to each sleep: the fault tests need to
// know that a call is in flight and whether the runtime cancelled it.
type SleepHandler struct {
	Started   chan int32 // every sleep that began sends its ms here (buffered)
	active    atomic.Int32
	finished  atomic.Int32
	cancelled atomic.Int32
}

// NewSleepHandler returns a handler whose Started channel holds up to 1024
// unread notifications; more would block the handlers.
func NewSleepHandler() *SleepHandler {
	return &SleepHandler{Started: make(chan int32, 1024)}
}

// Active is the number of sleep calls running now.
func (h *SleepHandler) Active() int { return int(h.active.Load()) }

// Cancelled is the number of sleep calls that ended because their context
// was cancelled before the sleep was over.
func (h *SleepHandler) Cancelled() int { return int(h.cancelled.Load()) }

// Finished is the number of sleep calls that ran to completion.
func (h *SleepHandler) Finished() int { return int(h.finished.Load()) }

func (h *SleepHandler) sleep(ctx context.Context, args proto.Struct) (proto.Struct, error) {
	ms := args.(*I32Struct).V
	h.active.Add(1)
	defer h.active.Add(-1)
	h.Started <- ms
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		h.finished.Add(1)
		return &I32Struct{ID: 0, V: ms, Set: true}, nil
	case <-ctx.Done():
		h.cancelled.Add(1)
		return nil, ctx.Err()
	}
}

// WaitStarted waits for the next sleep call to begin; timeout is a hang
// guard, scaled (testenv.HangGuard).
func (h *SleepHandler) WaitStarted(t testing.TB, timeout time.Duration) int32 {
	t.Helper()
	timeout = testenv.HangGuard(timeout)
	select {
	case ms := <-h.Started:
		return ms
	case <-time.After(timeout):
		require.FailNow(t, "timeout", "no sleep call started within %v", timeout)
		return 0
	}
}

// SleepService is the ping + sleep subset of the Interop service built
// directly on the server.Service contract, so the fault tests exercise the
// runtime without depending on generated code.
func SleepService(h *SleepHandler) *server.Service {
	empty := func() proto.Struct { return &EmptyStruct{} }
	return &server.Service{Name: "Interop", Methods: []server.Method{
		{Name: "ping", NewArgs: empty, Handle: func(context.Context, proto.Struct) (proto.Struct, error) {
			return &EmptyStruct{}, nil
		}},
		{Name: "sleep", NewArgs: func() proto.Struct { return &I32Struct{ID: 1} }, Handle: h.sleep},
	}}
}

// Running is a HatRPC server started by StartServer.
type Running struct {
	Srv     *server.Server
	Addr    string
	served  chan error
	once    sync.Once
	stopped atomic.Bool
	err     error
}

// Stop stops the server once, with Shutdown(ctx) when graceful is set and
// Close otherwise, and waits for Serve to return ErrServerClosed.
func (r *Running) Stop(t testing.TB, graceful bool, timeout time.Duration) error {
	t.Helper()
	r.once.Do(func() {
		r.stopped.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if graceful {
			r.err = r.Srv.Shutdown(ctx)
		} else {
			r.err = r.Srv.Close()
		}
		select {
		case err := <-r.served:
			require.True(t, errors.Is(err, server.ErrServerClosed), "Serve returned %v", err)
		case <-time.After(timeout + testenv.HangGuard(5*time.Second)):
			require.FailNow(t, "timeout", "Serve did not return after stop")
		}
	})
	return r.err
}

// StartServer serves the given services on 127.0.0.1 and stops the server
// when the test ends.
func StartServer(t testing.TB, svcs []*server.Service, opts ...server.Option) *Running {
	t.Helper()
	return StartServerWith(t, func(srv *server.Server) {
		for _, s := range svcs {
			srv.Register(s)
		}
	}, opts...)
}

// StartServerWith is StartServer with a registration callback, which is
// how generated code registers (RegisterXxx(srv, handler)).
func StartServerWith(t testing.TB, register func(*server.Server), opts ...server.Option) *Running {
	t.Helper()
	// Server logs go to the test's output, so they show with -v or on failure only.
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	srv := server.New(append([]server.Option{server.WithLogger(logger)}, opts...)...)
	register(srv)
	ln := ListenLocal(t)
	r := &Running{Srv: srv, Addr: ln.Addr().String(), served: make(chan error, 1)}
	go func() { r.served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		// A test that stopped the server itself already judged the result.
		if !r.stopped.Load() {
			require.NoError(t, r.Stop(t, false, 10*time.Second))
		}
	})
	return r
}

// DialRaw opens a bare TCP connection for byte-level tests.
func DialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testenv.HangGuard(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Conns reads the server's open-connection gauge.
func (r *Running) Conns(t testing.TB) int {
	t.Helper()
	mfs, err := r.Srv.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "hatrpc_server_connections" {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	require.FailNow(t, "no hatrpc_server_connections metric")
	return 0
}

// WaitConns polls the connection gauge until cond holds or timeout passes
// and returns the last value. timeout is a hang guard, scaled
// (testenv.HangGuard); the caller asserts on the value.
func (r *Running) WaitConns(t testing.TB, cond func(n int) bool, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(testenv.HangGuard(timeout))
	for {
		n := r.Conns(t)
		if cond(n) || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SleepMethod and PingMethod describe the Interop methods SleepService
// serves, for calls through a bare client.Conn.
var (
	SleepMethod = &client.Method{Service: "Interop", Name: "sleep"}
	PingMethod  = &client.Method{Service: "Interop", Name: "ping"}
)

// HatSleep calls sleep(ms) through a HatRPC connection.
func HatSleep(ctx context.Context, c *client.Conn, ms int32) (int32, error) {
	res := &I32Struct{ID: 0}
	if err := c.Call(ctx, SleepMethod, &I32Struct{ID: 1, V: ms, Set: true}, res); err != nil {
		return 0, err
	}
	if !res.Set {
		return 0, errors.New("sleep: reply without result")
	}
	return res.V, nil
}
