package server_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// plainStacks are the plain-Thrift stacks an Apache client may speak to
// one connection.
var plainStacks = []struct {
	name string
	opts []client.Option
}{
	{"framed-binary", []client.Option{client.WithFramed()}},
	{"buffered-compact", []client.Option{client.WithUnframed(), client.WithCompact()}},
	{"framed-compact", []client.Option{client.WithFramed(), client.WithCompact()}},
	{"buffered-binary", []client.Option{client.WithUnframed()}},
	{"theader", []client.Option{client.WithTHeader()}},
	{"framed-theader", []client.Option{client.WithFramedTHeader(), client.WithCompact()}},
}

// A plain Thrift client's oneway pokes run before the call it sends
// after them on the same connection, every round: the handlers dawdle at
// random, so calls run concurrently would sum 5 or 6 now and then.
func TestPlainConnectionOrder(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	s.Register(new(testutil.Pokes).Service())
	addr := serveOn(t, s)
	for _, st := range plainStacks {
		t.Run(st.name, func(t *testing.T) {
			c := dial(t, addr, append([]client.Option{client.WithoutUpgrade()}, st.opts...)...)
			require.False(t, c.Upgraded())
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
			defer cancel()
			for round := range 1000 {
				sum, err := testutil.PokeRound(ctx, c, 5, 6)
				require.NoError(t, err)
				require.Equal(t, int32(11), sum, "round %d", round)
			}
		})
	}
}

// A plain call waits for the oneway call before it however long that
// takes (a gate the test opens, not a clock), while a HatRPC
// connection's calls still overtake each other.
func TestPlainConnectionWaitsForOneway(t *testing.T) {
	gate := make(chan struct{})
	var started, pokesRan atomic.Int32
	hold := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		if a, ok := args.(*testutil.I32Struct); ok && a.V == 99 {
			started.Add(1)
			<-gate
		}
		if info.Method.Name == "pokes" {
			pokesRan.Add(1)
		}
		return next(ctx, args)
	}
	s := server.New(server.WithLogger(quiet), server.WithInterceptors(hold))
	s.Register(new(testutil.Pokes).Service())
	addr := serveOn(t, s)

	c := dial(t, addr, client.WithoutUpgrade(), client.WithFramed())
	done := make(chan int32, 1)
	go func() {
		sum, err := testutil.PokeRound(tctx(t), c, 99, 1)
		if err != nil {
			sum = -1
		}
		done <- sum
	}()
	require.Eventually(t, func() bool { return started.Load() == 1 }, eventually, time.Millisecond)
	select {
	case sum := <-done:
		t.Fatalf("pokes answered (%d) while the poke before it runs", sum)
	case <-time.After(100 * time.Millisecond):
	}
	require.Zero(t, pokesRan.Load(), "pokes ran while the poke before it runs")
	close(gate)
	select {
	case sum := <-done:
		require.Equal(t, int32(100), sum)
	case <-time.After(eventually):
		t.Fatal("no answer after the gate opened")
	}

	// HatRPC framing: a call overtakes the held oneway.
	gate = make(chan struct{})
	started.Store(0)
	hc := dial(t, addr, client.WithRDMA("off"))
	require.True(t, hc.Upgraded())
	require.NoError(t, hc.Call(tctx(t), testutil.PokeMethod, &testutil.I32Struct{ID: 1, V: 99, Set: true}, nil))
	require.Eventually(t, func() bool { return started.Load() == 1 }, eventually, time.Millisecond)
	res := testutil.I32Struct{ID: 0}
	require.NoError(t, hc.Call(tctx(t), testutil.PokesMethod, new(testutil.EmptyStruct), &res))
	close(gate)
}

// A plain connection's reader reads at most PlainAhead calls ahead of
// the one running: a flood of oneway calls behind a call that blocks
// (issue 43, D5: fb303 shutdown/reinitialize) holds PlainAhead calls,
// goroutines and slots, not one per call sent (before: every call the
// server could read, up to its 4,096 slots); once the blocked call ends,
// every call runs, in the order sent, and the connection holds nothing.
func TestPlainReadAheadBounded(t *testing.T) {
	const calls = 1000
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // a failed assertion must not leave the handler blocked
	var started atomic.Int32
	var mu sync.Mutex
	var ran []int32
	hold := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		if a, ok := args.(*testutil.I32Struct); ok {
			if a.V == -1 {
				started.Add(1)
				<-gate
			}
			mu.Lock()
			ran = append(ran, a.V)
			mu.Unlock()
		}
		return next(ctx, args)
	}
	s := server.New(server.WithLogger(quiet), server.WithInterceptors(hold))
	s.Register(new(testutil.Pokes).Service())
	addr := serveOn(t, s)
	c := dial(t, addr, client.WithoutUpgrade(), client.WithFramed())
	require.False(t, c.Upgraded())
	base := runtime.NumGoroutine()

	sent := make(chan error, 1)
	go func() {
		for i := -1; i < calls; i++ {
			if err := c.Call(tctx(t), testutil.PokeMethod, &testutil.I32Struct{ID: 1, V: int32(i), Set: true}, nil); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	require.Eventually(t, func() bool { return started.Load() == 1 }, eventually, time.Millisecond)
	inflight := func() int {
		n := 0
		for _, cs := range server.Conns(s) {
			n += cs.Inflight
		}
		return n
	}
	require.Eventually(t, func() bool { return inflight() == server.PlainAhead }, eventually, time.Millisecond,
		"the reader reads PlainAhead calls ahead")
	require.Never(t, func() bool { return inflight() > server.PlainAhead }, 100*time.Millisecond, time.Millisecond)
	require.LessOrEqual(t, runtime.NumGoroutine()-base, server.PlainAhead+8, "a goroutine per call read ahead, no more")

	open()
	select {
	case err := <-sent:
		require.NoError(t, err)
	case <-time.After(eventually):
		t.Fatal("the client could not send its calls")
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == calls+1
	}, eventually, time.Millisecond)
	mu.Lock()
	for i, v := range ran {
		require.Equal(t, int32(i-1), v, "calls run in the order sent")
	}
	mu.Unlock()
	require.Eventually(t, func() bool { return inflight() == 0 }, eventually, time.Millisecond)
}
