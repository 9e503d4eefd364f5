package rdma

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEndpointContextWatch: an endpoint watches the context of its
// exchanges once for as long as the caller keeps passing it (no
// context.AfterFunc per exchange). Ending it still interrupts a wait in
// C; a context the endpoint moved away from cannot cancel exchanges of the
// next one; and a server whose context ends closes at once, even with the
// watch's callback in flight (it once deadlocked Close).
func TestEndpointContextWatch(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	t.Run("reused context still cancels", func(t *testing.T) {
		cli, srv := newRPCPair(t, cfg, cfg, false)
		stop := make(chan struct{})
		sctx, scancel := context.WithCancel(context.Background())
		defer scancel()
		served := make(chan error, 1)
		go func() {
			served <- srv.ServeCalls(sctx, stop, func(req []byte) ([]byte, Protocol) { return req, ProtoEager })
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for i := 0; i < 50; i++ {
			got, err := cli.Call(ctx, ProtoEager, []byte("same ctx"))
			require.NoError(t, err)
			require.Equal(t, "same ctx", string(got))
		}
		close(stop) // the server answers no more
		select {
		case err := <-served:
			require.NoError(t, err)
		case <-time.After(testTimeout):
			t.Fatal("server did not stop")
		}
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		_, err := cli.Call(ctx, ProtoEager, []byte("nobody answers"))
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(start), testTimeout) // nobody answers: only cancel ends it, so a hang guard
	})
	t.Run("contexts derived by value share the watch", func(t *testing.T) {
		// A runtime wraps the caller's context per call (a value for the
		// call's own state): the watch stays, and cancelling the parent
		// still interrupts a wait in C.
		cli, srv := newRPCPair(t, cfg, cfg, false)
		stop := make(chan struct{})
		sctx, scancel := context.WithCancel(context.Background())
		defer scancel()
		served := make(chan error, 1)
		go func() {
			served <- srv.ServeCalls(sctx, stop, func(req []byte) ([]byte, Protocol) { return req, ProtoEager })
		}()
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		type key struct{}
		for i := 0; i < 20; i++ {
			got, err := cli.Call(context.WithValue(parent, key{}, i), ProtoEager, []byte("derived"))
			require.NoError(t, err)
			require.Equal(t, "derived", string(got))
		}
		cli.wmu.Lock()
		watches := cli.watches
		cli.wmu.Unlock()
		require.Equal(t, 1, watches, "one watch for all the derived contexts")
		close(stop)
		select {
		case err := <-served:
			require.NoError(t, err)
		case <-time.After(testTimeout):
			t.Fatal("server did not stop")
		}
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := cli.Call(context.WithValue(parent, key{}, -1), ProtoEager, []byte("nobody answers"))
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("an old context does not cancel the new one's calls", func(t *testing.T) {
		cli, srv := newRPCPair(t, cfg, cfg, false)
		serve(t, srv, ProtoEager, func(req []byte) []byte { return req })
		a, cancelA := context.WithCancel(context.Background())
		b, cancelB := context.WithTimeout(context.Background(), testTimeout)
		defer cancelB()
		_, err := cli.Call(a, ProtoEager, []byte("a"))
		require.NoError(t, err)
		_, err = cli.Call(b, ProtoEager, []byte("b"))
		require.NoError(t, err)
		cancelA()
		for i := 0; i < 200; i++ {
			got, err := cli.Call(b, ProtoEager, []byte("b again"))
			require.NoError(t, err, "call %d", i)
			require.Equal(t, "b again", string(got))
		}
	})
	t.Run("an ended context fails every later exchange at once", func(t *testing.T) {
		// The server answers: only the ended context can fail these calls,
		// each before it is sent (an exchange looks at its context once it
		// has published its gen for the watch).
		cli, srv := newRPCPair(t, cfg, cfg, false)
		serve(t, srv, ProtoEager, func(req []byte) []byte { return req })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for i := 0; i < 50; i++ {
			_, err := cli.Call(ctx, ProtoEager, []byte("late"))
			require.ErrorIs(t, err, context.Canceled, "call %d", i)
		}
		got, err := callT(t, cli, ProtoEager, []byte("fresh"))
		require.NoError(t, err, "a new context is not cancelled, and the endpoint survived")
		require.Equal(t, "fresh", string(got))
	})
	t.Run("a stale cancel does not undo a later one", func(t *testing.T) {
		// A watch that read the exchange in hand just before the next one
		// began cancels the old gen after the new one cancelled itself.
		cli, srv := newRPCPair(t, cfg, cfg, false)
		serve(t, srv, ProtoEager, func(req []byte) []byte { return req })
		_, err := callT(t, cli, ProtoEager, []byte("first"))
		require.NoError(t, err)
		cli.mu.Lock()
		next := cli.gen + 1
		cli.mu.Unlock()
		cli.cancel(next)     // the next exchange, cancelled
		cli.cancel(next - 1) // the watch's late cancel of the last one
		_, err = callT(t, cli, ProtoEager, []byte("cancelled"))
		require.Error(t, err, "the later cancel stands")
		got, err := callT(t, cli, ProtoEager, []byte("fresh"))
		require.NoError(t, err)
		require.Equal(t, "fresh", string(got))
	})
	t.Run("server context ends then close", func(t *testing.T) {
		for i := 0; i < 20; i++ {
			cli, srv := pairClosingServer(t, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			closed := make(chan error, 1)
			go func() {
				err := srv.Serve(ctx, ProtoEager, func(req []byte) []byte { return req })
				if err == nil {
					err = srv.Close()
				}
				closed <- err
			}()
			_, err := callT(t, cli, ProtoEager, []byte("x"))
			require.NoError(t, err)
			cancel()
			select {
			case err := <-closed:
				require.NoError(t, err)
			case <-time.After(testTimeout):
				t.Fatalf("round %d: the server's Serve and Close did not return", i)
			}
		}
	})
}

// pairClosingServer is newRPCPair whose server endpoint the test closes
// itself (the cleanup closes it only if the test did not).
func pairClosingServer(t *testing.T, cfg EndpointConfig) (*RPCEndpoint, *RPCEndpoint) {
	t.Helper()
	pd := newPD(t, openTest(t))
	cli := newEndpoint(t, pd, cfg)
	srv, err := NewRPCEndpoint(pd, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := srv.Close(); !errors.Is(err, ErrClosed) {
			require.NoError(t, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	errc := make(chan error, 1)
	go func() { errc <- srv.Bootstrap(ctx, cb) }()
	require.NoError(t, cli.Bootstrap(ctx, ca))
	require.NoError(t, <-errc)
	return cli, srv
}
