package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestManyGoroutinesManyConns(t *testing.T) {
	_, _, addr := start(t)
	for _, up := range []bool{true, false} {
		t.Run(fmt.Sprintf("upgraded=%v", up), func(t *testing.T) {
			var conns []*client.Conn
			for range 4 {
				if up {
					conns = append(conns, dial(t, addr))
				} else {
					conns = append(conns, dial(t, addr, client.WithoutUpgrade(), client.WithFramed()))
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64*20)
			for g := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := conns[g%len(conns)]
					for i := range 20 {
						msg := fmt.Sprintf("g%d-%d", g, i)
						got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: msg, DelayNs: int64((g + i) % 3 * 100_000)})
						if err == nil && got != msg {
							err = fmt.Errorf("got %q want %q", got, msg)
						}
						if err != nil {
							errs <- err
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
		})
	}
}

// On a HatRPC connection a fast call overtakes a slow one; on a plain
// connection its reply waits for the slow one (Thrift clients expect order).
// HatRPC replies come as calls finish, plain Thrift ones in request
// order. The slow call is held by a gate the test opens, so the order is
// decided by the server's logic alone, never by how long a call took.
func TestOutOfOrderCompletion(t *testing.T) {
	gate := make(chan struct{})
	var gated atomic.Int32
	hold := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		if a, ok := args.(*wiretest.EchoArgs); ok && a.Msg == "slow" {
			gated.Add(1)
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
		return next(ctx, args)
	}
	_, _, addr := start(t, server.WithInterceptors(hold))
	cases := []struct {
		name     string
		opts     []client.Option
		fastWins bool
	}{
		{"hatrpc", nil, true},
		{"plain", []client.Option{client.WithoutUpgrade()}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr, tc.opts...)
			slowDone := make(chan error, 1)
			go func() {
				_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "slow"})
				slowDone <- err
			}()
			require.Eventually(t, func() bool { return gated.Load() == int32(i+1) }, eventually, time.Millisecond,
				"the slow request reached the server first")
			fastDone := make(chan error, 1)
			go func() {
				got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "fast"})
				if err == nil && got != "fast" {
					err = fmt.Errorf("got %q", got)
				}
				fastDone <- err
			}()
			if tc.fastWins {
				require.NoError(t, <-fastDone, "fast reply was held behind the slow one")
				select {
				case <-slowDone:
					t.Fatal("slow call finished before the fast one returned")
				default:
				}
				gate <- struct{}{}
			} else {
				select {
				case err := <-fastDone:
					t.Fatalf("plain replies must keep request order: fast returned (%v) while slow runs", err)
				case <-time.After(100 * time.Millisecond):
				}
				gate <- struct{}{}
				require.NoError(t, <-fastDone)
			}
			require.NoError(t, <-slowDone)
		})
	}
}

func TestDeadlinePropagationAndCancel(t *testing.T) {
	s, e, addr := start(t)
	c := dial(t, addr)
	require.True(t, c.Upgraded())

	// The handler's deadline is the caller's: what remained of it when
	// the handler looked, so no more than the timeout and no less than
	// the timeout less the whole call as the caller timed it (not a fixed
	// share of it, which a slow host may use up); the wire carries it to
	// the millisecond at worst.
	const timeout = 2 * time.Second
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	_, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "dl"})
	took := time.Since(t0)
	cancel()
	require.NoError(t, err)
	select {
	case d := <-e.Deadlines:
		require.GreaterOrEqual(t, d, timeout-took-time.Millisecond)
		require.LessOrEqual(t, d, timeout)
	case <-time.After(testenv.HangGuard(5 * time.Second)):
		t.Fatal("handler saw no deadline")
	}

	// The client gives up: its deadline fires on the server too.
	// Only that deadline can end the call (its handler waits for it): a
	// hang guard bounds the wait, not a bet on how soon it returns.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	res := make(chan error, 1)
	go func() {
		_, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "timeout", Mode: wiretest.ModeWaitCtx})
		res <- err
	}()
	select {
	case err = <-res:
	case <-time.After(testenv.HangGuard(5 * time.Second)):
		t.Fatal("the call outlived its deadline")
	}
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	select {
	case got := <-e.Cancelled:
		require.Equal(t, "timeout", got)
	case <-time.After(testenv.HangGuard(5 * time.Second)):
		t.Fatal("handler context not cancelled by deadline")
	}

	// Explicit cancellation (no deadline) travels as a Cancel frame.
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		waitInFlight(t, s, 1)
		cancel()
	}()
	_, err = echo(ctx, c, &wiretest.EchoArgs{Msg: "cancel", Mode: wiretest.ModeWaitCtx})
	require.ErrorIs(t, err, context.Canceled)
	select {
	case got := <-e.Cancelled:
		require.Equal(t, "cancel", got)
	case <-time.After(testenv.HangGuard(5 * time.Second)):
		t.Fatal("handler context not cancelled by Cancel frame")
	}
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "still fine"})
	require.NoError(t, err)
	require.Equal(t, "still fine", got)
}

