package streamcore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// frames records the control frames a Conn writes, decoded.
type frames struct {
	mu  sync.Mutex
	got []string
}

func (f *frames) write(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(b) > 0 {
		h, err := wire.DecodeHeader(b, 1<<20)
		if err != nil {
			return err
		}
		p := b[wire.HeaderSize : wire.HeaderSize+h.PayloadLen()]
		switch h.Kind {
		case wire.KindStreamWindow:
			m, n, _ := wire.ParseWindow(p)
			f.got = append(f.got, fmtWindow(h.Seqid, m, n))
		default:
			f.got = append(f.got, "kind")
		}
		b = b[wire.HeaderSize+h.PayloadLen():]
	}
	return nil
}

func (f *frames) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.got
	f.got = nil
	return g
}

func fmtWindow(id int32, m, n uint32) string { return fmt.Sprintf("window %d %d %d", id, m, n) }

func newTestConn(t *testing.T, win wire.StreamWindows, opts ...ConnOption) (*Conn, *frames, *int) {
	f := &frames{}
	released := new(int)
	c := NewConn(f.write, func(*Msg) { *released++ }, win, win, opts...)
	t.Cleanup(func() { c.Fail(io.ErrClosedPipe) })
	return c, f, released
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestSendWindows(t *testing.T) {
	half := []ConnOption{BulkBound()}
	tests := []struct {
		name  string
		win   wire.StreamWindows
		sizes []int64 // sent in a row: all but the last go, the last waits
		opts  []ConnOption
	}{
		{"messages", wire.StreamWindows{Messages: 2, Bytes: 1000, Conn: 1000}, []int64{1, 1, 1}, nil},
		{"bytes, one message overshoots", wire.StreamWindows{Messages: 9, Bytes: 100, Conn: 1000}, []int64{60, 60, 1}, nil},
		{"a message larger than the window", wire.StreamWindows{Messages: 9, Bytes: 100, Conn: 1000}, []int64{500, 1}, nil},
		{"connection", wire.StreamWindows{Messages: 9, Bytes: 10000, Conn: 1000}, []int64{400, 700, 1}, nil},
		{"connection: a small message counts MsgCost", wire.StreamWindows{Messages: 99, Bytes: 10000, Conn: 3 * MsgCost}, []int64{1, 1, 1, 1}, nil},
		{"bulk messages: three quarters of the byte window", wire.StreamWindows{Messages: 99, Bytes: 2 * BulkInFlight, Conn: 1 << 30}, []int64{BulkInFlight / 2, BulkInFlight / 2, BulkInFlight / 2, BulkMsg}, half},
		{"bulk messages without BulkBound: the whole window", wire.StreamWindows{Messages: 99, Bytes: 2 * BulkInFlight, Conn: 1 << 30}, []int64{BulkInFlight / 2, BulkInFlight / 2, BulkInFlight / 2, BulkInFlight / 2, BulkMsg}, nil},
		{"bulk messages: one overshoots three quarters of the window", wire.StreamWindows{Messages: 99, Bytes: 2 * BulkInFlight, Conn: 1 << 30}, []int64{BulkInFlight/2 + 1, BulkInFlight, BulkMsg}, half},
		{"a small message after bulk ones: the whole window", wire.StreamWindows{Messages: 99, Bytes: 2 * BulkInFlight, Conn: 1 << 30}, []int64{BulkInFlight / 2, BulkInFlight / 2, BulkInFlight / 2, BulkMsg - 1, BulkMsg}, half},
		{"bulk messages, a 4x window: three quarters", wire.StreamWindows{Messages: 99, Bytes: 4 * BulkInFlight, Conn: 1 << 30}, []int64{BulkInFlight, BulkInFlight, BulkInFlight, BulkMsg}, half},
		{"bulk messages, a window of BulkInFlight: the whole window", wire.StreamWindows{Messages: 99, Bytes: BulkInFlight, Conn: 1 << 30}, []int64{BulkInFlight / 4, BulkInFlight / 4, BulkInFlight / 4, BulkInFlight / 4, BulkMsg}, half},
		{"bulk messages, a window of 1.25 BulkInFlight: BulkInFlight", wire.StreamWindows{Messages: 99, Bytes: 5 * BulkInFlight / 4, Conn: 1 << 30}, []int64{BulkInFlight / 2, BulkInFlight / 2, BulkMsg}, half},
		{"bulk messages, a window of 1.5 BulkInFlight: three quarters", wire.StreamWindows{Messages: 99, Bytes: 3 * BulkInFlight / 2, Conn: 1 << 30}, []int64{BulkInFlight / 2, BulkInFlight / 2, BulkMsg, BulkMsg, BulkMsg}, half},
		{"bulk message, 1-byte window: one at a time", wire.StreamWindows{Messages: 99, Bytes: 1, Conn: 1 << 30}, []int64{BulkMsg, BulkMsg}, half},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := newTestConn(t, tt.win, tt.opts...)
			s, err := c.Open(1, nil)
			require.NoError(t, err)
			wrote := 0
			last := len(tt.sizes) - 1
			for i, n := range tt.sizes {
				// With a canceled context Send returns at once when it
				// would wait, and only then.
				err := s.Send(canceled(), n, func() error { wrote++; return nil })
				if i < last {
					require.NoError(t, err, "message %d", i)
				} else {
					require.ErrorIs(t, err, context.Canceled)
				}
			}
			require.Equal(t, last, wrote)
			var total, conn int64
			for _, n := range tt.sizes[:last] {
				total += n
				conn += ConnCost(n)
			}
			// Credit for everything in flight lets the last one go.
			_, err = c.Window(1, uint32(last), uint32(total))
			require.NoError(t, err)
			_, err = c.Window(0, 0, uint32(conn))
			require.NoError(t, err)
			require.NoError(t, s.Send(canceled(), tt.sizes[last], func() error { wrote++; return nil }))
			require.Equal(t, ConnCost(tt.sizes[last]), c.InFlight())
		})
	}
}

