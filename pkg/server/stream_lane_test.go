//go:build cgo && linux

package server_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
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

// laneStreams is startStreams on a server granting the fast path, with
// "L:wait": a server stream that sends one message, then waits for its
// context's end and reports it on ended.
func laneStreams(t *testing.T, opts ...server.Option) (*server.Server, *streamSvc, string) {
	t.Helper()
	s, sv, addr := startStreams(t, append([]server.Option{server.WithRDMA(fastpathtest.Provider())}, opts...)...)
	s.Register(&server.Service{Name: "L", Methods: []server.Method{{Name: "wait", Stream: stream.Server,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			if err := ss.SendMsg(&wiretest.EchoArgs{Msg: "first"}); err != nil {
				return nil, err
			}
			<-ctx.Done()
			sv.ended <- ctx.Err()
			return nil, ctx.Err()
		}}, {Name: "paced", Stream: stream.Server,
		// paced: Mode messages of the request's Blob, each after the
		// first sent once sv.pace says so, and the end once it says so
		// again (so the last message's reply holds it alone).
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			for i := range int(a.Mode) {
				if i > 0 {
					select {
					case <-sv.pace:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				if err := ss.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: a.Blob}); err != nil {
					return nil, err
				}
			}
			select {
			case <-sv.pace:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, nil
		}}}})
	return s, sv, addr
}

// laneBatchBytes is the server's laneBatch: a reply's frames at most.
const laneBatchBytes = 1<<20 + 256<<10

func lWait() *client.Method { return &client.Method{Service: "L", Name: "wait", Stream: stream.Server} }

func serverMetric(t *testing.T, s *server.Server, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	return metricValue(mfs, name, labels)
}

func lanesOpen(t *testing.T, s *server.Server) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "hatrpc_server_lanes" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

// A server stream takes a lane where the session granted the fast path:
// its messages, headers, trailers, declared and application exceptions,
// large values past the byte window, as on TCP; the lane carries the
// next stream once one ended (one lane for them all).
func TestServerStreamOnLane(t *testing.T) {
	s, _, addr := laneStreams(t)
	c := dial(t, addr)
	tab := c.Plan("S:count")
	require.Equal(t, fastpathtest.Transport(), tab.Transport.String(), "the plan gives server streams a lane")
	require.Equal(t, hints.RouteLane, tab.Rows[0].Route)
	require.Equal(t, hints.RouteLane, s.Plan("S:count", tab.Transport).Rows[0].Route)
	tests := []struct {
		name  string
		mode  int32
		blob  int
		check func(t *testing.T, final *wiretest.EchoResult, err error)
	}{
		{"clean", 5, 0, func(t *testing.T, _ *wiretest.EchoResult, err error) { require.Equal(t, io.EOF, err) }},
		{"large values", 6, 300 << 10, func(t *testing.T, _ *wiretest.EchoResult, err error) { require.Equal(t, io.EOF, err) }},
		// Many large replies in order (written into the lane's reply
		// memory or queued, as the scheduling falls:
		// TestServerStreamWritesInPlace pins the first).
		{"bulk", 64, 64 << 10, func(t *testing.T, _ *wiretest.EchoResult, err error) { require.Equal(t, io.EOF, err) }},
		// Values larger than a reply's lease (laneBatch) go by the queue.
		{"past the lease", 3, laneBatchBytes + 512<<10, func(t *testing.T, _ *wiretest.EchoResult, err error) { require.Equal(t, io.EOF, err) }},
		{"declared exception", -3, 10, func(t *testing.T, final *wiretest.EchoResult, err error) {
			require.Equal(t, io.EOF, err)
			require.NotNil(t, final.Err)
			require.Equal(t, "declared", final.Err.Why)
		}},
		{"application exception", 1000, 0, func(t *testing.T, _ *wiretest.EchoResult, err error) {
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			require.Contains(t, ae.Message, "mid-stream failure")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := metadata.NewOutgoingContext(tctx(t), metadata.Pairs("who", tt.name))
			var final wiretest.EchoResult
			st, err := c.NewStream(ctx, sMethod("count", stream.Server), &final)
			require.NoError(t, err)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: tt.mode, Blob: make([]byte, tt.blob)}))
			require.NoError(t, st.CloseSend())
			md, err := st.Header()
			require.NoError(t, err)
			require.Equal(t, tt.name, md["hello"])
			n := 0
			for ; ; n++ {
				var a wiretest.EchoArgs
				if err = st.RecvMsg(&a); err != nil {
					break
				}
				require.Equal(t, strconv.Itoa(n), a.Msg)
				if tt.mode != 1000 {
					require.Len(t, a.Blob, tt.blob)
				}
			}
			tt.check(t, &final, err)
			want := int(tt.mode)
			if want == 1000 {
				want = 1
			}
			require.Equal(t, max(want, -want), n)
		})
	}
	lane, tcp := c.StreamRoutes()
	require.Equal(t, uint64(len(tests)), lane)
	require.Zero(t, tcp)
	require.Equal(t, float64(len(tests)), serverMetric(t, s, "hatrpc_server_stream_messages_total",
		map[string]string{"function": "count", "direction": "in"}))
	stats := c.LaneStats()
	require.Len(t, stats, 1, "the streams' lane pool")
	require.Equal(t, 1, stats[0].Lanes, "one stream after another: one lane")
}

