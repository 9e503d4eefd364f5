package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store"
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
