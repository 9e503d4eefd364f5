package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A lone caller keeps its context watch between calls: the kept watch must
// still interrupt a later call of the same context, and a context that
// ended between calls must not leave a call waiting for a slow server.
func TestKeptContextWatchStillCancels(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	ctx, cancel := context.WithCancel(context.Background())
	for range 3 {
		requireEcho(t, ctx, c, "x")
	}
	// The server holds the call until its context ends, so only the
	// client's watch (its Cancel frame, or its giving up) ends it; the
	// context is cancelled once the call is at the server, not after a
	// sleep that a slow host may outrun.
	slow := &wiretest.EchoArgs{Msg: "slow", Mode: wiretest.ModeWaitCtx}
	call := callAsync(func() error { _, err := echo(ctx, c, slow); return err })
	waitHeld(t, ts, "slow")
	cancel()
	require.ErrorIs(t, awaitCall(t, call, "the kept watch did not end the call"), context.Canceled)

	// Same Done channel, already closed: fails at once, never reaching the
	// server (which would hold it).
	require.ErrorIs(t, awaitCall(t, callAsync(func() error { _, err := echo(ctx, c, slow); return err }),
		"a call of an ended context was sent"), context.Canceled)

	// Another context sharing the ended one's parent works again.
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "next"})
	require.NoError(t, err)
	require.Equal(t, "next", got)
}

// Contexts that share a Done channel (WithValue over a cancellable one)
// share the kept watch; cancelling the parent ends a call of the child.
func TestKeptContextWatchSharedDone(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := echo(parent, c, &wiretest.EchoArgs{Msg: "warm"})
	require.NoError(t, err)
	type key struct{}
	child := context.WithValue(parent, key{}, 1)
	call := callAsync(func() error {
		_, err := echo(child, c, &wiretest.EchoArgs{Msg: "slow", Mode: wiretest.ModeWaitCtx})
		return err
	})
	waitHeld(t, ts, "slow")
	cancel()
	require.ErrorIs(t, awaitCall(t, call, "cancelling the parent did not end the child's call"), context.Canceled)
}

// callAsync runs call in a goroutine; its error comes on the channel.
func callAsync(call func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	return done
}

// awaitCall is the error from done, or a failure (why) if none comes
// within a hang guard: a call only the client's own context can end.
func awaitCall(t *testing.T, done <-chan error, why string) error {
	t.Helper()
	return recvWithin(t, done, 10*time.Second, why)
}

// waitHeld waits until a ModeWaitCtx call of msg holds its handler.
func waitHeld(t *testing.T, ts *testServer, msg string) {
	t.Helper()
	got := recvWithin(t, ts.echo.Waiting, 10*time.Second, fmt.Sprintf("the %q call did not reach its handler", msg))
	require.Equal(t, msg, got)
}

// Callers waiting for their replies while another caller of the same
// context holds the read role rely on the kept watch instead of selecting
// on the context: cancelling it must still end every one of them, with
// callers of another context in the mix (one of which may take the read
// role and the watch over; TestWatchWakesWaiters covers that hand-over
// alone).
func TestKeptContextWatchEndsWaiters(t *testing.T) {
	cases := []struct {
		name  string
		other bool // a caller of another context may take the read role over first
		n     int  // callers waiting
		runs  int  // which waiting caller takes the role over varies
	}{
		{"watch fires", false, 8, 3},
		{"watch replaced", true, 2, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range tc.runs {
				ts := serve(t, "")
				c := dial(t, ts.addr, client.WithConns(1))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				_, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "warm"}) // the kept watch is ctx's
				require.NoError(t, err)
				n := tc.n
				slow := &wiretest.EchoArgs{Msg: "slow", Mode: wiretest.ModeWaitCtx}
				errs := make(chan error, n)
				lead := make(chan error, 1)
				if tc.other {
					// Its reply comes first and hands the read role on.
					go func() {
						_, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "lead", DelayNs: int64(50 * time.Millisecond)})
						lead <- err
					}()
				}
				for range n {
					go func() {
						_, err := echo(ctx, c, slow)
						errs <- err
					}()
				}
				octx, ocancel := context.WithCancel(context.Background())
				defer ocancel()
				others := make(chan error, 1)
				if tc.other {
					go func() {
						_, err := echo(octx, c, slow)
						others <- err
					}()
					require.NoError(t, <-lead)
				}
				want := n
				if tc.other {
					want++
				}
				for range want { // every slow call reached its handler
					select {
					case <-ts.echo.Waiting:
					case <-time.After(testenv.HangGuard(10 * time.Second)):
						t.Fatal("slow calls did not arrive")
					}
				}
				cancel()
				for range n {
					select {
					case err := <-errs:
						require.ErrorIs(t, err, context.Canceled)
					case <-time.After(testenv.HangGuard(10 * time.Second)):
						t.Fatal("a waiting caller outlived its context")
					}
				}
				if tc.other {
					ocancel()
					require.ErrorIs(t, <-others, context.Canceled)
				}
			}
		})
	}
}