// The plan is what runs: every stream's table is the lane's where the
// session granted one (hints.LanesCarry), on both sides, and never FLOCK.
func TestStreamPlanOnLanes(t *testing.T) {
	s, _, addr := laneStreams(t)
	c := dial(t, addr, client.WithHints(&hints.Service{Name: "S", Functions: []hints.Function{
		{Name: "count", Stream: stream.Server}, {Name: "echo", Stream: stream.Bidi}, {Name: "sum", Stream: stream.Client}}}))
	tr := fastpathtest.Transport()
	for _, fn := range []string{"S:count", "S:echo", "S:sum"} {
		for _, tab := range []hints.Table{c.Plan(fn), s.Plan(fn, c.Plan(fn).Transport)} {
			require.Equal(t, tr, tab.Transport.String(), fn)
			require.NotEmpty(t, tab.Lane, fn)
			for _, r := range tab.Rows {
				require.Equal(t, hints.RouteLane, r.Route, "%s: a stream never rides FLOCK", fn)
			}
		}
	}
}

// A message the handler writes after a large reply goes straight into
// registered memory: the exchange sending that reply lent the outbox the
// engine's other staging buffer for the next (NextReplyBuffer), and the
// next poll finds it lent. The handler writes each next message only once
// that poll is held, so every one of them is written in place, on either
// provider, and each reply but the stream's last lent the next one.
func TestServerStreamWritesInPlace(t *testing.T) {
	s, sv, addr := laneStreams(t)
	c := dial(t, addr)
	const n, blob = 4, 64 << 10
	var final wiretest.EchoResult
	st, err := c.NewStream(tctx(t), &client.Method{Service: "L", Name: "paced", Stream: stream.Server}, &final)
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: n, Blob: make([]byte, blob)}))
	require.NoError(t, st.CloseSend())
	polls, lent, next := server.LentStreamPolls(s), server.LentStreamReplies(s), server.NextStreamLeases(s)
	for i := range n {
		if i > 0 {
			require.Eventually(t, func() bool { return server.LentStreamPolls(s) == polls+uint64(i) }, eventually, time.Millisecond,
				"the poll after message %d lends the reply memory", i-1)
			select {
			case sv.pace <- struct{}{}:
			case <-time.After(eventually):
				t.Fatal("the handler did not take its pace")
			}
		}
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, strconv.Itoa(i), a.Msg)
		require.Len(t, a.Blob, blob)
		require.Equal(t, lent+uint64(i), server.LentStreamReplies(s), "message %d written in place", i)
		if i < n-1 { // as before the end waited for its pace: not asserted for the last
			require.Equal(t, next+uint64(i+1), server.NextStreamLeases(s), "message %d's reply lent the next", i)
		}
	}
	// The end only now: written at once after the last message, it could
	// go in a reply of its own, counted before the check above.
	select {
	case sv.pace <- struct{}{}:
	case <-time.After(eventually):
		t.Fatal("the handler did not take its pace")
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
}

// A consumer that stops reading bounds the server at the client's window
// on a lane as on TCP: the client polls only while the server may send.
func TestServerStreamOnLaneSlowConsumer(t *testing.T) {
	const window, blob, total = 5, 8 << 10, 40
	s, _, addr := laneStreams(t)
	c := dial(t, addr, client.WithStreamWindow(window, 0, 0))
	st, err := c.NewStream(tctx(t), sMethod("count", stream.Server), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: total, Blob: make([]byte, blob)}))
	require.NoError(t, st.CloseSend())
	sent := func() float64 {
		return serverMetric(t, s, "hatrpc_server_stream_messages_total", map[string]string{"function": "count", "direction": "out"})
	}
	require.Eventually(t, func() bool { return sent() == window }, eventually, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // room for a violation to show, never for a false failure
	require.Equal(t, float64(window), sent())
	for i := range total {
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, strconv.Itoa(i), a.Msg)
		require.Len(t, a.Blob, blob)
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	require.Equal(t, float64(total), sent())
	lane, _ := c.StreamRoutes()
	require.Equal(t, uint64(1), lane)
}