func TestOverCredit(t *testing.T) {
	c, _, _ := newTestConn(t, wire.StreamWindows{})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	require.NoError(t, s.Send(context.Background(), 10, func() error { return nil }))
	_, err = c.Window(1, 2, 10)
	require.EqualError(t, err, "stream: window update beyond what was sent: 2 messages, 10 bytes with 1, 10 in flight")
	_, err = c.Window(0, 0, uint32(ConnCost(10))+1)
	require.ErrorIs(t, err, ErrOverCredit)
	st, err := c.Window(7, 1, 1)
	require.NoError(t, err, "credit for a stream that ended is moot")
	require.Nil(t, st)
}

// Queued counts the messages filed and not yet received.
func TestQueued(t *testing.T) {
	tests := []struct {
		name       string
		filed, got int
	}{
		{"none", 0, 0},
		{"filed", 3, 0},
		{"some received", 3, 2},
		{"all received", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := newTestConn(t, wire.StreamWindows{Messages: 16, Bytes: 1000, Conn: 1000})
			s, err := c.Open(1, nil)
			require.NoError(t, err)
			for range tt.filed {
				_, err := c.Data(1, Msg{Body: make([]byte, 10), Size: 10}, false)
				require.NoError(t, err)
			}
			for range tt.got {
				_, err := s.Recv(context.Background())
				require.NoError(t, err)
			}
			require.Equal(t, tt.filed-tt.got, s.Queued())
		})
	}
}

func TestReceive(t *testing.T) {
	c, f, released := newTestConn(t, wire.StreamWindows{Messages: 2, Bytes: 1000, Conn: 1000})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	msg := func(n int) Msg { return Msg{Body: make([]byte, n), Size: int64(n)} }
	_, err = c.Data(1, msg(10), false)
	require.NoError(t, err)
	_, err = c.Data(1, msg(20), false)
	require.NoError(t, err)
	st, err := c.Data(1, msg(30), false)
	require.ErrorIs(t, err, ErrWindow)
	require.Same(t, s, st)
	require.Equal(t, []string{"window 0 0 128"}, f.take(), "the refused message's connection credit (at least MsgCost) comes back at once")
	require.Equal(t, 1, *released)
	_, err = c.Data(9, msg(5), false)
	require.ErrorIs(t, err, ErrUnknown)
	require.Equal(t, []string{"window 0 0 128"}, f.take())
	require.Equal(t, int64(30), c.Buffered())

	m, err := s.Recv(context.Background())
	require.NoError(t, err)
	require.Len(t, m.Body, 10)
	require.Equal(t, []string{"window 1 1 10"}, f.take(), "half the message window consumed: credit")

	s.EndRecv(io.EOF)
	_, err = c.Data(1, msg(1), false)
	require.ErrorIs(t, err, ErrAfterEnd)
	f.take()
	m, err = s.Recv(context.Background())
	require.NoError(t, err, "messages before the end are still read")
	require.Len(t, m.Body, 20)
	_, err = s.Recv(context.Background())
	require.Equal(t, io.EOF, err)
	require.Zero(t, c.Buffered())
}

