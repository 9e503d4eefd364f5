package flock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/testenv"
)

var testTimeout = testenv.HangGuard(20 * time.Second)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openDev(t testing.TB) *rdma.Device {
	t.Helper()
	d, err := rdma.Open(rdma.WithShmSize(1<<30), rdma.WithRNRTimer(20*time.Microsecond))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

func newServer(t testing.TB, d *rdma.Device, opts ...Option) *Server {
	t.Helper()
	s, err := NewServer(d, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// dial connects a new sender to s over an in-memory bootstrap connection.
func dial(t testing.TB, d *rdma.Device, s *Server, opts ...Option) (*Conn, *Peer) {
	t.Helper()
	return dialFrom(t, d, d, s, opts...)
}

// dialFrom is dial with the sender on its own device (shm: its own
// segment, reached through the peer mapping as across processes).
func dialFrom(t testing.TB, sd, cd *rdma.Device, s *Server, opts ...Option) (*Conn, *Peer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	type res struct {
		p   *Peer
		err error
	}
	rc := make(chan res, 1)
	go func() {
		p, err := s.Accept(ctx, sd, b)
		rc <- res{p, err}
	}()
	c, err := Dial(ctx, cd, a, opts...)
	r := <-rc
	require.NoError(t, err)
	require.NoError(t, r.err)
	t.Cleanup(func() {
		if err := c.Close(); !errors.Is(err, ErrClosed) {
			require.NoError(t, err)
		}
	})
	return c, r.p
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// progressCtx is a context for a long load test whose total time depends on
// how loaded the machine is: instead of a fixed deadline, it is cancelled
// when no progress (a call of the returned func) has been reported for
// testTimeout, so a lost wakeup (a caller, or every caller, stuck) still
// fails the test while slowness does not. limit caps the whole run.
func progressCtx(t testing.TB, limit time.Duration) (context.Context, func()) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			if idle := time.Since(time.Unix(0, last.Load())); idle > testTimeout {
				// What every goroutine waits on is the clue to a stall that
				// only a loaded CI machine shows.
				var stacks strings.Builder
				_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
				t.Logf("no progress for %v; goroutines:\n%s", idle.Round(time.Millisecond), stacks.String())
				cancel(fmt.Errorf("no call completed for %v: %w", idle.Round(time.Millisecond),
					context.DeadlineExceeded))
				return
			}
			if time.Since(start) > limit {
				cancel(fmt.Errorf("still running after %v: %w", limit, context.DeadlineExceeded))
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		wg.Wait()
		cancel(nil)
	})
	return ctx, func() { last.Store(time.Now().UnixNano()) }
}

// eventually polls cond under the test timeout.
func eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, testTimeout, time.Millisecond, msg)
}

// metricValue reads a single counter or gauge.
func metricValue(t testing.TB, m any) float64 {
	t.Helper()
	switch m := m.(type) {
	case *counter:
		return float64(m.value())
	case *gauge:
		return m.value()
	}
	t.Fatalf("metricValue of a %T", m)
	return 0
}

// sharingModes are the two ways of sharing a QP that tests run under.
var sharingModes = []struct {
	name string
	opts []Option
}{
	{"flock", nil},
	{"mutex", []Option{withMutexSharing()}},
}

// inParallel runs f(0) … f(g-1) in g goroutines and fails t with every
// error they return.
func inParallel(t testing.TB, g int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// leading fails t if another combiner leader is serving; the returned
// func ends this leader's turn.
func leading(t testing.TB, in *atomic.Int32) func() {
	assert.Equal(t, int32(1), in.Add(1), "two leaders at once")
	return func() { in.Add(-1) }
}

// portion is how many of a batch of k a test leader serves: all of it, or
// with partial half of it (rounded up), so the rest goes to a next leader.
func portion(k int, partial bool) int {
	if partial && k > 1 {
		return (k + 1) / 2
	}
	return k
}
