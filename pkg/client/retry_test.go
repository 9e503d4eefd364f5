package client_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// flaky decides each call's fate by its number (1, 2, ...): the first
// unavailable calls fail with codes.Unavailable, the next stall ones wait
// until their context ends (hedge and transport tests), the rest run.
type flaky struct {
	calls       atomic.Int64
	unavailable int64
	stall       int64
	arrived     chan int64 // stalled calls, as they arrive
	cancelled   chan int64 // stalled calls whose context ended
	release     chan struct{}
}

func newFlaky(t *testing.T, unavailable, stall int64) *flaky {
	f := &flaky{unavailable: unavailable, stall: unavailable + stall,
		arrived: make(chan int64, 16), cancelled: make(chan int64, 16), release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) })
	return f
}

func (f *flaky) intercept(ctx context.Context, _ *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
	n := f.calls.Add(1)
	switch {
	case n <= f.unavailable:
		return nil, status.Error(codes.Unavailable, "warming up")
	case n <= f.stall:
		f.arrived <- n
		select {
		case <-ctx.Done():
			f.cancelled <- n
			return nil, ctx.Err()
		case <-f.release:
			return nil, status.Error(codes.Internal, "released")
		}
	}
	return next(ctx, args)
}

// events records a Conn's retry events by kind.
type events struct {
	mu sync.Mutex
	n  map[client.RetryKind]int
}

func (e *events) observe(ev client.RetryEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[client.RetryKind]int{}
	}
	e.n[ev.Kind]++
}

func (e *events) count(k client.RetryKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[k]
}

var (
	idemEcho = &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo",
		Client: hints.Set{Idempotent: true, Retries: 3}}}
	plainEcho = &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo"}}
	// quick pauses: the tests count attempts, they do not time them.
	quickBackoff = client.WithRetryBackoff(client.Backoff{Initial: time.Microsecond, Max: time.Microsecond, Multiplier: 1})
)

func callEcho(ctx context.Context, c *client.Conn, m *client.Method) error {
	var res wiretest.EchoResult
	if err := c.Call(ctx, m, &wiretest.EchoArgs{Msg: "hi"}, &res); err != nil {
		return err
	}
	if res.Success == nil || *res.Success != "hi" {
		return assert.AnError
	}
	return nil
}

// An idempotent call that fails with Unavailable is sent again and
// succeeds; a call of another function fails at once.
func TestRetryUnavailable(t *testing.T) {
	cases := []struct {
		name    string
		m       *client.Method
		fail    int64
		ctxOpts []client.CallOption
		calls   int64 // the server saw
		ok      bool
		retries int
	}{
		{"idempotent", idemEcho, 2, nil, 3, true, 2},
		{"idempotent, retries run out", idemEcho, 5, nil, 4, false, 3},
		{"not idempotent", plainEcho, 2, nil, 1, false, 0},
		{"not idempotent, Retries option", plainEcho, 2, []client.CallOption{client.Retries(5)}, 1, false, 0},
		{"NoRetry", idemEcho, 2, []client.CallOption{client.NoRetry()}, 1, false, 0},
		{"Retries(1)", idemEcho, 2, []client.CallOption{client.Retries(1)}, 2, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlaky(t, tc.fail, 0)
			ts := serve(t, "", server.WithInterceptors(f.intercept))
			var ev events
			c := dial(t, ts.addr, quickBackoff, client.WithRetryObserver(ev.observe))
			ctx := tctx(t)
			if tc.ctxOpts != nil {
				ctx = client.WithCallOptions(ctx, tc.ctxOpts...)
			}
			err := callEcho(ctx, c, tc.m)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
				require.EqualError(t, err, "status Unavailable: warming up")
			}
			assert.Equal(t, tc.calls, f.calls.Load())
			assert.Equal(t, tc.retries, ev.count(client.Retried))
		})
	}
}

// A borrowed call is retried the same way; its borrower runs once, on
// the answer that succeeded.
func TestRetryBorrowed(t *testing.T) {
	f := newFlaky(t, 1, 0)
	ts := serve(t, "", server.WithInterceptors(f.intercept))
	c := dial(t, ts.addr, quickBackoff)
	var res wiretest.EchoResult
	uses := 0
	err := c.CallBorrowed(tctx(t), idemEcho, &wiretest.EchoArgs{Msg: "b"}, &res, func() error {
		uses++
		require.Equal(t, "b", *res.Success)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, uses)
	assert.Equal(t, int64(2), f.calls.Load())
}

// A call whose connection breaks under it is retried on a new connection
// when its function is idempotent, and fails with the connection error
// otherwise.
func TestRetryTransportError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     *client.Method
		calls int64
	}{{"idempotent", idemEcho, 2}, {"not idempotent", plainEcho, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlaky(t, 0, 1)
			ts := serve(t, "", server.WithInterceptors(f.intercept))
			var mu sync.Mutex
			var conns []net.Conn
			dialer := func(ctx context.Context, addr string) (net.Conn, error) {
				nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				if err == nil {
					mu.Lock()
					conns = append(conns, nc)
					mu.Unlock()
				}
				return nc, err
			}
			c := dial(t, ts.addr, quickBackoff, client.WithConns(1), client.WithDialer(dialer))
			done := make(chan error, 1)
			go func() { done <- callEcho(tctx(t), c, tc.m) }()
			recv(t, f.arrived) // the first call runs on the server: break its connection
			mu.Lock()
			for _, nc := range conns {
				nc.Close()
			}
			mu.Unlock()
			err := recv(t, done)
			if tc.calls == 2 {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, client.ErrConnClosed)
				require.Equal(t, codes.Unavailable, status.Code(err))
			}
			assert.Equal(t, tc.calls, f.calls.Load())
		})
	}
}