func TestFinishReturnsCredit(t *testing.T) {
	c, f, released := newTestConn(t, wire.StreamWindows{})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	for range 3 {
		_, err := c.Data(1, Msg{Body: make([]byte, 7), Size: 7}, false)
		require.NoError(t, err)
	}
	boom := errors.New("boom")
	require.True(t, s.Finish(boom))
	require.False(t, s.Finish(boom))
	require.Equal(t, []string{"window 0 0 384"}, f.take(), "3 messages of 7 bytes, MsgCost each")
	require.Equal(t, 3, *released)
	require.Zero(t, c.Buffered())
	require.Zero(t, c.Len())
	_, err = s.Recv(context.Background())
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, s.Send(context.Background(), 1, func() error { return nil }), boom)
}

func TestFailEndsStreams(t *testing.T) {
	c, f, _ := newTestConn(t, wire.StreamWindows{})
	a, err := c.Open(1, "a")
	require.NoError(t, err)
	_, err = c.Open(1, "again")
	require.Error(t, err)
	_, err = c.Data(1, Msg{Body: []byte{1}, Size: 1}, false)
	require.NoError(t, err)
	all := c.Fail(io.ErrUnexpectedEOF)
	require.Len(t, all, 1)
	require.Equal(t, "a", all[0].Owner)
	require.Empty(t, f.take(), "nothing is written to a dead connection")
	_, err = a.Recv(context.Background())
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = c.Open(3, nil)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestBurst(t *testing.T) {
	c, _, _ := newTestConn(t, wire.StreamWindows{})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	// Sending alone: the first message is not a burst, the next are.
	require.False(t, s.Burst())
	require.True(t, s.Burst())
	require.True(t, s.Burst())
	// A message received in between: the next send starts afresh.
	_, err = c.Data(1, Msg{Body: []byte("x"), Size: 1}, false)
	require.NoError(t, err)
	_, err = s.Recv(context.Background())
	require.NoError(t, err)
	require.False(t, s.Burst())
	require.True(t, s.Burst())
}

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name    string
		in, out wire.StreamWindows
	}{
		{"none named", wire.StreamWindows{}, wire.StreamWindows{Messages: DefaultBytes / MsgCost, Bytes: DefaultBytes, Conn: DefaultConn}},
		{"bytes only: messages follow them", wire.StreamWindows{Bytes: 64 << 10}, wire.StreamWindows{Messages: 512, Bytes: 64 << 10, Conn: DefaultConn}},
		{"a small byte window keeps MinMessages", wire.StreamWindows{Bytes: 100}, wire.StreamWindows{Messages: MinMessages, Bytes: 100, Conn: DefaultConn}},
		{"all named", wire.StreamWindows{Messages: 3, Bytes: 5, Conn: 7}, wire.StreamWindows{Messages: 3, Bytes: 5, Conn: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.out, WithDefaults(tt.in))
		})
	}
}

// TestSmallMessagesFillTheByteWindow: with the default windows a stream
// of 64 B messages has thousands in flight, not 16, and the receiver
// takes as many as the sender may send.
func TestSmallMessagesFillTheByteWindow(t *testing.T) {
	c, _, _ := newTestConn(t, wire.StreamWindows{})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	sent := 0
	for s.Send(canceled(), 64, func() error { sent++; return nil }) == nil {
	}
	require.Equal(t, DefaultBytes/MsgCost, sent)
	for i := range sent {
		_, err := c.Data(1, Msg{Body: make([]byte, 64), Size: 64}, false)
		require.NoError(t, err, "message %d", i)
	}
	_, err = c.Data(1, Msg{Body: make([]byte, 64), Size: 64}, false)
	require.ErrorIs(t, err, ErrWindow)
}

