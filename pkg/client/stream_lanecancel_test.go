//go:build cgo && linux

package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// cancelSvc is service K: streams whose messages are "tag:i", i from 0
// each way, so a message of another stream, or one out of order, shows.
// The first message of the client names the tag, the blob size of the
// server's messages, and how many the server sends (Mode; 0: until the
// stream ends); with a Blob, K.down then idles until canceled.
type cancelSvc struct {
	ended  chan error   // each handler's end: nil, or its context's error
	opened atomic.Int64 // handlers started
	got    atomic.Int64 // messages the handlers received
	stray  atomic.Int64 // messages received with another tag, or out of order
}

func cancelStreams(ts *testServer) *cancelSvc {
	sv := &cancelSvc{ended: make(chan error, 8)}
	ts.srv.Register(&server.Service{Name: "K", Methods: []server.Method{
		{Name: "down", Stream: stream.Server, HandleStream: sv.down},
		{Name: "up", Stream: stream.Client, HandleStream: sv.up},
		{Name: "both", Stream: stream.Bidi, HandleStream: sv.both},
	}})
	return sv
}

func kMethod(mode stream.Mode) *client.Method {
	name := map[stream.Mode]string{stream.Server: "down", stream.Client: "up", stream.Bidi: "both"}[mode]
	return &client.Method{Service: "K", Name: name, Stream: mode}
}

// check counts a received message that is not tag:i.
func (sv *cancelSvc) check(a *wiretest.EchoArgs, tag string, i int) {
	sv.got.Add(1)
	if a.Msg != tag+":"+strconv.Itoa(i) {
		sv.stray.Add(1)
	}
}

// first reads the client's first message: tag:0.
func (sv *cancelSvc) first(ss server.ServerStream) (*wiretest.EchoArgs, string, error) {
	sv.opened.Add(1)
	var a wiretest.EchoArgs
	if err := ss.RecvMsg(&a); err != nil {
		return nil, "", err
	}
	tag, _, _ := strings.Cut(a.Msg, ":")
	sv.check(&a, tag, 0)
	return &a, tag, nil
}

// send sends a.Mode messages (0: until it fails).
func (sv *cancelSvc) send(ss server.ServerStream, a *wiretest.EchoArgs, tag string) error {
	blob := make([]byte, a.DelayNs) // the size of the server's messages
	for i := 0; a.Mode == 0 || i < int(a.Mode); i++ {
		if err := ss.SendMsg(&wiretest.EchoArgs{Msg: tag + ":" + strconv.Itoa(i), Blob: blob}); err != nil {
			return err
		}
	}
	return nil
}

// done reports the handler's end: nil when clean, else its context's
// error (or err when the context did not end).
func (sv *cancelSvc) done(ctx context.Context, err error) error {
	if err != nil {
		// A reset fails the stream a moment before it cancels ctx.
		select {
		case <-ctx.Done():
		case <-time.After(testenv.HangGuard(10 * time.Second)):
		}
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	sv.ended <- err
	return err
}

func (sv *cancelSvc) down(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
	a, tag, err := sv.first(ss)
	if err == nil {
		err = sv.send(ss, a, tag)
	}
	if err == nil && len(a.Blob) > 0 {
		// Idle until canceled: its client's poll held.
		<-ctx.Done()
		err = ctx.Err()
	}
	return nil, sv.done(ctx, err)
}

func (sv *cancelSvc) up(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
	_, tag, err := sv.first(ss)
	n := 1
	for err == nil {
		var a wiretest.EchoArgs
		if err = ss.RecvMsg(&a); err == nil {
			sv.check(&a, tag, n)
			n++
		}
	}
	if err == io.EOF {
		s := strconv.Itoa(n)
		return &wiretest.EchoResult{Success: &s}, sv.done(ctx, nil)
	}
	return nil, sv.done(ctx, err)
}

func (sv *cancelSvc) both(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
	a, tag, err := sv.first(ss)
	if err != nil {
		return nil, sv.done(ctx, err)
	}
	recvd := make(chan error, 1)
	go func() {
		for i := 1; ; i++ {
			var m wiretest.EchoArgs
			if err := ss.RecvMsg(&m); err != nil {
				recvd <- err
				return
			}
			sv.check(&m, tag, i)
		}
	}()
	err = sv.send(ss, a, tag)
	if rerr := <-recvd; err == nil && rerr != io.EOF {
		err = rerr
	}
	return nil, sv.done(ctx, err)
}

// streamCase opens a stream of K on c tagged tag: the client's first
// message asks for n messages (0: endless) of size bytes.
func openK(t *testing.T, ctx context.Context, c *client.Conn, mode stream.Mode, tag string, n, size int) (client.Stream, *wiretest.EchoResult) {
	t.Helper()
	var final wiretest.EchoResult
	st, err := c.NewStream(ctx, kMethod(mode), &final)
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: tag + ":0", Mode: int32(n), DelayNs: int64(size)}))
	return st, &final
}

