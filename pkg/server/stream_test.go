package server_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
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
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// streamSvc is a service of streaming functions over the echo test
// structs: EchoArgs are the messages both ways, EchoResult the final.
type streamSvc struct {
	ended   chan error    // each blocking handler's end: its context's error
	release chan struct{} // "hold" handlers start reading once closed
	seen    atomic.Int64  // messages the "hold" handlers read
	pace    chan struct{} // "L:paced" sends its next message on each
}

func newStreamSvc() *streamSvc {
	return &streamSvc{ended: make(chan error, 1<<15), release: make(chan struct{}), pace: make(chan struct{})}
}

func sMethod(name string, mode stream.Mode) *client.Method {
	return &client.Method{Service: "S", Name: name, Stream: mode}
}

func (sv *streamSvc) service() *server.Service {
	m := func(name string, mode stream.Mode, h server.StreamHandler) server.Method {
		return server.Method{Name: name, Stream: mode, HandleStream: h}
	}
	return &server.Service{Name: "S", Methods: []server.Method{
		// sum: a client stream; its reply joins the messages.
		m("sum", stream.Client, func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			got := ""
			for {
				var a wiretest.EchoArgs
				if err := ss.RecvMsg(&a); err == io.EOF {
					ss.SetTrailer(metadata.Pairs("count", strconv.Itoa(len(got))))
					return &wiretest.EchoResult{Success: &got}, nil
				} else if err != nil {
					return nil, err
				}
				got += a.Msg
			}
		}),
		// count: a server stream of Mode messages; a negative Mode ends
		// with the declared exception after -Mode messages, Mode 1000
		// with an application exception after one.
		m("count", stream.Server, func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			if md, _ := metadata.FromIncomingContext(ctx); md["who"] != "" {
				if err := ss.SendHeader(metadata.Pairs("hello", md["who"])); err != nil {
					return nil, err
				}
			}
			n := int(a.Mode)
			if n == 1000 {
				if err := ss.SendMsg(&wiretest.EchoArgs{Msg: "0"}); err != nil {
					return nil, err
				}
				return nil, proto.NewApplicationException(proto.ExcInternalError, "mid-stream failure")
			}
			for i := range max(n, -n) {
				if err := ss.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: a.Blob}); err != nil {
					return nil, err
				}
			}
			if n < 0 {
				return &wiretest.EchoResult{Err: &wiretest.EchoError{Code: 7, Why: "declared"}}, nil
			}
			return nil, nil
		}),
		// echo: a bidirectional stream sending each message back;
		// "early" ends it at once.
		m("echo", stream.Bidi, func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			for {
				var a wiretest.EchoArgs
				if err := ss.RecvMsg(&a); err == io.EOF {
					return nil, nil
				} else if err != nil {
					return nil, err
				}
				if a.Msg == "early" {
					return nil, nil
				}
				if err := ss.SendMsg(&a); err != nil {
					return nil, err
				}
			}
		}),
		// hold: reads nothing until release, then everything; reports how
		// it ended.
		m("hold", stream.Bidi, func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			select {
			case <-sv.release:
			case <-ctx.Done():
				sv.ended <- ctx.Err()
				return nil, ctx.Err()
			}
			for {
				var a wiretest.EchoArgs
				err := ss.RecvMsg(&a)
				if err != nil {
					sv.ended <- err
					if err == io.EOF {
						return nil, nil
					}
					return nil, err
				}
				sv.seen.Add(1)
			}
		}),
	}}
}

func startStreams(t testing.TB, opts ...server.Option) (*server.Server, *streamSvc, string) {
	t.Helper()
	sv := newStreamSvc()
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	s.Register(sv.service())
	return s, sv, serveOn(t, s)
}