// TestSmallMessagesCopiedOut: small messages leave their pooled buffers
// for the stream's arena and keep their bytes through queue reuse; the
// arena never lets one message's bytes grow into the next.
func TestSmallMessagesCopiedOut(t *testing.T) {
	c, _, released := newTestConn(t, wire.StreamWindows{})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	const rounds, perRound = 3, 300 // 300 × 100 B spans several arenas
	for r := range rounds {
		for i := range perRound {
			bp := wire.GetBuf()
			*bp = append((*bp)[:0], bytes.Repeat([]byte{byte(r*perRound + i)}, 100)...)
			_, err := c.Data(1, Msg{Buf: bp, Body: *bp, Size: 100}, false)
			require.NoError(t, err)
		}
		for i := range perRound {
			m, err := s.Recv(context.Background())
			require.NoError(t, err)
			require.Nil(t, m.Buf, "the pooled buffer went back")
			require.Equal(t, bytes.Repeat([]byte{byte(r*perRound + i)}, 100), m.Body)
			require.Equal(t, len(m.Body), cap(m.Body), "an append to a body must not write into the next one")
		}
	}
	require.Zero(t, c.Buffered())
	require.Zero(t, *released)
	// Queued messages are dropped with the stream.
	_, err = c.Data(1, Msg{Body: []byte("x"), Size: 1}, false)
	require.NoError(t, err)
	require.True(t, s.Finish(io.EOF))
	require.Equal(t, 1, *released)
}

// TestArenaGrowsWithTraffic: a stream that took one small message holds
// a first arena of firstArenaCap bytes, not arenaSize (10,000 idle
// streams held 8 KiB each a side); arenas double with traffic up to
// arenaSize, so a busy stream still allocates once per arenaSize bytes.
func TestArenaGrowsWithTraffic(t *testing.T) {
	c, _, _ := newTestConn(t, wire.StreamWindows{})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	var caps []int
	for i := range 200 {
		bp := wire.GetBuf()
		*bp = append((*bp)[:0], bytes.Repeat([]byte{byte(i)}, 100)...)
		_, err := c.Data(1, Msg{Buf: bp, Body: *bp, Size: 100}, false)
		require.NoError(t, err)
		m, err := s.Recv(context.Background())
		require.NoError(t, err)
		require.Equal(t, bytes.Repeat([]byte{byte(i)}, 100), m.Body)
		if n := cap(s.arena); len(caps) == 0 || caps[len(caps)-1] != n {
			caps = append(caps, n)
		}
	}
	require.Equal(t, []int{firstArenaCap, 1 << 10, 2 << 10, 4 << 10, arenaSize}, caps)
}

// TestQueueKeepsOrderWhileConsumed: a queue that never drains (two
// messages in for each one read) keeps its order while its array is
// compacted and grown.
func TestQueueKeepsOrderWhileConsumed(t *testing.T) {
	c, _, _ := newTestConn(t, wire.StreamWindows{})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	in := 0
	for want := range 600 {
		for range 2 {
			_, err := c.Data(1, Msg{Body: []byte{byte(in), byte(in >> 8)}, Size: 2}, false)
			require.NoError(t, err)
			in++
		}
		m, err := s.Recv(context.Background())
		require.NoError(t, err)
		require.Equal(t, []byte{byte(want), byte(want >> 8)}, m.Body)
	}
	for want := 600; want < in; want++ {
		m, err := s.Recv(context.Background())
		require.NoError(t, err)
		require.Equal(t, []byte{byte(want), byte(want >> 8)}, m.Body)
	}
	require.Zero(t, c.Buffered())
}

// TestConnWindowBoundsMessages: tiny messages spread over many streams
// fill the connection's window at MsgCost each, so it bounds how many
// the connection holds queued, whatever each stream's own count allows.
func TestConnWindowBoundsMessages(t *testing.T) {
	const held = 16
	c, _, _ := newTestConn(t, wire.StreamWindows{Messages: 1000, Bytes: 1000, Conn: held * MsgCost})
	for id := int32(1); id <= held+1; id++ {
		_, err := c.Open(id, nil)
		require.NoError(t, err)
		_, err = c.Data(id, Msg{Body: []byte{1}, Size: 1}, false)
		if id <= held {
			require.NoError(t, err, "stream %d", id)
		} else {
			require.ErrorIs(t, err, ErrWindow)
		}
	}
	require.Equal(t, int64(held), c.Buffered())
}