// sendAll sends tag:1, tag:2, ... of size bytes until SendMsg fails (or
// n were sent, n > 0), then reports the error.
func sendAll(st client.Stream, tag string, n, size int) <-chan error {
	out := make(chan error, 1)
	go func() {
		blob := make([]byte, size)
		for i := 1; n == 0 || i < n; i++ {
			if err := st.SendMsg(&wiretest.EchoArgs{Msg: tag + ":" + strconv.Itoa(i), Blob: blob}); err != nil {
				out <- err
				return
			}
		}
		out <- nil
	}()
	return out
}

// recvTagged receives n messages, which must be tag:0 ... tag:n-1.
func recvTagged(t *testing.T, st client.Stream, tag string, n int) {
	t.Helper()
	for i := range n {
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, tag+":"+strconv.Itoa(i), a.Msg, "a message of this stream, in order")
	}
}

// requireKept waits for the lane cancels' counts to read kept and closed:
// each is counted just after its lane went back or closed, which the next
// stream may see first.
func requireKept(t *testing.T, c *client.Conn, kept, closed uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		k, cl := client.LaneCancels(c)
		return k == kept && cl == closed
	}, testenv.HangGuard(10*time.Second), time.Millisecond, "kept, closed")
}

// requireNoRunners waits for the client's stream lane goroutines to end.
func requireNoRunners(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return runnerGoroutines() == "" }, testenv.HangGuard(10*time.Second), time.Millisecond, "%s", runnerGoroutines)
}

// runnerGoroutines lists the client's stream lane goroutines still
// running (a held lane's handshake's too).
func runnerGoroutines() string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "laneRunner") || strings.Contains(g, "upRunner") || strings.Contains(g, "laneHold") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

func lanesOf(mode stream.Mode) int {
	if mode.ClientSends() {
		return 2
	}
	return 1
}

// settle waits until cond holds, or gives up.
func settle(t *testing.T, cond func() bool) {
	for stop := time.Now().Add(testenv.HangGuard(10 * time.Second)); !cond() && time.Now().Before(stop); {
		time.Sleep(time.Millisecond)
	}
}

func awaitEnd(t *testing.T, sv *cancelSvc) error {
	t.Helper()
	select {
	case err := <-sv.ended:
		return err
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		t.Fatal("the handler did not end")
		return nil
	}
}

// cancelMidStream opens a stream tagged "old" with messages in flight
// each way the mode allows (the server sending without end, the client
// too), cancels it (or lets its deadline pass) and checks it ended on
// both sides.
func cancelMidStream(t *testing.T, c *client.Conn, sv *cancelSvc, mode stream.Mode, size int, deadline bool) {
	t.Helper()
	startCancel(t, c, sv, mode, size, deadline)
	herr := awaitEnd(t, sv)
	if deadline {
		require.Error(t, herr) // the server's own timer, or the client's reset
	} else {
		require.ErrorIs(t, herr, context.Canceled)
	}
}

// startCancel is cancelMidStream up to the client's side of the end.
func startCancel(t *testing.T, c *client.Conn, sv *cancelSvc, mode stream.Mode, size int, deadline bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(tctx(t))
	want := context.Canceled
	if deadline {
		ctx, cancel = context.WithTimeout(tctx(t), testenv.HangGuard(time.Second))
		want = context.DeadlineExceeded
	}
	defer cancel()
	st, _ := openK(t, ctx, c, mode, "old", 0, size)
	var sent <-chan error
	if mode.ClientSends() {
		sent = sendAll(st, "old", 0, size)
	} else {
		require.NoError(t, st.CloseSend())
	}
	if !deadline {
		// (The deadline comes when it comes: no more than the messages'
		// order is checked then.)
		if mode.ClientSends() {
			require.Eventually(t, func() bool { return sv.got.Load() >= 8 }, testenv.HangGuard(10*time.Second), time.Millisecond)
		}
		if mode.ServerSends() {
			recvTagged(t, st, "old", 3) // and the server's window full behind them
		}
		cancel()
	}
	var err error
	for i := 0; err == nil; i++ {
		var a wiretest.EchoArgs
		if err = st.RecvMsg(&a); err == nil && deadline {
			require.Equal(t, "old:"+strconv.Itoa(i), a.Msg)
		}
	}
	require.ErrorIs(t, err, want)
	if sent != nil {
		require.Error(t, <-sent)
	}
}

