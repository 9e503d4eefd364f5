//go:build cgo && linux

package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// duplexStreams is laneStreams with "D:fail", a bidirectional stream
// echoing each message until "declared" (it ends with the declared
// exception) or "app" (an application exception), its header and a
// trailer set.
func duplexStreams(t *testing.T, opts ...server.Option) (*server.Server, *streamSvc, string) {
	t.Helper()
	s, sv, addr := laneStreams(t, opts...)
	s.Register(&server.Service{Name: "D", Methods: []server.Method{{Name: "fail", Stream: stream.Bidi,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			if err := ss.SendHeader(metadata.Pairs("side", "server")); err != nil {
				return nil, err
			}
			ss.SetTrailer(metadata.Pairs("end", "trailer"))
			for {
				var a wiretest.EchoArgs
				if err := ss.RecvMsg(&a); err != nil {
					return nil, err
				}
				switch a.Msg {
				case "declared":
					return &wiretest.EchoResult{Err: &wiretest.EchoError{Code: 7, Why: "declared"}}, nil
				case "app":
					return nil, proto.NewApplicationException(proto.ExcInternalError, "mid-stream failure")
				}
				if err := ss.SendMsg(&a); err != nil {
					return nil, err
				}
			}
		}}, {Name: "first", Stream: stream.Client,
		// first: a client stream whose handler returns after one message.
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			return &wiretest.EchoResult{Success: &a.Msg}, nil
		}}}})
	return s, sv, addr
}

// requireOnLanes checks that n streams of fn rode lanes, on both sides,
// and none of c's went over TCP.
func requireOnLanes(t *testing.T, s *server.Server, c *client.Conn, svc, fn string, n int) {
	t.Helper()
	lane, tcp := c.StreamRoutes()
	require.GreaterOrEqual(t, lane, uint64(n), "streams on lanes")
	require.Zero(t, tcp)
	require.Equal(t, float64(n), serverMetric(t, s, "hatrpc_server_streams_opened_total",
		map[string]string{"service": svc, "function": fn, "route": "lane"}))
}

