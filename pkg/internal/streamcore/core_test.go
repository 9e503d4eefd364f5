package streamcore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/wire"
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

func newTestConn(t *testing.T, win wire.StreamWindows) (*Conn, *frames, *int) {
	f := &frames{}
	released := new(int)
	c := NewConn(f.write, func(*Msg) { *released++ }, win, win)
	t.Cleanup(func() { c.Fail(io.ErrClosedPipe) })
	return c, f, released
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestSendWindows(t *testing.T) {
	tests := []struct {
		name  string
		win   wire.StreamWindows
		sizes []int64 // sent in a row: all but the last go, the last waits
	}{
		{"messages", wire.StreamWindows{Messages: 2, Bytes: 1000, Conn: 1000}, []int64{1, 1, 1}},
		{"bytes, one message overshoots", wire.StreamWindows{Messages: 9, Bytes: 100, Conn: 1000}, []int64{60, 60, 1}},
		{"a message larger than the window", wire.StreamWindows{Messages: 9, Bytes: 100, Conn: 1000}, []int64{500, 1}},
		{"connection", wire.StreamWindows{Messages: 9, Bytes: 1000, Conn: 100}, []int64{99, 99, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := newTestConn(t, tt.win)
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
			var total int64
			for _, n := range tt.sizes[:last] {
				total += n
			}
			// Credit for everything in flight lets the last one go.
			_, err = c.Window(1, uint32(last), uint32(total))
			require.NoError(t, err)
			_, err = c.Window(0, 0, uint32(total))
			require.NoError(t, err)
			require.NoError(t, s.Send(canceled(), tt.sizes[last], func() error { wrote++; return nil }))
			require.Equal(t, int64(tt.sizes[last]), c.InFlight())
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
	_, err = c.Window(0, 0, 11)
	require.ErrorIs(t, err, ErrOverCredit)
	st, err := c.Window(7, 1, 1)
	require.NoError(t, err, "credit for a stream that ended is moot")
	require.Nil(t, st)
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
	require.Equal(t, []string{"window 0 0 30"}, f.take(), "the refused message's connection credit comes back at once")
	require.Equal(t, 1, *released)
	_, err = c.Data(9, msg(5), false)
	require.ErrorIs(t, err, ErrUnknown)
	require.Equal(t, []string{"window 0 0 5"}, f.take())
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
	require.Equal(t, []string{"window 0 0 21"}, f.take())
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