// A stream on lanes canceled mid-stream, messages in flight each way,
// ends on both sides (the handler's context canceled) and gives its lanes
// back to the pool once the server acknowledged: the next stream, and a
// call, of the function take the same lanes (no lane set up), and the
// next stream sees none of the old one's messages.
func TestLaneStreamCancelKeepsLanes(t *testing.T) {
	tests := []struct {
		mode     stream.Mode
		size     int
		deadline bool
	}{
		{stream.Server, 64, false},
		{stream.Server, 64 << 10, false}, // replies lent to the outbox
		{stream.Server, 64, true},
		{stream.Client, 64, false},
		{stream.Client, 64 << 10, false},
		{stream.Bidi, 64, false},
		{stream.Bidi, 64 << 10, false},
		{stream.Bidi, 64, true},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%d", tt.mode, tt.size)
		if tt.deadline {
			name += "/deadline"
		}
		t.Run(name, func(t *testing.T) {
			ts := laneServer(t)
			sv := cancelStreams(ts)
			// The bound no host is slow enough to reach: a lane closed
			// here is a failed handshake.
			c := dial(t, ts.addr, client.WithMultiplexed(), client.WithStreamCancelWait(testenv.HangGuard(time.Minute)))
			cancelMidStream(t, c, sv, tt.mode, tt.size, tt.deadline)

			// The next stream, opened at once, on the same lanes (it waits
			// for them: the handshake may still be under way): only its
			// own messages.
			sv.got.Store(0)
			const n = 5
			st, final := openK(t, tctx(t), c, tt.mode, "new", n, tt.size)
			lanes := lanesOf(tt.mode)
			require.Equal(t, uint64(lanes), client.LaneSetups(c), "the same lanes")
			require.Equal(t, lanes, client.LanesOpen(c))
			// Counted just after the lane went back: the next stream may
			// have taken it from the pool first.
			requireKept(t, c, 1, 0)
			if tt.mode.ClientSends() {
				require.NoError(t, <-sendAll(st, "new", n, tt.size))
			}
			require.NoError(t, st.CloseSend())
			if tt.mode.ServerSends() {
				recvTagged(t, st, "new", n)
			}
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			if tt.mode == stream.Client {
				require.Equal(t, strconv.Itoa(n), *final.Success)
			}
			require.NoError(t, awaitEnd(t, sv))
			require.Zero(t, sv.stray.Load(), "no message of one stream reached another, or out of order")
			require.Equal(t, uint64(lanes), client.LaneSetups(c), "the same lanes")
			lane, tcp := c.StreamRoutes()
			require.Equal(t, [2]uint64{2, 0}, [2]uint64{lane, tcp})

			// A call of the function on one of them: answered in step (the
			// server refuses a unary call of a streaming function).
			m := kMethod(tt.mode)
			err := c.Call(tctx(t), &client.Method{Service: m.Service, Name: m.Name}, &wiretest.EchoArgs{}, &wiretest.EchoResult{})
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, proto.ExcUnknownMethod, ae.Type)
			require.Contains(t, ae.Message, "open it as a stream")
			require.Equal(t, uint64(lanes), client.LaneSetups(c), "the same lanes")
			requireNoRunners(t)
		})
	}
}

// A caller that cancels a stream and opens the next at once, before the
// cancel's watcher ran (LateCancelWatch: it never does), still gets the
// canceled stream's lanes: finding none idle, the pool starts the cancel
// of the streams whose context ended and waits for their lanes. Before, it
// set up new ones (on ibv, QPs) while the old lanes went back idle.
func TestLaneStreamCancelThenOpenAtOnce(t *testing.T) {
	for _, mode := range []stream.Mode{stream.Server, stream.Client, stream.Bidi} {
		t.Run(mode.String(), func(t *testing.T) {
			ts := laneServer(t)
			sv := cancelStreams(ts)
			c := dial(t, ts.addr, client.WithMultiplexed(), client.LateCancelWatch(),
				client.WithStreamCancelWait(testenv.HangGuard(time.Minute)))
			ctx, cancel := context.WithCancel(tctx(t))
			defer cancel()
			old, _ := openK(t, ctx, c, mode, "old", 0, 64)
			var sent <-chan error
			if mode.ClientSends() {
				sent = sendAll(old, "old", 0, 64)
				require.Eventually(t, func() bool { return sv.got.Load() >= 8 }, testenv.HangGuard(10*time.Second), time.Millisecond)
			} else {
				require.NoError(t, old.CloseSend())
			}
			if mode.ServerSends() {
				recvTagged(t, old, "old", 3)
			}
			cancel()
			// At once: no RecvMsg of the old stream first.
			sv.got.Store(0)
			const n = 3
			st, _ := openK(t, tctx(t), c, mode, "new", n, 64)
			lanes := lanesOf(mode)
			require.Equal(t, uint64(lanes), client.LaneSetups(c), "the same lanes")
			if mode.ClientSends() {
				require.NoError(t, <-sendAll(st, "new", n, 64))
			}
			require.NoError(t, st.CloseSend())
			if mode.ServerSends() {
				recvTagged(t, st, "new", n)
			}
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			// The two handlers' ends, in either order (the old one's reset
			// may reach its handler after the new one finished).
			ends := []error{awaitEnd(t, sv), awaitEnd(t, sv)}
			if ends[0] == nil {
				ends[0], ends[1] = ends[1], ends[0]
			}
			require.ErrorIs(t, ends[0], context.Canceled, "the old handler")
			require.NoError(t, ends[1], "the new handler")
			require.Zero(t, sv.stray.Load(), "no message of one stream reached another, or out of order")
			var err error
			for err == nil {
				err = old.RecvMsg(&wiretest.EchoArgs{})
			}
			require.ErrorIs(t, err, context.Canceled)
			if sent != nil {
				require.Error(t, <-sent)
			}
			requireKept(t, c, 1, 0)
			require.Equal(t, uint64(lanes), client.LaneSetups(c), "the same lanes")
			requireNoRunners(t)
		})
	}
}