// Client and bidirectional streams take lanes (two each) where the
// session granted the fast path, and behave as on TCP: messages in
// order, the final reply, trailers, io.EOF, a declared or application
// exception mid-stream; the plan says lanes on both sides.
func TestClientBidiStreamsOnLanes(t *testing.T) {
	s, _, addr := duplexStreams(t)
	c := dial(t, addr)
	tr := fastpathtest.Transport()
	for _, fn := range []string{"S:sum", "S:echo"} {
		tab := c.Plan(fn)
		require.Equal(t, tr, tab.Transport.String(), fn)
		require.Equal(t, hints.RouteLane, tab.Rows[0].Route, fn)
		require.Equal(t, hints.RouteLane, s.Plan(fn, tab.Transport).Rows[0].Route, fn)
	}
	t.Run("client stream", func(t *testing.T) {
		for round := range 3 { // the lanes carry one stream after another
			var res wiretest.EchoResult
			st, err := c.NewStream(tctx(t), sMethod("sum", stream.Client), &res)
			require.NoError(t, err)
			want := ""
			for i := range 200 {
				m := strconv.Itoa(i%10) + "."
				want += m
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: m}))
			}
			require.NoError(t, st.CloseSend())
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			require.NotNil(t, res.Success)
			require.Equal(t, want, *res.Success, "the messages arrived in order")
			require.Equal(t, strconv.Itoa(len(want)), st.Trailer()["count"])
			requireOnLanes(t, s, c, "S", "sum", round+1)
		}
	})
	t.Run("client stream of large messages", func(t *testing.T) {
		var res wiretest.EchoResult
		st, err := c.NewStream(tctx(t), sMethod("sum", stream.Client), &res)
		require.NoError(t, err)
		for range 40 { // 5 MiB: past the byte window and one exchange's batch
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x", Blob: make([]byte, 128<<10)}))
		}
		require.NoError(t, st.CloseSend())
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		require.Equal(t, 40, len(*res.Success))
	})
	t.Run("bidi", func(t *testing.T) {
		st, err := c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		for i := range 100 {
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i)}))
			var a wiretest.EchoArgs
			require.NoError(t, st.RecvMsg(&a))
			require.Equal(t, strconv.Itoa(i), a.Msg)
		}
		// A burst, then every echo in order.
		for i := range 500 {
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i)}))
		}
		require.NoError(t, st.CloseSend())
		for i := range 500 {
			var a wiretest.EchoArgs
			require.NoError(t, st.RecvMsg(&a))
			require.Equal(t, strconv.Itoa(i), a.Msg)
		}
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		requireOnLanes(t, s, c, "S", "echo", 1)
	})
	t.Run("bidi of large messages", func(t *testing.T) {
		// A burst of sizes on both sides of the 16 KiB from which the
		// client's second lane takes its batch into the engine's staging
		// buffer (and a large first batch, which the join frame keeps in
		// the runner's own buffer): every byte echoed back, in order.
		st, err := c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		sizes := []int{100 << 10, 64 << 10, 10, 20 << 10, 1 << 10, 300 << 10, 16 << 10, 5}
		blob := func(i int) []byte {
			b := make([]byte, sizes[i%len(sizes)])
			for j := range b {
				b[j] = byte(i*7 + j*13)
			}
			return b
		}
		const n = 48
		got := make(chan error, 1)
		go func() {
			for i := range n {
				var a wiretest.EchoArgs
				if err := st.RecvMsg(&a); err != nil {
					got <- err
					return
				}
				if a.Msg != strconv.Itoa(i) || !bytes.Equal(a.Blob, blob(i)) {
					got <- fmt.Errorf("echo %d: message %q, %d bytes, not as sent", i, a.Msg, len(a.Blob))
					return
				}
			}
			got <- st.RecvMsg(&wiretest.EchoArgs{})
		}()
		for i := range n {
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: blob(i)}))
		}
		require.NoError(t, st.CloseSend())
		select {
		case err := <-got:
			require.Equal(t, io.EOF, err)
		case <-time.After(eventually):
			t.Fatal("the echoes did not come")
		}
	})
	exc := []struct {
		name  string
		last  string
		check func(t *testing.T, final *wiretest.EchoResult, err error)
	}{
		{"declared exception", "declared", func(t *testing.T, final *wiretest.EchoResult, err error) {
			require.Equal(t, io.EOF, err)
			require.NotNil(t, final.Err)
			require.Equal(t, "declared", final.Err.Why)
		}},
		{"application exception", "app", func(t *testing.T, _ *wiretest.EchoResult, err error) {
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, "mid-stream failure", ae.Message)
		}},
	}
	for i, tt := range exc {
		t.Run(tt.name, func(t *testing.T) {
			var final wiretest.EchoResult
			st, err := c.NewStream(tctx(t), &client.Method{Service: "D", Name: "fail", Stream: stream.Bidi}, &final)
			require.NoError(t, err)
			md, err := st.Header()
			require.NoError(t, err)
			require.Equal(t, "server", md["side"])
			for _, m := range []string{"a", "b"} {
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: m}))
				var a wiretest.EchoArgs
				require.NoError(t, st.RecvMsg(&a))
				require.Equal(t, m, a.Msg)
			}
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: tt.last}))
			tt.check(t, &final, st.RecvMsg(&wiretest.EchoArgs{}))
			require.Equal(t, "trailer", st.Trailer()["end"])
			requireOnLanes(t, s, c, "D", "fail", i+1)
		})
	}
	require.Eventually(t, func() bool { n, b := server.StreamState(s); return n == 0 && b == 0 }, eventually, time.Millisecond)
	stats := c.LaneStats()
	for _, st := range stats {
		require.LessOrEqual(t, st.Lanes, 2, "one stream after another: two lanes per function (%s)", st.Function)
	}
}

