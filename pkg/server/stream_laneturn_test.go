//go:build cgo && linux

package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
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

// turnMsg is the size of turnStreams' messages: past the size from which
// a handler is offered its lane's turn.
const turnMsg = 64 << 10

// turnStreams is laneStreams with "T:bulk": a server stream of Mode
// messages of turnMsg bytes, or of Blob's length if set (message i
// filled with byte i+1), that fails with "early" after Msg's length of
// them when Msg is set; each
// handler's end goes to ended. The offered turn waits for the handler
// as long as the test runs (SetTurnHold): where it finds the handler is
// then the stream's doing, not the scheduler's.
func turnStreams(t *testing.T) (s *server.Server, addr string, ended chan error) {
	t.Helper()
	t.Cleanup(server.SetTurnHold(time.Hour))
	s, _, addr = laneStreams(t)
	ended = make(chan error, 8)
	s.Register(&server.Service{Name: "T", Methods: []server.Method{{Name: "bulk", Stream: stream.Server,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			err := ss.RecvMsg(&a)
			size := turnMsg
			if len(a.Blob) > 0 {
				size = len(a.Blob)
			}
			for i := 0; err == nil && i < int(a.Mode); i++ {
				if a.Msg != "" && i == len(a.Msg) {
					err = errors.New("early")
					break
				}
				err = ss.SendMsg(&wiretest.EchoArgs{Blob: bytes.Repeat([]byte{byte(i + 1)}, size)})
			}
			ended <- err
			return nil, err
		}}}})
	return s, addr, ended
}

func tBulk() *client.Method { return &client.Method{Service: "T", Name: "bulk", Stream: stream.Server} }

// recvBulk reads turnStreams' messages from, checking each, until an
// error, which it returns with the next message's number.
func recvBulk(st client.Stream, from, upTo int) (int, error) {
	return recvSized(st, turnMsg, from, upTo)
}

func recvSized(st client.Stream, size, from, upTo int) (int, error) {
	for i := from; i < upTo; i++ {
		var a wiretest.EchoArgs
		if err := st.RecvMsg(&a); err != nil {
			return i, err
		}
		if len(a.Blob) != size || a.Blob[0] != byte(i+1) || a.Blob[size-1] != byte(i+1) {
			return i, errors.New("message out of order or torn")
		}
	}
	return upTo, nil
}