// A server that never acknowledges a canceled stream (as the client sees
// it: HangStreamCancels) costs the stream's first lane after the bound,
// as before the handshake: the lane closes, the server, seeing it go,
// ends the handler, and the next stream works on a lane set up anew (a
// second lane, never held by the server, goes back to the pool).
func TestLaneStreamCancelUnacknowledged(t *testing.T) {
	for _, mode := range []stream.Mode{stream.Server, stream.Client, stream.Bidi} {
		t.Run(mode.String(), func(t *testing.T) {
			ts := laneServer(t)
			sv := cancelStreams(ts)
			c := dial(t, ts.addr, client.WithMultiplexed(), client.HangStreamCancels(), client.WithStreamCancelWait(100*time.Millisecond))
			cancelMidStream(t, c, sv, mode, 64, false)
			require.Eventually(t, func() bool { _, cl := client.LaneCancels(c); return cl == 1 }, testenv.HangGuard(10*time.Second), time.Millisecond)
			kept, _ := client.LaneCancels(c)
			require.Zero(t, kept)
			lanes := lanesOf(mode)
			require.Eventually(t, func() bool { return client.LanesOpen(c) == lanes-1 }, testenv.HangGuard(10*time.Second), time.Millisecond)

			sv.got.Store(0)
			const n = 3
			st, _ := openK(t, tctx(t), c, mode, "new", n, 64)
			if mode.ClientSends() {
				require.NoError(t, <-sendAll(st, "new", n, 64))
			}
			require.NoError(t, st.CloseSend())
			if mode.ServerSends() {
				recvTagged(t, st, "new", n)
			}
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			require.NoError(t, awaitEnd(t, sv))
			require.Zero(t, sv.stray.Load())
			require.Equal(t, uint64(lanes+1), client.LaneSetups(c), "one lane set up anew")
			requireNoRunners(t)
		})
	}
}

// A peer that goes while a canceled stream waits for its acknowledgement
// (the bound far off) ends the wait at once: the lanes close, the handler
// ends, and no goroutine of the stream is left.
func TestLaneStreamCancelPeerGone(t *testing.T) {
	tests := []struct {
		mode stream.Mode
		kill string
	}{
		{stream.Server, "server"},
		{stream.Server, "client"},
		{stream.Bidi, "server"},
		{stream.Bidi, "client"},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String()+"/"+tt.kill, func(t *testing.T) {
			ts := laneServer(t)
			sv := cancelStreams(ts)
			c := dial(t, ts.addr, client.WithMultiplexed(), client.HangStreamCancels(), client.WithStreamCancelWait(time.Hour))
			startCancel(t, c, sv, tt.mode, 64, false)
			if tt.kill == "server" {
				ts.stop()
			} else {
				require.NoError(t, c.Close())
			}
			// The server learns of the cancel from the lanes' end alone.
			require.ErrorIs(t, awaitEnd(t, sv), context.Canceled)
			settle(t, func() bool { _, cl := client.LaneCancels(c); return cl == 1 })
			kept, closed := client.LaneCancels(c)
			require.Equal(t, [2]uint64{0, 1}, [2]uint64{kept, closed}, "kept, closed")
			require.Eventually(t, func() bool { return client.LanesOpen(c) == 0 }, testenv.HangGuard(10*time.Second), time.Millisecond)
			requireNoRunners(t)
			if tt.kill == "client" {
				return
			}
			err := c.Call(tctx(t), wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "x"}, &wiretest.EchoResult{})
			require.Error(t, err, "the server is gone")
			require.False(t, errors.Is(err, context.DeadlineExceeded), "failed, not hung: %v", err)
		})
	}
}