// Ping-pong: each side waits for the other's message before it sends its
// own. On one lane the client's next message could wait behind a poll
// the server holds for the echo of that message; on two it never does.
// Many streams, many rounds, several at once.
func TestBidiPingPongOnLanes(t *testing.T) {
	s, _, addr := duplexStreams(t)
	c := dial(t, addr)
	streams, rounds := 40, 50
	if testenv.Race {
		streams = 12
	}
	const parallel = 4
	var wg sync.WaitGroup
	errs := make(chan error, parallel)
	for g := range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				for k := range streams / parallel {
					st, err := c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
					if err != nil {
						return err
					}
					for i := range rounds {
						m := strconv.Itoa(g) + "/" + strconv.Itoa(k) + "/" + strconv.Itoa(i)
						if err := st.SendMsg(&wiretest.EchoArgs{Msg: m}); err != nil {
							return err
						}
						var a wiretest.EchoArgs
						if err := st.RecvMsg(&a); err != nil {
							return err
						}
						if a.Msg != m {
							return errors.New("echo " + a.Msg + " for " + m)
						}
					}
					if err := st.CloseSend(); err != nil {
						return err
					}
					if err := st.RecvMsg(&wiretest.EchoArgs{}); err != io.EOF {
						return errors.New("end: " + err.Error())
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	lane, tcp := c.StreamRoutes()
	require.Equal(t, uint64(streams/parallel*parallel), lane+tcp)
	require.NotZero(t, lane)
	require.Equal(t, float64(lane), serverMetric(t, s, "hatrpc_server_streams_opened_total",
		map[string]string{"service": "S", "function": "echo", "route": "lane"}))
	require.Eventually(t, func() bool { n, b := server.StreamState(s); return n == 0 && b == 0 }, eventually, time.Millisecond)
}

// The fault cases of issue 46 on lanes, for client and bidirectional
// streams.
func TestClientBidiStreamFaultsOnLanes(t *testing.T) {
	t.Run("a handler that stops reading bounds the sender at its window", func(t *testing.T) {
		const window = 5
		s, sv, addr := duplexStreams(t, server.WithStreamWindow(window, 0, 0))
		c := dial(t, addr)
		st, err := c.NewStream(tctx(t), sMethod("hold", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		sent := make(chan int, 1)
		go func() {
			n := 0
			for ; n < 3*window; n++ {
				if st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(n)}) != nil {
					break
				}
			}
			sent <- n
			_ = st.CloseSend()
		}()
		buffered := func() int64 { _, b := server.StreamState(s); return b }
		require.Eventually(t, func() bool { return buffered() > 0 }, eventually, time.Millisecond)
		time.Sleep(100 * time.Millisecond) // room for a violation to show, never for a false failure
		select {
		case n := <-sent:
			t.Fatalf("the sender sent %d messages past a window of %d", n, window)
		default:
		}
		_, b := server.StreamState(s)
		require.LessOrEqual(t, b, int64(window*16), "the server holds at most its window")
		close(sv.release)
		select {
		case n := <-sent:
			require.Equal(t, 3*window, n)
		case <-time.After(eventually):
			t.Fatal("the sender stayed blocked after the handler read")
		}
		require.ErrorIs(t, <-sv.ended, io.EOF)
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		requireOnLanes(t, s, c, "S", "hold", 1)
	})
	t.Run("a handler returning early: the client's SendMsg gets io.EOF", func(t *testing.T) {
		s, _, addr := duplexStreams(t)
		c := dial(t, addr)
		st, err := c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "early"}))
		var err2 error
		for range 100000 {
			if err2 = st.SendMsg(&wiretest.EchoArgs{Msg: "more"}); err2 != nil {
				break
			}
		}
		require.Equal(t, io.EOF, err2)
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		require.NoError(t, st.CloseSend())
		requireOnLanes(t, s, c, "S", "echo", 1)
		require.Eventually(t, func() bool { n, b := server.StreamState(s); return n == 0 && b == 0 }, eventually, time.Millisecond)
	})
	t.Run("a deadline expiring mid-stream", func(t *testing.T) {
		s, sv, addr := duplexStreams(t)
		c := dial(t, addr)
		// "hold" answers nothing until its context ends, so the deadline
		// expires mid-stream however long it is: long enough for four
		// lanes' setup on a loaded host or in the VM (300 ms was not).
		ctx, cancel := context.WithTimeout(tctx(t), testenv.HangGuard(time.Second))
		defer cancel()
		st, err := c.NewStream(ctx, sMethod("hold", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x"}))
		require.ErrorIs(t, st.RecvMsg(&wiretest.EchoArgs{}), context.DeadlineExceeded)
		select {
		case err := <-sv.ended:
			require.Error(t, err) // the server's timer, or the lanes' end when the client's came first
		case <-time.After(eventually):
			t.Fatal("the handler did not end")
		}
		require.Eventually(t, func() bool { n, b := server.StreamState(s); return n == 0 && b == 0 }, eventually, time.Millisecond)
		requireOnLanes(t, s, c, "S", "hold", 1)
	})
	t.Run("a client stream's handler returning early", func(t *testing.T) {
		s, _, addr := duplexStreams(t)
		c := dial(t, addr)
		var res wiretest.EchoResult
		st, err := c.NewStream(tctx(t), &client.Method{Service: "D", Name: "first", Stream: stream.Client}, &res)
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "a"}))
		var err2 error
		for range 100000 {
			if err2 = st.SendMsg(&wiretest.EchoArgs{Msg: "more"}); err2 != nil {
				break
			}
		}
		require.Equal(t, io.EOF, err2)
		require.NoError(t, st.CloseSend())
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		require.Equal(t, "a", *res.Success)
		requireOnLanes(t, s, c, "D", "first", 1)
		require.Eventually(t, func() bool { n, b := server.StreamState(s); return n == 0 && b == 0 }, eventually, time.Millisecond)
	})
}

