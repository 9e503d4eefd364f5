package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// hangingServers starts n servers whose get blocks until the test ends
// (or the call is cancelled), so every attempt times out.
func hangingServers(t *testing.T, n int) ([]*storeHandler, []string) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	var hs []*storeHandler
	var addrs []string
	for range n {
		h := newStoreHandler()
		h.hang = hang
		hs = append(hs, h)
		addrs = append(addrs, startServer(t, h).addr)
	}
	return hs, addrs
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name     string
		opts     []Option
		deadline time.Duration
		attempts int // get calls the servers saw
		kind     error
		text     string // %s: the last attempt's server; checked exactly
	}{
		{"idempotent: 1 + retries = 3 attempts, then exhausted",
			[]Option{WithAttemptTimeout(20 * time.Millisecond)}, testenv.HangGuard(10 * time.Second), 4, ErrRetriesExhausted,
			"cluster: Store.get failed 4 times, last on %s: context deadline exceeded"},
		{"retries stop before a deadline the next pause would pass",
			[]Option{WithAttemptTimeout(20 * time.Millisecond),
				WithRetryBackoff(Backoff{Initial: time.Hour, Max: time.Hour, Multiplier: 2})},
			testenv.HangGuard(10 * time.Second), 1, context.DeadlineExceeded,
			"cluster: Store.get failed on %s, and its deadline leaves no time for another attempt (1 made): context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs, addrs := hangingServers(t, 2)
			opts := append(fastOptions(tt.opts...), WithBreaker(BreakerSettings{Failures: 100}))
			cl := dialCluster(t, addrs, opts...)
			kv := store.NewStoreClient(cl)
			ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
			defer cancel()
			_, err := kv.Get(ctx, "k")
			require.Error(t, err)
			assert.NoError(t, ctx.Err(), "the call returned before its deadline")
			assert.ErrorIs(t, err, tt.kind)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.attempts, ce.Attempts)
			assert.Equal(t, fmt.Sprintf(tt.text, ce.Addr), err.Error())
			// Every attempt reaches a handler, the last perhaps after the
			// client gave up on it (20 ms is short on a loaded or emulated
			// host): wait for the servers to catch up, then the counts must
			// be equal.
			gets := func() int64 { return hs[0].gets.Load() + hs[1].gets.Load() }
			require.Eventually(t, func() bool { return gets() >= int64(tt.attempts) }, testenv.HangGuard(10*time.Second), time.Millisecond)
			assert.Equal(t, int64(tt.attempts), gets())
			if tt.attempts > 1 {
				assert.Positive(t, hs[0].gets.Load(), "retries go to the other server too")
				assert.Positive(t, hs[1].gets.Load())
			}
		})
	}
}

// TestNoRetryForNonIdempotentTimeout: a non-idempotent call that timed
// out may have run, so it is not sent again.
func TestNoRetryForNonIdempotentTimeout(t *testing.T) {
	h := newStoreHandler()
	h.block.Store(true)
	a := startServer(t, h)
	b := startServer(t, newStoreHandler())
	cl := dialCluster(t, []string{a.addr}, fastOptions(WithAttemptTimeout(20*time.Millisecond))...)
	_ = b
	_, err := store.NewStoreClient(cl).Incr(tctx(t, 10*time.Second), "k")
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("cluster: Store.incr failed on %s and was not sent again (not idempotent): context deadline exceeded", a.addr), err.Error())
	assert.ErrorIs(t, err, ErrNotRetried)
	// The one attempt may reach the handler after the client gave up on it
	// (20 ms is short on a loaded or emulated host).
	require.Eventually(t, func() bool { return h.incrs.Load() >= 1 }, testenv.HangGuard(10*time.Second), time.Millisecond)
	assert.Equal(t, int64(1), h.incrs.Load())
}

// TestApplicationErrorsPassThrough: declared exceptions and results are
// the function's answer, returned as a Conn returns them, never retried.
func TestApplicationErrorsPassThrough(t *testing.T) {
	h := newStoreHandler()
	a := startServer(t, h)
	cl := dialCluster(t, []string{a.addr}, fastOptions()...)
	kv := store.NewStoreClient(cl)
	_, err := kv.Get(tctx(t, 5*time.Second), "missing")
	var nf *store.NotFound
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "missing", nf.Key)
	var ce *CallError
	assert.False(t, errors.As(err, &ce))
	assert.Equal(t, int64(1), h.gets.Load(), "an exception is not retried")

	// An unknown method: the server's application exception, once.
	_, err = cl.callUnknown(tctx(t, 5*time.Second))
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, proto.ExcUnknownMethod, ae.Type)
}

func (c *Client) callUnknown(ctx context.Context) (string, error) {
	m := &client.Method{Service: "Store", Name: "nope", Hints: store.StoreHints.Function("get")}
	err := c.Call(ctx, m, &store.StoreGetArgs{Key: "k"}, store.NewStoreGetResult())
	return "", err
}

