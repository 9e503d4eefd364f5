package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestTimeoutHintUnderCallerDeadline: slow's 200 ms timeout hint bounds
// the call, retries included, also when the caller's context has a longer
// deadline of its own (it used to apply only without one, and the call was
// sent 1 + 10 times, each attempt bounded by the hint).
func TestTimeoutHintUnderCallerDeadline(t *testing.T) {
	h := newStoreHandler()
	a := startServer(t, h)
	cl := dialCluster(t, []string{a.addr}, fastOptions(WithBreaker(BreakerSettings{Failures: 100}))...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := store.NewStoreClient(cl).Slow(ctx, "k")
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NoError(t, ctx.Err(), "the caller's deadline has not passed")
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, 1, ce.Attempts, "the hint's 200 ms, not the caller's 10 min, left no time to retry")
		assert.Equal(t, int64(1), h.slows.Load())
	case <-time.After(testenv.HangGuard(2 * time.Minute)):
		t.Fatal("the call outlived its timeout hint")
	}
}

// TestExpiredBeforeSending: a call whose deadline had passed before it was
// sent says it was not sent, not that it failed on a server.
func TestExpiredBeforeSending(t *testing.T) {
	a := startServer(t, newStoreHandler())
	cl := dialCluster(t, []string{a.addr}, fastOptions()...)
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		kind error
		want string
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}, context.DeadlineExceeded, "cluster: Store.get was not sent: its deadline had passed: context deadline exceeded"},
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled, "cluster: Store.get was not sent: its context was canceled: context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := store.NewStoreClient(cl).Get(ctx, "k")
			require.ErrorIs(t, err, tc.kind)
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Zero(t, ce.Attempts)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

// TestAttemptNotSent: an attempt whose own timeout passed before its
// request was sent (client.ErrNotSent) ran nowhere: it is not counted, it
// says nothing to the breaker, and even a non-idempotent call goes again.
// (A timeout hint's deadline passing between the retry's pause and the
// send made the count one more than the server saw.)
func TestAttemptNotSent(t *testing.T) {
	h := newStoreHandler()
	a := startServer(t, h)
	var held atomic.Bool
	// The first call waits until its attempt's timeout has passed, then
	// goes on: the Conn finds the deadline gone and sends nothing.
	hold := func(ctx context.Context, m *client.Method, args, result proto.Struct, next client.Invoker) error {
		if held.CompareAndSwap(false, true) {
			<-ctx.Done()
		}
		return next(ctx, m, args, result)
	}
	cl := dialCluster(t, []string{a.addr}, fastOptions(WithAttemptTimeout(testenv.HangGuard(200*time.Millisecond)),
		WithBreaker(BreakerSettings{Failures: 1, OpenFor: time.Hour}),
		WithConnOptions(client.WithInterceptors(hold)))...)
	n, err := store.NewStoreClient(cl).Incr(tctx(t, 10*time.Second), "k")
	require.NoError(t, err)
	assert.True(t, held.Load())
	assert.Equal(t, int64(1), n)
	assert.Equal(t, int64(1), h.incrs.Load())
	st := statusOf(cl, a.addr)
	assert.Equal(t, BreakerClosed, st.Breaker, "one failure would have opened it")
	assert.Equal(t, uint64(2), st.Calls, "both attempts went to the server's Conn")
}