// A client that goes with client and bidirectional streams open on lanes
// leaves nothing behind: handlers end, both lanes of each stream close,
// no goroutine of a lane or a stream is left on either side, and the
// memory its messages held of the budget is given back.
func TestClientBidiStreamOnLaneClientKilled(t *testing.T) {
	s, sv, addr := duplexStreams(t, server.WithMemoryBudget(256<<20, 64<<20))
	c0 := dial(t, addr)
	st0, err := c0.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st0.SendMsg(&wiretest.EchoArgs{Msg: "warm"}))
	require.NoError(t, st0.RecvMsg(&wiretest.EchoArgs{}))
	require.NoError(t, c0.Close())
	require.Eventually(t, func() bool { return lanesOpen(t, s) == 0 && laneGoroutines() == "" }, eventually, time.Millisecond, "%s", laneGoroutines)
	c, err := client.Dial(tctx(t), addr)
	require.NoError(t, err)
	const n = 3
	for range n {
		st, err := c.NewStream(tctx(t), sMethod("hold", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		// Held by the handler, which does not read: charged to the
		// connection's share of the memory budget.
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x", Blob: make([]byte, 96<<10)}))
	}
	lane, _ := c.StreamRoutes()
	require.Equal(t, uint64(n), lane)
	require.Eventually(t, func() bool { return server.BudgetUsed(s) >= n*(96<<10) }, eventually, time.Millisecond,
		"the messages held count against the budget")
	require.Equal(t, float64(2*n), lanesOpen(t, s), "two lanes per open stream")
	require.NoError(t, c.Close())
	for range n {
		select {
		case err := <-sv.ended:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(eventually):
			t.Fatal("a handler outlived its client")
		}
	}
	require.Eventually(t, func() bool { return lanesOpen(t, s) == 0 }, eventually, time.Millisecond)
	require.Eventually(t, func() bool { k, b := server.StreamState(s); return k == 0 && b == 0 }, eventually, time.Millisecond)
	require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, time.Millisecond)
	require.Eventually(t, func() bool { return laneGoroutines() == "" }, eventually, time.Millisecond, "%s", laneGoroutines)
}