func TestNoServer(t *testing.T) {
	ha, hb := newStoreHandler(), newStoreHandler()
	a, b := startServer(t, ha), startServer(t, hb)
	cl := dialCluster(t, []string{a.addr, b.addr}, fastOptions(WithBreaker(BreakerSettings{OpenFor: time.Hour, Failures: 1}))...)
	kv := store.NewStoreClient(cl)
	a.kill()
	b.kill()
	// An idempotent call finds both refusing (its request never left),
	// waits within its retries for one to come back, then gives up; the
	// refusals took both out and opened their breakers.
	_, err := kv.Get(tctx(t, 5*time.Second), "k")
	assert.ErrorIs(t, err, ErrNoServer)
	assert.ErrorIs(t, err, client.ErrConnClosed, "the last failure is the cause")
	assert.True(t, strings.HasPrefix(err.Error(), "cluster: Store.get: no server available (each is down or its breaker open): client: "), "%v", err)
	for _, s := range cl.Servers() {
		assert.False(t, s.Up, s.Addr)
		assert.Equal(t, BreakerOpen, s.Breaker, s.Addr)
	}
	// A non-idempotent call does not wait: it returns before its deadline
	// (a hang guard), not after a wall-clock bound a slow host may pass.
	ctx := tctx(t, 5*time.Second)
	_, err = kv.Incr(ctx, "k")
	assert.Equal(t, "cluster: Store.incr: no server available (each is down or its breaker open)", err.Error())
	assert.ErrorIs(t, err, ErrNoServer)
	assert.NoError(t, ctx.Err(), "the call waited for its deadline")
	assert.Zero(t, ha.incrs.Load()+hb.incrs.Load())
}

func TestDialFailsWhenNoneAnswers(t *testing.T) {
	a := startServer(t, newStoreHandler())
	addr := a.addr
	a.kill()
	_, err := Dial(tctx(t, 5*time.Second), Static(addr), fastOptions()...)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoServer)
	assert.ErrorIs(t, err, client.ErrConnClosed)
	assert.Contains(t, err.Error(), "cluster: no server available: none of 1 answered: client: dial tcp "+addr)
}

// TestBorrowedOverCluster: the generated <Fn>Borrowed works through a
// cluster.Client, and use's own error is returned as is, not retried.
func TestBorrowedOverCluster(t *testing.T) {
	h := newStoreHandler()
	a := startServer(t, h)
	cl := dialCluster(t, []string{a.addr}, fastOptions()...)
	kv := store.NewStoreClient(cl)
	var got int
	require.NoError(t, kv.BlobBorrowed(tctx(t, 5*time.Second), 1000, func(r []byte) error { got = len(r); return nil }))
	assert.Equal(t, 1000, got)
	boom := errors.New("boom")
	err := kv.BlobBorrowed(tctx(t, 5*time.Second), 10, func([]byte) error { return boom })
	assert.Same(t, boom, err)
	assert.Equal(t, int64(2), h.blobs.Load(), "use's error is not a reason to send again")
	assert.Equal(t, BreakerClosed, statusOf(cl, a.addr).Breaker)
}

func TestClosedClient(t *testing.T) {
	a := startServer(t, newStoreHandler())
	cl := dialCluster(t, []string{a.addr}, fastOptions()...)
	require.NoError(t, cl.Close())
	require.NoError(t, cl.Close(), "Close is idempotent")
	_, err := store.NewStoreClient(cl).Get(tctx(t, 5*time.Second), "k")
	assert.ErrorIs(t, err, client.ErrConnClosed)
}

func getMethod() *client.Method {
	return &client.Method{Service: "Store", Name: "get", Hints: store.StoreHints.Function("get")}
}
func getArgs() *store.StoreGetArgs     { return &store.StoreGetArgs{Key: "k"} }
func getResult() *store.StoreGetResult { return store.NewStoreGetResult() }

// TestTimeoutHintBoundsRetries: the timeout hint is the call's deadline,
// retries included: 20 ms attempts cannot make the 1 + 10 the retries
// hint allows within its 200 ms.
func TestTimeoutHintBoundsRetries(t *testing.T) {
	h := newStoreHandler()
	a := startServer(t, h)
	cl := dialCluster(t, []string{a.addr}, fastOptions(WithAttemptTimeout(20*time.Millisecond),
		WithBreaker(BreakerSettings{Failures: 100}))...)
	_, err := store.NewStoreClient(cl).Slow(context.Background(), "k")
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Less(t, ce.Attempts, 11)
	assert.Positive(t, ce.Attempts)
	// Every attempt reaches the handler, but the last may get there after
	// the client gave up on it (20 ms is short on an emulated host): wait
	// for the server to catch up, then the counts must be equal.
	require.Eventually(t, func() bool { return h.slows.Load() >= int64(ce.Attempts) }, testenv.HangGuard(10*time.Second), time.Millisecond)
	assert.Equal(t, int64(ce.Attempts), h.slows.Load())
	assert.True(t, strings.HasPrefix(err.Error(), "cluster: Store.slow failed on "+a.addr+", and its deadline leaves no time for another attempt ("), "%v", err)
}

func TestZeroBalancerIsRoundRobin(t *testing.T) {
	var o options
	WithBalancer(Balancer{})(&o)
	eps := endpoints(0, 0)
	assert.Same(t, eps[0], o.balancer.pick(eps))
	assert.Same(t, eps[1], o.balancer.pick(eps))
	assert.Equal(t, "round_robin", o.balancer.String())
}

// TestRetryUnavailable: a server answering codes.Unavailable is the
// server's failure, not the function's answer: an idempotent get goes to
// the other server and succeeds.
func TestRetryUnavailable(t *testing.T) {
	a, b := newStoreHandler(), newStoreHandler()
	a.unavailable.Store(true)
	cl := dialCluster(t, []string{startServer(t, a).addr, startServer(t, b).addr}, fastOptions()...)
	kv := store.NewStoreClient(cl)
	for i := range 10 {
		v, err := kv.Get(tctx(t, 10*time.Second), fmt.Sprint("k", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint("v:k", i), v)
	}
	assert.Equal(t, int64(10), b.gets.Load(), "every get succeeded on b")
	assert.Positive(t, a.gets.Load(), "a was tried and answered Unavailable")
}