func TestStreamHappyPaths(t *testing.T) {
	s, _, addr := startStreams(t)
	var opened, msgs atomic.Int64
	c := dial(t, addr, client.WithStreamInterceptors(func(ctx context.Context, m *client.Method, final proto.Struct, next client.StreamOpener) (client.Stream, error) {
		opened.Add(1)
		st, err := next(ctx, m, final)
		if err != nil {
			return nil, err
		}
		return &countingStream{Stream: st, n: &msgs}, nil
	}))
	tests := []struct {
		name string
		run  func(t *testing.T, ctx context.Context)
	}{
		{"client stream", func(t *testing.T, ctx context.Context) {
			var res wiretest.EchoResult
			st, err := c.NewStream(ctx, sMethod("sum", stream.Client), &res)
			require.NoError(t, err)
			for _, s := range []string{"a", "b", "c"} {
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: s}))
			}
			require.NoError(t, st.CloseSend())
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			require.NotNil(t, res.Success)
			require.Equal(t, "abc", *res.Success)
			require.Equal(t, "3", st.Trailer()["count"])
		}},
		{"server stream", func(t *testing.T, ctx context.Context) {
			var res wiretest.EchoResult
			ctx = metadata.NewOutgoingContext(ctx, metadata.Pairs("who", "me"))
			st, err := c.NewStream(ctx, sMethod("count", stream.Server), &res)
			require.NoError(t, err)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: 50}))
			require.NoError(t, st.CloseSend())
			hd, err := st.Header()
			require.NoError(t, err)
			require.Equal(t, "me", hd["hello"])
			for i := range 50 {
				var a wiretest.EchoArgs
				require.NoError(t, st.RecvMsg(&a))
				require.Equal(t, strconv.Itoa(i), a.Msg)
			}
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			require.Nil(t, res.Success)
			require.Nil(t, res.Err)
		}},
		{"bidi", func(t *testing.T, ctx context.Context) {
			st, err := c.NewStream(ctx, sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
			require.NoError(t, err)
			for i := range 100 {
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i)}))
				var a wiretest.EchoArgs
				require.NoError(t, st.RecvMsg(&a))
				require.Equal(t, strconv.Itoa(i), a.Msg)
			}
			require.NoError(t, st.CloseSend())
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		}},
		{"unary call to a streaming function", func(t *testing.T, ctx context.Context) {
			err := c.Call(ctx, &client.Method{Service: "S", Name: "echo"}, &wiretest.EchoArgs{}, &wiretest.EchoResult{})
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, "echo is a bidirectional streaming function: open it as a stream", ae.Message)
		}},
		{"unknown streaming function", func(t *testing.T, ctx context.Context) {
			st, err := c.NewStream(ctx, sMethod("nope", stream.Bidi), &wiretest.EchoResult{})
			require.NoError(t, err)
			var ae *proto.ApplicationException
			require.ErrorAs(t, st.RecvMsg(&wiretest.EchoArgs{}), &ae)
			require.Equal(t, int32(proto.ExcUnknownMethod), ae.Type)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, tctx(t)) })
	}
	require.Equal(t, int64(4), opened.Load())
	require.Equal(t, int64(3+1+50+200), msgs.Load())

	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	for _, m := range []struct {
		name, fn, dir string
		want          float64
	}{
		{"hatrpc_server_streams_opened_total", "echo", "", 1},
		{"hatrpc_server_streams_opened_total", "sum", "", 1},
		{"hatrpc_server_stream_messages_total", "sum", "in", 3},
		{"hatrpc_server_stream_messages_total", "count", "out", 50},
		{"hatrpc_server_stream_messages_total", "echo", "in", 100},
		{"hatrpc_server_stream_messages_total", "echo", "out", 100},
		{"hatrpc_server_stream_message_bytes_total", "sum", "in", 3 * 9}, // EchoArgs{Msg: "a"}: 9 bytes
	} {
		want := map[string]string{"service": "S", "function": m.fn}
		if m.dir != "" {
			want["direction"] = m.dir
		}
		require.Equal(t, m.want, metricValue(mfs, m.name, want), "%s %v", m.name, want)
	}
	require.Eventually(t, func() bool {
		mfs, err := s.Registry().Gather()
		return err == nil && metricValue(mfs, "hatrpc_server_streams_open", nil) == 0
	}, eventually, time.Millisecond)
}

// countingStream counts the messages a stream interceptor sees.
type countingStream struct {
	client.Stream
	n *atomic.Int64
}

func (s *countingStream) SendMsg(m proto.Struct) error {
	err := s.Stream.SendMsg(m)
	if err == nil {
		s.n.Add(1)
	}
	return err
}

func (s *countingStream) RecvMsg(m proto.Struct) error {
	err := s.Stream.RecvMsg(m)
	if err == nil {
		s.n.Add(1)
	}
	return err
}

func TestStreamExceptions(t *testing.T) {
	_, _, addr := startStreams(t)
	c := dial(t, addr)
	t.Run("declared exception as final", func(t *testing.T) {
		var res wiretest.EchoResult
		st, err := c.NewStream(tctx(t), sMethod("count", stream.Server), &res)
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: -3}))
		require.NoError(t, st.CloseSend())
		for range 3 {
			require.NoError(t, st.RecvMsg(&wiretest.EchoArgs{}))
		}
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		require.NotNil(t, res.Err)
		require.Equal(t, "declared", res.Err.Why)
	})
	t.Run("application exception mid-stream", func(t *testing.T) {
		st, err := c.NewStream(tctx(t), sMethod("count", stream.Server), &wiretest.EchoResult{})
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: 1000}))
		require.NoError(t, st.RecvMsg(&wiretest.EchoArgs{}))
		var ae *proto.ApplicationException
		require.ErrorAs(t, st.RecvMsg(&wiretest.EchoArgs{}), &ae)
		require.Equal(t, "mid-stream failure", ae.Message)
		require.ErrorAs(t, st.RecvMsg(&wiretest.EchoArgs{}), &ae, "the end is sticky")
	})
}

