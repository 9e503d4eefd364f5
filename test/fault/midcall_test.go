package fault_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestClientKilledMidCall runs a client in a separate process, lets it
// start a 60s call, SIGKILLs it and checks that the server notices: the
// handler's context is cancelled, the connection is released, and a
// bystander client never sees an error.
func TestClientKilledMidCall(t *testing.T) {
	tests := []struct {
		role  string
		stack string
	}{
		{"apache-sleep", "framed+binary"},
		{"apache-sleep", "buffered+compact"},
		{"hat-sleep", ""},
	}
	for _, tt := range tests {
		t.Run(tt.role+"/"+tt.stack, func(t *testing.T) {
			h := testutil.NewSleepHandler()
			srv := testutil.StartServer(t, []*server.Service{testutil.SleepService(h)})
			probe := testutil.StartProber(t, srv.Addr, 2*time.Millisecond)
			before := testutil.Snapshot()

			child := testutil.StartChild(t, tt.role, envAddr+"="+srv.Addr, envStack+"="+tt.stack)
			child.Expect(t, "CALLING", 30*time.Second)
			require.Equal(t, int32(60_000), h.WaitStarted(t, 30*time.Second))
			require.Equal(t, 1, h.Active())

			child.Kill(t)
			_ = child.WaitExit(t, 10*time.Second)

			// The server reads every connection even while a call runs, so
			// the peer's disappearance cancels the call promptly.
			require.Eventually(t, func() bool { return h.Active() == 0 }, testenv.HangGuard(10*time.Second), 10*time.Millisecond,
				"the handler of a dead client is still running")
			assert.Equal(t, 1, h.Cancelled())
			assert.Equal(t, 0, h.Finished())
			n := srv.WaitConns(t, func(n int) bool { return n <= 1 }, 10*time.Second)
			assert.LessOrEqual(t, n, 1, "the dead client's connection is still open")

			probe.Check(t)
			after := testutil.WaitSettled(before.Goroutines+4, 10*time.Second)
			assert.LessOrEqual(t, after.Goroutines, before.Goroutines+4)
		})
	}
}

// TestServerStoppedMidCall has several clients waiting in long calls when
// the server goes away, gracefully (Shutdown with a short deadline) or
// abruptly (Close): every caller must get an error quickly, no call may
// hang, and the handlers' contexts must be cancelled.
func TestServerStoppedMidCall(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		name := "close"
		if graceful {
			name = "shutdown"
		}
		t.Run(name, func(t *testing.T) {
			h := testutil.NewSleepHandler()
			srv := testutil.StartServer(t, []*server.Service{testutil.SleepService(h)})

			type result struct {
				who string
				err error
				d   time.Duration
			}
			results := make(chan result, len(testutil.Stacks)+3)
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
			defer cancel()
			for _, st := range testutil.Stacks {
				c := testutil.DialApache(t, srv.Addr, st)
				go func() {
					start := time.Now()
					_, err := c.Sleep(ctx, 60_000)
					results <- result{"apache " + st.String(), err, time.Since(start)}
				}()
			}
			callers := len(testutil.Stacks)
			callers += startHatSleepers(t, ctx, srv.Addr, results, func(who string, err error, d time.Duration) result {
				return result{who, err, d}
			})
			for i := 0; i < callers; i++ {
				h.WaitStarted(t, 10*time.Second)
			}

			stopped := time.Now()
			err := srv.Stop(t, graceful, 500*time.Millisecond)
			if graceful {
				// In-flight calls outlive the deadline, so Shutdown falls back
				// to Close and says so.
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			} else {
				assert.NoError(t, err)
			}
			for i := 0; i < callers; i++ {
				select {
				case r := <-results:
					assert.Error(t, r.err, "%s: a call to a stopped server succeeded", r.who)
					t.Logf("%s: error after %v: %v", r.who, r.d.Round(time.Millisecond), r.err)
				case <-time.After(testenv.HangGuard(10 * time.Second)):
					require.FailNow(t, "a caller hangs after the server stopped")
				}
			}
			assert.Less(t, time.Since(stopped), 10*time.Second)
			assert.Equal(t, 0, h.Active())
			assert.Equal(t, callers, h.Cancelled(), "every in-flight handler must see its context cancelled")
			assert.Equal(t, 0, h.Finished())

			// New connections are refused once the server is gone.
			_, closer, err := testutil.DialApacheErr(srv.Addr, testutil.Stacks[0])
			if err == nil {
				_ = closer()
			}
			assert.Error(t, err)
			var target interface{ Timeout() bool }
			if errors.As(err, &target) {
				assert.False(t, target.Timeout(), "dialing a stopped server must fail fast")
			}
		})
	}
}

// startHatSleepers starts 60s sleep calls from HatRPC clients: two
// pipelined on one shared connection and one on a connection of its own.
// It returns how many it started; each reports through results.
func startHatSleepers[R any](t *testing.T, ctx context.Context, addr string, results chan<- R,
	mk func(who string, err error, d time.Duration) R) int {
	t.Helper()
	shared, err := client.Dial(ctx, addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = shared.Close() })
	own, err := client.Dial(ctx, addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Close() })
	require.True(t, shared.Upgraded() && own.Upgraded(), "HatRPC clients must upgrade")
	calls := []struct {
		who string
		c   *client.Conn
	}{{"hatrpc shared#1", shared}, {"hatrpc shared#2", shared}, {"hatrpc own", own}}
	for _, call := range calls {
		go func() {
			start := time.Now()
			_, err := testutil.HatSleep(ctx, call.c, 60_000)
			results <- mk(call.who, err, time.Since(start))
		}()
	}
	return len(calls)
}