// The retry budget: every call deposits 0.2 of a retry, so of ten calls
// to a server that fails them all, the fifth and the tenth may retry
// once; every other retry is refused (throttled).
func TestRetryBudgetExhausted(t *testing.T) {
	f := newFlaky(t, 1<<40, 0)
	ts := serve(t, "", server.WithInterceptors(f.intercept))
	var ev events
	c := dial(t, ts.addr, quickBackoff, client.WithRetryBudget(0.2, 0), client.WithRetryObserver(ev.observe))
	for range 10 {
		require.Equal(t, codes.Unavailable, status.Code(callEcho(tctx(t), c, idemEcho)))
	}
	assert.Equal(t, int64(12), f.calls.Load())
	assert.Equal(t, 2, ev.count(client.Retried))
	assert.Equal(t, 10, ev.count(client.Throttled))
}

// A retry whose pause would end past the caller's deadline is not made:
// the call returns the failure at once, well before its deadline.
func TestRetryNotPastDeadline(t *testing.T) {
	f := newFlaky(t, 1, 0)
	ts := serve(t, "", server.WithInterceptors(f.intercept))
	var ev events
	c := dial(t, ts.addr, client.WithRetryObserver(ev.observe),
		client.WithRetryBackoff(client.Backoff{Initial: time.Hour, Max: time.Hour, Multiplier: 1}))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	err := callEcho(ctx, c, idemEcho)
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.NoError(t, ctx.Err(), "returned before the deadline")
	assert.Equal(t, int64(1), f.calls.Load())
	assert.Zero(t, ev.count(client.Retried))

	// CallTimeout bounds the call like a deadline.
	err = callEcho(client.WithCallOptions(context.Background(), client.CallTimeout(time.Minute)), c, idemEcho)
	require.NoError(t, err, "the second call succeeds")
}

// A hedged call: the first copy stalls on the server, the second copy
// answers, and the first is cancelled on the server.
func TestHedge(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []client.Option
		ctx  []client.CallOption
	}{
		{"option", []client.Option{client.WithHedge(time.Millisecond)}, nil},
		{"call option", nil, []client.CallOption{client.Hedge(time.Millisecond)}},
		{"hint", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlaky(t, 0, 1)
			ts := serve(t, "", server.WithInterceptors(f.intercept))
			var ev events
			c := dial(t, ts.addr, append(tc.opts, client.WithRetryObserver(ev.observe))...)
			ctx := tctx(t)
			if tc.ctx != nil {
				ctx = client.WithCallOptions(ctx, tc.ctx...)
			}
			m := idemEcho
			if tc.name == "hint" {
				m = &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo",
					Client: hints.Set{Idempotent: true, Hedge: time.Millisecond}}}
			}
			require.NoError(t, callEcho(ctx, c, m))
			stalled := recv(t, f.arrived)
			assert.Equal(t, stalled, recv(t, f.cancelled), "the stalled copy's context ended on the server")
			assert.Equal(t, int64(2), f.calls.Load())
			assert.Equal(t, 1, ev.count(client.Hedged))

			// A function that is not idempotent is never hedged: it
			// waits for its one copy (which runs: call 3 passes).
			require.NoError(t, callEcho(ctx, c, plainEcho))
			assert.Equal(t, int64(3), f.calls.Load())
			assert.Equal(t, 1, ev.count(client.Hedged))
		})
	}
}

// With the budget spent, a slow call is not hedged.
func TestHedgeThrottled(t *testing.T) {
	f := newFlaky(t, 0, 1)
	ts := serve(t, "", server.WithInterceptors(f.intercept))
	var ev events
	c := dial(t, ts.addr, client.WithHedge(time.Millisecond), client.WithRetryBudget(0, 0), client.WithRetryObserver(ev.observe))
	ctx, cancel := context.WithCancel(tctx(t))
	done := make(chan error, 1)
	go func() { done <- callEcho(ctx, c, idemEcho) }()
	recv(t, f.arrived)
	require.Eventually(t, func() bool { return ev.count(client.Throttled) == 1 }, testenv.HangGuard(10*time.Second), time.Millisecond)
	cancel()
	require.ErrorIs(t, recv(t, done), context.Canceled)
	assert.Equal(t, int64(1), f.calls.Load())
	assert.Zero(t, ev.count(client.Hedged))
}