func TestStreamCancelAndDeadline(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func(context.Context) (context.Context, context.CancelFunc)
		server  error
		client  error
		trigger bool
	}{
		{"cancel", context.WithCancel, context.Canceled, context.Canceled, true},
		{"deadline", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 500*time.Millisecond)
		}, context.DeadlineExceeded, context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, sv, addr := startStreams(t)
			c := dial(t, addr)
			ctx, cancel := tt.ctx(tctx(t))
			defer cancel()
			st, err := c.NewStream(ctx, sMethod("hold", stream.Bidi), &wiretest.EchoResult{})
			require.NoError(t, err)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x"}))
			if tt.trigger {
				// Canceled once the handler runs (a deadline may pass
				// before this could see it: not waited for).
				require.Eventually(t, func() bool { n, _ := server.StreamState(s); return n == 1 }, eventually, time.Millisecond)
				cancel()
			}
			require.ErrorIs(t, st.RecvMsg(&wiretest.EchoArgs{}), tt.client)
			select {
			case err := <-sv.ended:
				require.ErrorIs(t, err, tt.server)
			case <-time.After(eventually):
				t.Fatal("the handler did not end")
			}
			require.Eventually(t, func() bool { n, b := server.StreamState(s); return n == 0 && b == 0 }, eventually, time.Millisecond)
			require.ErrorIs(t, st.SendMsg(&wiretest.EchoArgs{}), tt.client)
		})
	}
}

func TestStreamSlowConsumerBounded(t *testing.T) {
	const window, msgSize, total = 4, 10 << 10, 64
	s, sv, addr := startStreams(t, server.WithStreamWindow(window, 1<<20, 0))
	c := dial(t, addr)
	ctx := tctx(t)
	st, err := c.NewStream(ctx, sMethod("hold", stream.Bidi), &wiretest.EchoResult{})
	require.NoError(t, err)
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		for range total {
			if err := st.SendMsg(&wiretest.EchoArgs{Blob: make([]byte, msgSize)}); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
		done <- st.CloseSend()
	}()
	// The sender stops at the window; the server holds no more than that.
	require.Eventually(t, func() bool { return sent.Load() == window }, eventually, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // room for a violation to show, never for a false failure
	require.Equal(t, int64(window), sent.Load())
	_, buffered := server.StreamState(s)
	require.LessOrEqual(t, buffered, int64(window*(msgSize+64)))
	close(sv.release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(eventually):
		t.Fatal("sender stuck")
	}
	select {
	case err := <-sv.ended:
		require.Equal(t, io.EOF, err)
	case <-time.After(eventually):
		t.Fatal("handler stuck")
	}
	require.Equal(t, int64(total), sv.seen.Load())
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
}

func TestStreamClientKilled(t *testing.T) {
	s, sv, addr := startStreams(t)
	c := dial(t, addr)
	const n = 20
	for range n {
		st, err := c.NewStream(tctx(t), sMethod("hold", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Blob: make([]byte, 4096)}))
	}
	require.Eventually(t, func() bool { k, _ := server.StreamState(s); return k == n }, eventually, time.Millisecond)
	require.NoError(t, c.Close())
	for range n {
		select {
		case err := <-sv.ended:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(eventually):
			t.Fatal("a handler outlived its client")
		}
	}
	require.Eventually(t, func() bool { k, b := server.StreamState(s); return k == 0 && b == 0 }, eventually, time.Millisecond)
}

func TestStreamHandlerReturnsEarly(t *testing.T) {
	_, _, addr := startStreams(t)
	c := dial(t, addr)
	st, err := c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "early"}))
	for i := 0; ; i++ {
		err := st.SendMsg(&wiretest.EchoArgs{Msg: "more"})
		if err != nil {
			require.Equal(t, io.EOF, err)
			break
		}
		require.Less(t, i, 1<<20, "SendMsg never saw the end")
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	// The connection carries on.
	st, err = c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "again"}))
	var a wiretest.EchoArgs
	require.NoError(t, st.RecvMsg(&a))
	require.Equal(t, "again", a.Msg)
	require.NoError(t, st.CloseSend())
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
}