func TestConnWindowError(t *testing.T) {
	c, _, _ := newTestConn(t, wire.StreamWindows{Messages: 1000, Bytes: 1000, Conn: 2 * MsgCost})
	_, err := c.Open(1, nil)
	require.NoError(t, err)
	for range 2 {
		_, err = c.Data(1, Msg{Body: []byte{1, 2}, Size: 2}, false)
		require.NoError(t, err)
	}
	_, err = c.Data(1, Msg{Body: []byte{1, 2}, Size: 2}, false)
	require.EqualError(t, err, "stream: data past the window: the connection's window of 256 bytes is full (4 bytes buffered, 256 counting each message as at least 128 bytes)")
}

// TestBulkCreditFindsMessagesOnTheWay checks that a bulk sender keeps
// more in flight than a receiver consumes before it credits (half its
// window): when the credit goes, messages sent before it are still
// unread, so the receiver has data while the credit travels. With half
// the window as the sender's bound as well, the receiver had read all
// of it when it credited, and waited a round trip every 8 messages of
// 64 KiB.
func TestBulkCreditFindsMessagesOnTheWay(t *testing.T) {
	tests := []struct {
		name   string
		win    wire.StreamWindows
		size   int64
		unread int // messages sent and not read when the first credit goes
	}{
		{"1 MiB window, 64 KiB messages", wire.StreamWindows{Bytes: 1 << 20}, 64 << 10, 4},
		{"2 MiB window, 64 KiB messages", wire.StreamWindows{Bytes: 2 << 20}, 64 << 10, 8},
		{"1.5 MiB window, 96 KiB messages", wire.StreamWindows{Bytes: 3 << 19}, 96 << 10, 4},
		{"a window of BulkInFlight: used whole", wire.StreamWindows{Bytes: BulkInFlight}, 64 << 10, 4},
		{"a window of 1.25 BulkInFlight: BulkInFlight", wire.StreamWindows{Bytes: 5 * BulkInFlight / 4}, 64 << 10, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read, creditAt := 0, -1
			recv := NewConn(func(b []byte) error {
				h, err := wire.DecodeHeader(b, 1<<20)
				if err != nil {
					return err
				}
				if _, n, err := wire.ParseWindow(b[wire.HeaderSize : wire.HeaderSize+h.PayloadLen()]); err == nil && h.Seqid == 1 && n > 0 && creditAt < 0 {
					creditAt = read + 1 // written inside the Recv that credits
				}
				return nil
			}, func(*Msg) {}, tt.win, tt.win)
			send := NewConn(func([]byte) error { return nil }, func(*Msg) {}, tt.win, tt.win, BulkBound())
			rs, ss := openPair(t, recv, send)
			sent := 0
			for {
				err := ss.Send(canceled(), tt.size, func() error {
					_, err := recv.Data(1, Msg{Body: make([]byte, 1), Size: tt.size}, false)
					return err
				})
				if err != nil {
					require.ErrorIs(t, err, context.Canceled)
					break
				}
				sent++
			}
			for ; read < sent && creditAt < 0; read++ {
				_, err := rs.Recv(canceled())
				require.NoError(t, err)
			}
			require.Positive(t, creditAt, "no credit after reading all %d messages sent", sent)
			require.Equal(t, tt.unread, sent-creditAt, "sent %d, credit after reading %d", sent, creditAt)
		})
	}
}