// A client stream's messages on lanes are charged to the connection's
// share of the request memory budget: one the budget cannot take resets
// the stream with the TCP reader's text, and the server carries on.
func TestClientStreamOnLaneOverBudget(t *testing.T) {
	s, sv, addr := duplexStreams(t, server.WithMemoryBudget(1<<20, 256<<10), server.WithBusyTimeout(50*time.Millisecond))
	c := dial(t, addr)
	st, err := c.NewStream(tctx(t), sMethod("hold", stream.Bidi), &wiretest.EchoResult{})
	require.NoError(t, err)
	var serr error
	for range 10 { // 10 × 96 KiB held unread, a 256 KiB share
		if serr = st.SendMsg(&wiretest.EchoArgs{Msg: "x", Blob: make([]byte, 96<<10)}); serr != nil {
			break
		}
	}
	rerr := st.RecvMsg(&wiretest.EchoArgs{})
	var ae *proto.ApplicationException
	require.ErrorAs(t, rerr, &ae, "send: %v", serr)
	require.Equal(t, "server busy: request memory budget exhausted", ae.Message)
	select {
	case err := <-sv.ended:
		require.Error(t, err)
	case <-time.After(eventually):
		t.Fatal("the handler did not end")
	}
	require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, time.Millisecond)
	requireOnLanes(t, s, c, "S", "hold", 1)
	// The server carries on: a stream after it runs.
	var res wiretest.EchoResult
	st, err = c.NewStream(tctx(t), sMethod("sum", stream.Client), &res)
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "ok"}))
	require.NoError(t, st.CloseSend())
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	require.Equal(t, "ok", *res.Success)
}

// BenchmarkDuplexStreams compares client and bidirectional streams on
// lanes with the same streams over TCP (a client WithRDMA("off")): a
// 64 B ping-pong (each message waits for the echo of the one before: a
// round trip per op) and a client stream of 64 KiB messages (bytes/s).
// Both report the process's CPU time (cpu-µs/op) and context switches
// (ctxsw/op: voluntary ones are threads going to sleep, each a wake-up
// later) per op, client and server together: where a round trip's time
// goes when it is not CPU.
func BenchmarkDuplexStreams(b *testing.B) {
	_, _, addr := startStreams(b, server.WithRDMA(fastpathtest.Provider()))
	routes := []struct {
		name string
		opts []client.Option
	}{{"lane", nil}, {"tcp", []client.Option{client.WithRDMA("off")}}}
	for _, rt := range routes {
		b.Run("pingpong-64B/"+rt.name, func(b *testing.B) {
			c := dial(b, addr, rt.opts...)
			st, err := c.NewStream(tctx(b), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
			require.NoError(b, err)
			msg := &wiretest.EchoArgs{Blob: make([]byte, 64)}
			var a wiretest.EchoArgs
			b.ResetTimer()
			ru := rusageNow()
			for range b.N {
				require.NoError(b, st.SendMsg(msg))
				require.NoError(b, st.RecvMsg(&a))
			}
			b.StopTimer()
			ru.report(b)
			require.NoError(b, st.CloseSend())
			require.Equal(b, io.EOF, st.RecvMsg(&a))
			lane, _ := c.StreamRoutes()
			require.Equal(b, rt.name == "lane", lane > 0)
		})
		b.Run("client-bulk-64KiB/"+rt.name, func(b *testing.B) {
			c := dial(b, addr, rt.opts...)
			st, err := c.NewStream(tctx(b), sMethod("sum", stream.Client), &wiretest.EchoResult{})
			require.NoError(b, err)
			msg := &wiretest.EchoArgs{Blob: make([]byte, 64<<10)}
			b.SetBytes(64 << 10)
			b.ResetTimer()
			ru := rusageNow()
			for range b.N {
				require.NoError(b, st.SendMsg(msg))
			}
			require.NoError(b, st.CloseSend())
			require.Equal(b, io.EOF, st.RecvMsg(&wiretest.EchoArgs{})) // every message read
			b.StopTimer()
			ru.report(b)
			lane, _ := c.StreamRoutes()
			require.Equal(b, rt.name == "lane", lane > 0)
		})
	}
}

// rusage is the process's resource use at a benchmark's start.
type rusage syscall.Rusage

func rusageNow() rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return rusage(ru)
}

