package cluster

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store"
	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store/storeserver"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// storeHandler counts the calls it serves. incr blocks until the call's
// context ends while block is set, so a test can hold calls in flight on
// a server it is about to kill.
type storeHandler struct {
	gets, incrs, blobs, slows atomic.Int64
	block                     atomic.Bool
	entered                   chan struct{} // one send per blocked incr
	release                   chan struct{} // closing it lets blocked incrs return
	hang                      chan struct{} // get blocks until closed or ctx ends, when non-nil
	unavailable               atomic.Bool   // get answers codes.Unavailable
}

func newStoreHandler() *storeHandler {
	return &storeHandler{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func (h *storeHandler) Get(ctx context.Context, key string) (string, error) {
	h.gets.Add(1)
	if key == "missing" {
		return "", &store.NotFound{Key: key}
	}
	if h.unavailable.Load() {
		return "", status.Error(codes.Unavailable, "draining")
	}
	if h.hang != nil {
		select {
		case <-h.hang:
		case <-ctx.Done():
			// The deadline travels with the call: answering now
			// could still beat the client's own timer.
			return "", ctx.Err()
		}
	}
	return "v:" + key, nil
}

func (h *storeHandler) Slow(ctx context.Context, key string) (string, error) {
	h.slows.Add(1)
	<-ctx.Done()
	return "", ctx.Err()
}

func (h *storeHandler) Incr(ctx context.Context, key string) (int64, error) {
	n := h.incrs.Add(1)
	if h.block.Load() {
		h.entered <- struct{}{}
		select {
		case <-h.release:
			return n, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return n, nil
}

func (h *storeHandler) Blob(ctx context.Context, size int32) ([]byte, error) {
	h.blobs.Add(1)
	return make([]byte, size), nil
}

// testServer is one Store server that a test can kill and restart on
// the same address.
type testServer struct {
	t      testing.TB
	h      *storeHandler
	addr   string
	mu     sync.Mutex
	srv    *server.Server
	served chan error
	opts   []server.Option
}

func startServer(t testing.TB, h *storeHandler, opts ...server.Option) *testServer {
	t.Helper()
	return startServerAt(t, h, "127.0.0.1:0", opts...)
}

// startServerAt is startServer listening on addr (a unix socket too).
func startServerAt(t testing.TB, h *storeHandler, addr string, opts ...server.Option) *testServer {
	t.Helper()
	ts := &testServer{t: t, h: h, addr: addr, opts: opts}
	ts.start()
	t.Cleanup(ts.kill)
	return ts
}

func (ts *testServer) start() {
	ts.t.Helper()
	var ln net.Listener
	var err error
	// A restarted server may find its port busy for a moment.
	for range 100 {
		if ln, err = server.Listen(ts.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(ts.t, err)
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, ts.opts...)...)
	storeserver.RegisterStore(s, ts.h)
	ts.mu.Lock()
	if _, ok := ln.Addr().(*net.TCPAddr); ok {
		ts.addr = ln.Addr().String()
	}
	ts.srv, ts.served = s, make(chan error, 1)
	ts.mu.Unlock()
	go func() { ts.served <- s.Serve(ln) }()
}

// kill closes the server at once: connections are cut and handlers'
// contexts cancelled, as when its process dies.
func (ts *testServer) kill() {
	ts.mu.Lock()
	s, served := ts.srv, ts.served
	ts.srv = nil
	ts.mu.Unlock()
	if s == nil {
		return
	}
	s.Close()
	select {
	case <-served:
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		panic("Serve did not return")
	}
}

// tctx is a test's hang guard, scaled in the emulated guest
// (testenv.HangGuard); a test that expects its deadline to pass builds its
// own context.
func tctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(d))
	t.Cleanup(cancel)
	return ctx
}

// fastOptions keep probes and breakers quick so tests need not wait for
// production intervals; every wait in the tests is a condition polled
// under a generous bound, never a fixed sleep.
func fastOptions(extra ...Option) []Option {
	return append([]Option{
		WithProbeBackoff(Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Multiplier: 2, Jitter: 0.2}),
		WithRetryBackoff(Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond, Multiplier: 2, Jitter: 0.5}),
		WithBreaker(BreakerSettings{Failures: 3, OpenFor: 100 * time.Millisecond, HalfOpenCalls: 1}),
	}, extra...)
}

func dialCluster(t testing.TB, addrs []string, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(tctx(t, 10*time.Second), Static(addrs...), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func statusOf(c *Client, addr string) ServerStatus {
	for _, s := range c.Servers() {
		if s.Addr == addr {
			return s
		}
	}
	return ServerStatus{}
}

// serversAre reports whether c lists exactly addrs (in any order), all up.
func serversAre(c *Client, addrs ...string) func() bool {
	want := normalize(addrs)
	return func() bool {
		ss := c.Servers()
		if len(ss) != len(want) {
			return false
		}
		for i, s := range ss {
			if s.Addr != want[i] || !s.Up {
				return false
			}
		}
		return true
	}
}