// With no message window set, a lane stream's message window scales with
// its byte window (1 MiB / 128 B: 8192 messages), so small messages are
// bounded by bytes, not by 16 an exchange; large ones stop at the byte
// window as before. A consumer that does not read holds the server there.
func TestServerStreamOnLaneWindowByBytes(t *testing.T) {
	tests := []struct {
		name        string
		blob, total int
		window      float64 // messages the server sends before credit
	}{
		{"small messages: the scaled message window", 16, 9000, 1 << 20 / 128},
		{"large messages: the byte window", 64 << 10, 40, 16},
		{"a message past one exchange's batch and the window: alone", 3 << 20, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, addr := laneStreams(t)
			c := dial(t, addr)
			st, err := c.NewStream(tctx(t), sMethod("count", stream.Server), &wiretest.EchoResult{})
			require.NoError(t, err)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: int32(tt.total), Blob: make([]byte, tt.blob)}))
			require.NoError(t, st.CloseSend())
			sent := func() float64 {
				return serverMetric(t, s, "hatrpc_server_stream_messages_total", map[string]string{"function": "count", "direction": "out"})
			}
			require.Eventually(t, func() bool { return sent() == tt.window }, eventually, time.Millisecond)
			time.Sleep(100 * time.Millisecond) // room for a violation to show, never for a false failure
			require.Equal(t, tt.window, sent())
			for i := range tt.total {
				var a wiretest.EchoArgs
				require.NoError(t, st.RecvMsg(&a))
				require.Equal(t, strconv.Itoa(i), a.Msg)
				require.Len(t, a.Blob, tt.blob)
			}
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			lane, _ := c.StreamRoutes()
			require.Equal(t, uint64(1), lane)
		})
	}
}

// Canceling the stream's context, or its deadline, ends it on both sides
// while the client waits on the lane (a poll the server holds): the
// handler's context ends, and the lane is released.
func TestServerStreamOnLaneCancelAndDeadline(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func(context.Context, time.Duration) (context.Context, context.CancelFunc)
		server  error
		client  error
		trigger bool
	}{
		{"cancel", func(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
			return context.WithCancel(ctx)
		}, context.Canceled, context.Canceled, true},
		{"deadline", context.WithTimeout, context.DeadlineExceeded, context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The deadline must pass after the first exchange (what is
			// tested is the wait that follows it): a host too loaded to
			// set the lane up and answer within it tries again on a new
			// server with twice the deadline.
			var (
				s  *server.Server
				sv *streamSvc
				c  *client.Conn
				st client.Stream
			)
			for d := 500 * time.Millisecond; ; d *= 2 {
				var addr string
				s, sv, addr = laneStreams(t)
				c = dial(t, addr)
				ctx, cancel := tt.ctx(tctx(t), d)
				defer cancel()
				var err error
				st, err = c.NewStream(ctx, lWait(), &wiretest.EchoResult{})
				var a wiretest.EchoArgs
				if err == nil {
					require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x"}))
					require.NoError(t, st.CloseSend())
					err = st.RecvMsg(&a)
				}
				if !tt.trigger && errors.Is(err, context.DeadlineExceeded) && d < testenv.HangGuard(time.Minute) {
					t.Logf("the first exchange took longer than %v: again with twice the deadline", d)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, "first", a.Msg)
				if tt.trigger {
					cancel()
				}
				break
			}
			require.ErrorIs(t, st.RecvMsg(&wiretest.EchoArgs{}), tt.client)
			select {
			case err := <-sv.ended:
				// A deadline ends the handler by the server's own timer,
				// or by the lane's end when the client's came first.
				if tt.server == context.Canceled {
					require.ErrorIs(t, err, context.Canceled)
				} else {
					require.Error(t, err)
				}
			case <-time.After(eventually):
				t.Fatal("the handler did not end")
			}
			require.Eventually(t, func() bool { n, b := server.StreamState(s); return n == 0 && b == 0 }, eventually, time.Millisecond)
			lane, _ := c.StreamRoutes()
			require.Equal(t, uint64(1), lane)
		})
	}
}

// A client that goes with streams open on lanes leaves nothing behind:
// handlers end, lanes close (the gauge counts a lane until its buffers
// are freed), and no goroutine of a lane or a stream is left on either
// side.
func TestServerStreamOnLaneClientKilled(t *testing.T) {
	s, sv, addr := laneStreams(t)
	// The server's own goroutines (accept loop, sweepers) are running
	// once a connection was served.
	c0 := dial(t, addr)
	st0, err := c0.NewStream(tctx(t), sMethod("count", stream.Server), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st0.SendMsg(&wiretest.EchoArgs{Mode: 1}))
	require.NoError(t, st0.RecvMsg(&wiretest.EchoArgs{}))
	require.NoError(t, c0.Close())
	require.Eventually(t, func() bool { return lanesOpen(t, s) == 0 && laneGoroutines() == "" }, eventually, time.Millisecond)
	c, err := client.Dial(tctx(t), addr)
	require.NoError(t, err)
	const n = 3
	for range n {
		st, err := c.NewStream(tctx(t), lWait(), &wiretest.EchoResult{})
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{}))
		require.NoError(t, st.CloseSend())
		require.NoError(t, st.RecvMsg(&wiretest.EchoArgs{}))
	}
	lane, _ := c.StreamRoutes()
	require.Equal(t, uint64(n), lane)
	require.Equal(t, float64(n), lanesOpen(t, s), "a lane per open stream")
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
	// (Pooled server workers outlive it by design: they idle out later.)
	require.Eventually(t, func() bool { return laneGoroutines() == "" }, eventually, time.Millisecond, "%s", laneGoroutines)
}