// A server stream of large messages hands its lane's exchanges to the
// handler at its wait for credit (stream_laneturn.go): to the end, a
// handler failing mid-stream, and the ends that come while the handler
// waits in its turn for the client's next request (a cancel, a
// deadline, the client gone). Each ends its handler and leaves no stream
// state, and the lane carries the next stream (the client gone: its
// lanes close, no lane or stream goroutine is left).
func TestServerStreamHandlerDrives(t *testing.T) {
	const n, read = 64, 20 // 4 MiB, 16 windows; read before the stall
	const (
		toEnd    = iota
		fails    // the handler fails after 40 messages
		cancel   // the client cancels in the handler's wait
		deadline // the stream's deadline passes in it
		gone     // the client goes in it
	)
	tests := []struct {
		name string
		end  int
	}{
		{"to the end", toEnd},
		{"handler fails mid-stream", fails},
		{"canceled in the handler's wait", cancel},
		{"deadline in the handler's wait", deadline},
		{"client gone in the handler's wait", gone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				s      *server.Server
				ended  chan error
				c      *client.Conn
				st     client.Stream
				stop   context.CancelFunc
				stream context.Context
			)
			// The deadline must pass in the handler's wait, after the
			// client read its messages: a host too loaded for that tries
			// again on a new server with twice the deadline.
			for d := 500 * time.Millisecond; ; d *= 2 {
				var addr string
				s, addr, ended = turnStreams(t)
				// A window of four: the handler waits for credit within
				// the first exchanges, so the lane offers it the turn
				// before the client stops reading.
				c = dial(t, addr, client.WithStreamWindow(4, 0, 0))
				stream, stop = context.WithCancel(tctx(t))
				if tt.end == deadline {
					stream, stop = context.WithTimeout(tctx(t), d)
				}
				defer stop()
				var err error
				st, err = c.NewStream(stream, tBulk(), &wiretest.EchoResult{})
				require.NoError(t, err)
				early := ""
				if tt.end == fails {
					early = string(make([]byte, 40))
				}
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: n, Msg: early}))
				require.NoError(t, st.CloseSend())
				if tt.end < cancel {
					break
				}
				// The client stops reading with the window full: the
				// handler's next exchange waits for its credit.
				_, err = recvBulk(st, 0, read)
				if err == nil {
					require.Eventually(t, func() bool { return server.TurnWaits(s) == 1 || stream.Err() != nil }, eventually, time.Millisecond,
						"the handler's turn never waited for the client")
				}
				if tt.end == deadline && stream.Err() != nil && d < testenv.HangGuard(time.Minute) {
					t.Logf("the stall took longer than %v: again with twice the deadline", d)
					<-ended
					continue
				}
				require.NoError(t, err)
				switch tt.end {
				case cancel:
					stop()
				case deadline:
					<-stream.Done()
				case gone:
					require.NoError(t, c.Close())
				}
				break
			}
			from := 0
			if tt.end >= cancel {
				from = read
			}
			got, err := recvBulk(st, from, n)
			switch tt.end {
			case toEnd:
				require.NoError(t, err)
				require.Equal(t, n, got)
				require.ErrorIs(t, st.RecvMsg(&wiretest.EchoArgs{}), io.EOF)
			case fails:
				require.ErrorContains(t, err, "early")
				require.Equal(t, 40, got)
			case cancel:
				require.ErrorIs(t, err, context.Canceled)
			case deadline:
				require.ErrorIs(t, err, context.DeadlineExceeded)
			case gone:
				require.Error(t, err)
			}
			select {
			case err := <-ended:
				switch tt.end {
				case toEnd:
					require.NoError(t, err)
				case fails:
					require.EqualError(t, err, "early")
				default:
					require.Error(t, err)
				}
			case <-time.After(eventually):
				t.Fatal("the handler did not end")
			}
			if tt.end < cancel { // (the others saw the handler in its turn)
				require.NotZero(t, server.TurnExchanges(s), "the handler ran none of its lane's exchanges")
			}
			require.Eventually(t, func() bool { k, b := server.StreamState(s); return k == 0 && b == 0 }, eventually, time.Millisecond)
			if tt.end == gone {
				require.Eventually(t, func() bool { return lanesOpen(t, s) == 0 && laneGoroutines() == "" }, eventually, time.Millisecond, "%s", laneGoroutines)
				return
			}
			// The lane is back in step: the next stream runs on it.
			before := server.TurnExchanges(s)
			st2, err := c.NewStream(tctx(t), tBulk(), &wiretest.EchoResult{})
			require.NoError(t, err)
			require.NoError(t, st2.SendMsg(&wiretest.EchoArgs{Mode: n}))
			require.NoError(t, st2.CloseSend())
			got, err = recvBulk(st2, 0, n)
			require.NoError(t, err)
			require.Equal(t, n, got)
			require.ErrorIs(t, st2.RecvMsg(&wiretest.EchoArgs{}), io.EOF)
			require.NoError(t, <-ended)
			require.Greater(t, server.TurnExchanges(s), before)
			lane, tcp := c.StreamRoutes()
			require.Equal(t, uint64(2), lane)
			require.Zero(t, tcp)
			stats := c.LaneStats()
			require.Len(t, stats, 1)
			require.Equal(t, 1, stats[0].Lanes, "one stream after another: one lane")
		})
	}
}

// The turn is offered for messages from 4 KiB (turnMin): a stream of
// smaller ones keeps the lane's own exchanges, which overlap the
// handler's encoding.
func TestServerStreamTurnBound(t *testing.T) {
	tests := []struct {
		name  string
		size  int
		turns bool
	}{
		{"2 KiB: the lane's", 2 << 10, false},
		{"4 KiB: the handler's", 4 << 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, addr, ended := turnStreams(t)
			// 16 messages a window: replies of 32 KiB and more, which
			// lend their memory (the turn's condition besides the size).
			c := dial(t, addr, client.WithStreamWindow(16, 0, 0))
			const n = 256
			st, err := c.NewStream(tctx(t), tBulk(), &wiretest.EchoResult{})
			require.NoError(t, err)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: n, Blob: make([]byte, tt.size)}))
			require.NoError(t, st.CloseSend())
			// Stopped once, the client lets the handler wait for credit
			// with a poll of lent memory to come.
			got, err := recvSized(st, tt.size, 0, 40)
			require.NoError(t, err)
			if tt.turns {
				require.Eventually(t, func() bool { return server.TurnWaits(s) == 1 }, eventually, time.Millisecond)
			}
			got, err = recvSized(st, tt.size, got, n)
			require.NoError(t, err)
			require.Equal(t, n, got)
			require.ErrorIs(t, st.RecvMsg(&wiretest.EchoArgs{}), io.EOF)
			require.NoError(t, <-ended)
			require.Equal(t, tt.turns, server.TurnExchanges(s) > 0)
		})
	}
}