func TestStreamsManyOnOneConnection(t *testing.T) {
	n := 10000
	if testenv.Race {
		n = 2000 // the race detector allows 8128 goroutines
	}
	s, _, addr := startStreams(t)
	_, _, uaddr := start(t)
	c := dial(t, addr)
	u := dial(t, uaddr)
	// A guard of its own: 10,000 streams outlasted tctx's 60 s in the
	// emulated guest on a host busy with other work (64.9 s).
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	before := heapInUse()
	streams := make([]client.Stream, n)
	for i := range streams {
		st, err := c.NewStream(ctx, sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		streams[i] = st
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, st := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i)}); err != nil {
				errs <- err
				return
			}
			var a wiretest.EchoArgs
			if err := st.RecvMsg(&a); err != nil || a.Msg != strconv.Itoa(i) {
				errs <- fmt.Errorf("stream %d: %q %v", i, a.Msg, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	open, _ := server.StreamState(s)
	require.Equal(t, n, open)
	// Unary calls are not held up by the open streams.
	got, err := echo(ctx, u, &wiretest.EchoArgs{Msg: "unary"})
	require.NoError(t, err)
	require.Equal(t, "unary", got)
	perStream := (heapInUse() - before) / int64(n)
	t.Logf("%d idle streams open: %d heap bytes per stream (client and server, with the handlers' goroutines)", n, perStream)
	require.Less(t, perStream, int64(32<<10))
	for _, st := range streams {
		require.NoError(t, st.CloseSend())
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	}
	require.Eventually(t, func() bool { k, b := server.StreamState(s); return k == 0 && b == 0 }, eventually, time.Millisecond)
}

// heapInUse is the live heap plus goroutine stacks after a collection.
func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// A client that stops reading: the server's SendMsg blocks once the
// client's window is in flight, and the client holds no more than that.
func TestStreamClientSlowConsumerBounded(t *testing.T) {
	const window, blob, total = 5, 8 << 10, 40
	s, _, addr := startStreams(t)
	c := dial(t, addr, client.WithStreamWindow(window, 0, 0))
	st, err := c.NewStream(tctx(t), sMethod("count", stream.Server), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: total, Blob: make([]byte, blob)}))
	require.NoError(t, st.CloseSend())
	sent := func() float64 {
		mfs, err := s.Registry().Gather()
		require.NoError(t, err)
		return metricValue(mfs, "hatrpc_server_stream_messages_total", map[string]string{"function": "count", "direction": "out"})
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
}

// Both protocols, and binary values large enough to go out by
// reference (wire.RefMin) and past the byte window.
func TestStreamProtocols(t *testing.T) {
	_, _, addr := startStreams(t)
	for _, tt := range []struct {
		name string
		opts []client.Option
	}{{"binary", nil}, {"compact", []client.Option{client.WithCompact()}}} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, addr, tt.opts...)
			st, err := c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
			require.NoError(t, err)
			for i, n := range []int{0, 1000, 40 << 10, 300 << 10, 3 << 20} {
				blob := make([]byte, n)
				for j := range blob {
					blob[j] = byte(i + j)
				}
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: blob}))
				var a wiretest.EchoArgs
				require.NoError(t, st.RecvMsg(&a))
				require.Equal(t, strconv.Itoa(i), a.Msg)
				require.Equal(t, blob, a.Blob)
			}
			require.NoError(t, st.CloseSend())
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		})
	}
}

// A bidirectional (or client) stream's plan follows the transport the
// session was granted: TCP's on TCP, the lane's on shm and rdma (two
// lanes carry it, stream_duplex.go); the route the runtime takes is the
// one Server.Plan, Conn.Plan and hatgen explain show. On lanes:
// TestStreamPlanOnLanes, TestClientBidiStreamsOnLanes.
func TestStreamPlanFollowsGrant(t *testing.T) {
	s, _, addr := startStreams(t)
	fn := hints.Function{Name: "echo", Stream: stream.Bidi}
	c := dial(t, addr, client.WithHints(&hints.Service{Name: "S", Functions: []hints.Function{fn}}))
	tab := c.Plan("S:echo")
	require.Equal(t, hints.TransportTCP, tab.Transport, "a session without lanes")
	require.Equal(t, hints.RouteTCP, tab.Rows[0].Route)
	for _, tr := range []hints.Transport{hints.TransportTCP, hints.TransportSHM, hints.TransportRDMA} {
		tab := s.Plan("S:echo", tr)
		require.Equal(t, tr, tab.Transport)
		want := hints.RouteLane
		if tr == hints.TransportTCP {
			want = hints.RouteTCP
		}
		for _, r := range tab.Rows {
			require.Equal(t, want, r.Route, "granted %v", tr)
		}
	}
}