// TestBulkSenderNeverStalls runs a bulk sender against a receiver that
// credits by its rule (half its window consumed), for window sizes where
// half a window is not a whole number of messages: every message arrives.
func TestBulkSenderNeverStalls(t *testing.T) {
	tests := []struct {
		name string
		win  wire.StreamWindows
		size int64
	}{
		{"1 MiB window, 64 KiB messages", wire.StreamWindows{Bytes: 1 << 20}, 64 << 10},
		{"window of 3 messages", wire.StreamWindows{Bytes: 3 * 40 << 10}, 40 << 10},
		{"2 MiB window, 3 messages in half of it", wire.StreamWindows{Bytes: 2 << 20}, 360 << 10},
		{"1.5 MiB window, 96 KiB messages", wire.StreamWindows{Bytes: 3 << 19}, 96 << 10},
		{"window under one message", wire.StreamWindows{Bytes: 1000}, BulkMsg},
		{"message count binds first", wire.StreamWindows{Messages: 3, Bytes: 1 << 20}, BulkMsg},
		{"connection window binds first", wire.StreamWindows{Bytes: 1 << 20, Conn: 3 * BulkMsg}, BulkMsg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
			defer cancel()
			var send *Conn
			// The receiver's credit goes straight to the sender.
			recv := NewConn(func(b []byte) error {
				for len(b) > 0 {
					h, err := wire.DecodeHeader(b, 1<<20)
					if err != nil {
						return err
					}
					m, n, err := wire.ParseWindow(b[wire.HeaderSize : wire.HeaderSize+h.PayloadLen()])
					if err != nil {
						return err
					}
					if _, err := send.Window(h.Seqid, m, n); err != nil {
						return err
					}
					b = b[wire.HeaderSize+h.PayloadLen():]
				}
				return nil
			}, func(*Msg) {}, tt.win, tt.win)
			send = NewConn(func([]byte) error { return nil }, func(*Msg) {}, tt.win, tt.win, BulkBound())
			rs, ss := openPair(t, recv, send)
			const count = 64
			sent := make(chan error, 1)
			go func() {
				for range count {
					err := ss.Send(ctx, tt.size, func() error {
						_, err := recv.Data(1, Msg{Body: make([]byte, 1), Size: tt.size}, false)
						return err
					})
					if err != nil {
						sent <- err
						return
					}
				}
				sent <- nil
			}()
			for i := range count {
				_, err := rs.Recv(ctx)
				require.NoError(t, err, "message %d", i)
			}
			require.NoError(t, <-sent)
		})
	}
}

// openPair opens stream 1 on a receiving and a sending Conn, both failed
// when the test ends.
func openPair(t *testing.T, recv, send *Conn) (rs, ss *Stream) {
	t.Helper()
	t.Cleanup(func() { recv.Fail(io.ErrClosedPipe); send.Fail(io.ErrClosedPipe) })
	rs, err := recv.Open(1, nil)
	require.NoError(t, err)
	ss, err = send.Open(1, nil)
	require.NoError(t, err)
	return rs, ss
}

// RecvReading calls its read while nothing is queued: a read that files
// a message (true) has Recv return it without blocking; one that ends
// the stream has Recv return the end; one that finds another reader
// (false) has Recv wait, and a Wake from that reader makes it read again.
func TestRecvReading(t *testing.T) {
	c, _, _ := newTestConn(t, wire.StreamWindows{})
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()

	reads := 0
	m, err := s.RecvReading(ctx, func() bool {
		reads++
		_, err := c.Data(1, Msg{Body: []byte("read")}, false)
		require.NoError(t, err)
		return true
	})
	require.NoError(t, err)
	require.Equal(t, "read", string(m.Body))
	require.Equal(t, 1, reads)

	// Another reader holds the connection: Recv waits until it wakes it,
	// then reads itself.
	select {
	case <-s.recvWake: // the first message's, never waited for
	default:
	}
	mine := make(chan struct{})
	got := make(chan error, 1)
	reads = 0
	go func() {
		m, err := s.RecvReading(ctx, func() bool {
			reads++
			if reads == 1 {
				close(mine)
				return false
			}
			_, err := c.Data(1, Msg{Body: []byte("after wake")}, false)
			if err != nil {
				return false
			}
			return true
		})
		if err == nil && string(m.Body) != "after wake" {
			err = errors.New("got " + string(m.Body))
		}
		got <- err
	}()
	<-mine
	s.Wake()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("RecvReading did not return")
	}
	require.Equal(t, 2, reads)

	// A read that ends the stream: its end comes back.
	_, err = s.RecvReading(ctx, func() bool { s.EndRecv(io.EOF); return true })
	require.Equal(t, io.EOF, err)
}