func TestClientGoneCancelsHandler(t *testing.T) {
	s, e, addr := start(t)
	for _, up := range []bool{true, false} {
		t.Run(fmt.Sprintf("upgraded=%v", up), func(t *testing.T) {
			var opts []client.Option
			if !up {
				opts = append(opts, client.WithoutUpgrade())
			}
			c := dial(t, addr, opts...)
			done := make(chan error, 1)
			go func() {
				_, err := echo(context.Background(), c, &wiretest.EchoArgs{Msg: "gone", Mode: wiretest.ModeWaitCtx})
				done <- err
			}()
			waitInFlight(t, s, 1)
			require.NoError(t, c.Close())
			select {
			case err := <-done:
				require.ErrorIs(t, err, client.ErrConnClosed)
			case <-time.After(testenv.HangGuard(5 * time.Second)):
				t.Fatal("call did not fail on Close")
			}
			select {
			case got := <-e.Cancelled:
				require.Equal(t, "gone", got)
			case <-time.After(testenv.HangGuard(5 * time.Second)):
				t.Fatal("handler context not cancelled when the client went away")
			}
		})
	}
}

func TestOneway(t *testing.T) {
	_, e, addr := start(t)
	for _, opts := range [][]client.Option{nil, {client.WithoutUpgrade()}} {
		c := dial(t, addr, opts...)
		require.NoError(t, c.Call(tctx(t), wiretest.FireMethod, &wiretest.EchoArgs{Msg: "one"}, nil))
		select {
		case got := <-e.Fired:
			require.Equal(t, "one", got)
		case <-time.After(testenv.HangGuard(5 * time.Second)):
			t.Fatal("oneway not delivered")
		}
		// A regular call after the oneway gets its own reply, not a stray one.
		got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "two"})
		require.NoError(t, err)
		require.Equal(t, "two", got)
	}
}

func TestBackpressure(t *testing.T) {
	t.Run("blocking", func(t *testing.T) {
		var cur, peak atomic.Int32
		track := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
			n := cur.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			defer cur.Add(-1)
			return next(ctx, args)
		}
		_, _, addr := start(t, server.WithMaxConcurrentCalls(2), server.WithInterceptors(track))
		c := dial(t, addr)
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: fmt.Sprint(i), DelayNs: int64(100 * time.Millisecond)})
				assert.NoError(t, err)
				assert.Equal(t, fmt.Sprint(i), got)
			}()
		}
		wg.Wait()
		require.Equal(t, int32(2), peak.Load())
	})
	t.Run("busy-reply", func(t *testing.T) {
		// The slow call holds the only slot until the rejected one is
		// answered (a gate, not a 500 ms delay a slow host could let run
		// out before the second call arrives and so get admitted).
		release := make(chan struct{})
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		hold := func(ctx context.Context, _ *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
			if a, ok := args.(*wiretest.EchoArgs); ok && a.Msg == "slow" {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return next(ctx, args)
		}
		s, _, addr := start(t, server.WithMaxConcurrentCalls(1), server.WithBusyTimeout(20*time.Millisecond), server.WithInterceptors(hold))
		t.Cleanup(free)
		c := dial(t, addr)
		slow := make(chan error, 1)
		go func() {
			_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "slow"})
			slow <- err
		}()
		waitInFlight(t, s, 1)
		_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "rejected"})
		require.ErrorIs(t, err, &proto.ApplicationException{Type: proto.ExcInternalError, Message: "server busy"})
		require.Equal(t, codes.Unavailable, status.Code(err), "the call did not run: an idempotent one may be sent again")
		free()
		require.NoError(t, <-slow)
	})
	t.Run("max-conns", func(t *testing.T) {
		s, _, addr := start(t, server.WithMaxConns(1))
		c1 := dial(t, addr)
		_, err := echo(tctx(t), c1, &wiretest.EchoArgs{Msg: "first"})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Second))
		defer cancel()
		c2, err := client.Dial(ctx, addr)
		if err == nil {
			_, err = echo(tctx(t), c2, &wiretest.EchoArgs{Msg: "second"})
			c2.Close()
		}
		require.ErrorIs(t, err, client.ErrConnClosed)
		mf, gerr := s.Registry().Gather()
		require.NoError(t, gerr)
		require.GreaterOrEqual(t, metricValue(mf, "hatrpc_server_rejected_total", map[string]string{"reason": "max_conns"}), 1.0)
		_, err = echo(tctx(t), c1, &wiretest.EchoArgs{Msg: "still"})
		require.NoError(t, err)
	})
}