// report reports the CPU time and context switches per op since r.
func (r rusage) report(b *testing.B) {
	now := rusageNow()
	cpu := func(x rusage) time.Duration {
		return time.Duration(syscall.TimevalToNsec(x.Utime) + syscall.TimevalToNsec(x.Stime))
	}
	n := float64(b.N)
	b.ReportMetric(float64((cpu(now)-cpu(r)).Microseconds())/n, "cpu-µs/op")
	b.ReportMetric(float64(now.Nvcsw-r.Nvcsw)/n, "vctxsw/op")
	b.ReportMetric(float64(now.Nivcsw-r.Nivcsw)/n, "ivctxsw/op")
}

// A client or bidirectional stream needs two lanes: with one allowed it
// goes over TCP at once (counted in StreamRoutes), and the lane it did
// take goes back for the next stream or call.
func TestBidiStreamNeedsTwoLanes(t *testing.T) {
	s, _, addr := duplexStreams(t)
	c := dial(t, addr, client.WithMaxLanes(1))
	st, err := c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x"}))
	var a wiretest.EchoArgs
	require.NoError(t, st.RecvMsg(&a))
	require.Equal(t, "x", a.Msg)
	require.NoError(t, st.CloseSend())
	require.Equal(t, io.EOF, st.RecvMsg(&a))
	lane, tcp := c.StreamRoutes()
	require.Zero(t, lane)
	require.Equal(t, uint64(1), tcp)
	require.Equal(t, 1.0, serverMetric(t, s, "hatrpc_server_streams_opened_total",
		map[string]string{"service": "S", "function": "echo", "route": "tcp"}))
	// A server stream of the same Conn still takes its one lane.
	st, err = c.NewStream(tctx(t), sMethod("count", stream.Server), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: 2}))
	require.NoError(t, st.CloseSend())
	for range 2 {
		require.NoError(t, st.RecvMsg(&a))
	}
	require.Equal(t, io.EOF, st.RecvMsg(&a))
	lane, _ = c.StreamRoutes()
	require.Equal(t, uint64(1), lane)
}

// Both server lanes of a client or bidirectional stream park their waits
// while the stream lasts (the first's next request, a poll, waits on the
// client's runner; the second's, the caller's next frame, may wait on the
// handler: a thread spinning or blocked in C for them kept the cores or
// threads the stream's goroutines needed), and wait as any lane again as
// the first leaves the stream, before the client has the end (pkg/client
// TestDuplexStreamLanesBlockWaits: the client's).
func TestDuplexStreamLanesBlockWaits(t *testing.T) {
	s, _, addr := duplexStreams(t)
	c := dial(t, addr)
	tests := []struct {
		name string
		mode stream.Mode
		fn   string
	}{{"bidi", stream.Bidi, "echo"}, {"client", stream.Client, "sum"}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := c.NewStream(tctx(t), sMethod(tc.fn, tc.mode), &wiretest.EchoResult{})
			require.NoError(t, err)
			var a wiretest.EchoArgs
			if tc.mode == stream.Bidi {
				// The first message may go with the open on the first lane;
				// the second, sent once the first lane's first exchange is
				// over, goes on the second lane (joining with it): its echo
				// came, so both lanes carry the stream.
				for _, msg := range []string{"x", "y"} {
					require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: msg}))
					require.NoError(t, st.RecvMsg(&a))
					require.Equal(t, msg, a.Msg)
				}
				require.Equal(t, 2, server.BlockedLaneWaits(s))
			} else {
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x"}))
			}
			require.NoError(t, st.CloseSend())
			require.Equal(t, io.EOF, st.RecvMsg(&a))
			require.Zero(t, server.BlockedLaneWaits(s))
		})
	}
	requireOnLanes(t, s, c, "S", "sum", 1)
}