// laneGoroutines lists the goroutines of lane streams still running on
// either side.
func laneGoroutines() string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "laneRunner") || strings.Contains(g, "serverStream") || strings.Contains(g, "laneSession") || strings.Contains(g, "fastpath.Watch") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// With every lane of the function held by a stream, the next stream goes
// over TCP rather than wait (the streams holding the lanes may wait on
// this caller), counted in StreamRoutes.
func TestServerStreamLanesExhausted(t *testing.T) {
	s, sv, addr := laneStreams(t)
	c := dial(t, addr, client.WithMaxLanes(1))
	ctx, cancel := context.WithCancel(tctx(t))
	defer cancel()
	held, err := c.NewStream(ctx, lWait(), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, held.SendMsg(&wiretest.EchoArgs{}))
	require.NoError(t, held.RecvMsg(&wiretest.EchoArgs{}))
	st, err := c.NewStream(tctx(t), lWait(), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{}))
	var a wiretest.EchoArgs
	require.NoError(t, st.RecvMsg(&a))
	require.Equal(t, "first", a.Msg)
	lane, tcp := c.StreamRoutes()
	require.Equal(t, uint64(1), lane)
	require.Equal(t, uint64(1), tcp)
	// The server counts each stream by the route it came by.
	for _, route := range []string{"lane", "tcp"} {
		require.Equal(t, 1.0, serverMetric(t, s, "hatrpc_server_streams_opened_total",
			map[string]string{"service": "L", "function": "wait", "route": route}), route)
	}
	cancel()
	require.ErrorIs(t, held.RecvMsg(&wiretest.EchoArgs{}), context.Canceled)
	require.ErrorIs(t, <-sv.ended, context.Canceled)
}

// Interceptors see a stream on a lane as on TCP, on both sides.
func TestServerStreamOnLaneInterceptors(t *testing.T) {
	var seen atomic.Int32
	_, _, addr := laneStreams(t, server.WithStreamInterceptors(func(ctx context.Context, info *server.StreamInfo, ss server.ServerStream, next server.StreamHandler) (proto.Struct, error) {
		if info.Method.Name == "count" {
			seen.Add(1)
		}
		return next(ctx, ss)
	}))
	var opened atomic.Int32
	c := dial(t, addr, client.WithStreamInterceptors(func(ctx context.Context, m *client.Method, final proto.Struct, next client.StreamOpener) (client.Stream, error) {
		opened.Add(1)
		return next(ctx, m, final)
	}))
	st, err := c.NewStream(tctx(t), sMethod("count", stream.Server), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: 2}))
	require.NoError(t, st.CloseSend())
	for range 2 {
		require.NoError(t, st.RecvMsg(&wiretest.EchoArgs{}))
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	lane, _ := c.StreamRoutes()
	require.Equal(t, uint64(1), lane)
	require.Equal(t, int32(1), opened.Load())
	require.Equal(t, int32(1), seen.Load())
}

// A server stream the handler ends before the client's CloseSend: on a
// lane, as on TCP, CloseSend succeeds (RecvMsg told how the stream
// ended), not failing on the lane's closed outbox ("the lane carrying the
// stream is gone": hatkv's generated ScanStream failed with it on an
// empty range, whose end came in the exchange that carried the request).
func TestServerStreamOnLaneEndedBeforeCloseSend(t *testing.T) {
	s, _, addr := laneStreams(t)
	s.Register(&server.Service{Name: "Q", Methods: []server.Method{{Name: "quick", Stream: stream.Server,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			return nil, ss.RecvMsg(&a)
		}}}})
	c := dial(t, addr)
	st, err := c.NewStream(tctx(t), &client.Method{Service: "Q", Name: "quick", Stream: stream.Server}, &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "req"}))
	require.ErrorIs(t, st.RecvMsg(&wiretest.EchoArgs{}), io.EOF)
	require.NoError(t, st.CloseSend())
	lane, _ := c.StreamRoutes()
	require.Equal(t, uint64(1), lane, "the stream rode a lane")
}
