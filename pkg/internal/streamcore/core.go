// Package streamcore is the part of HatRPC streams the client and the
// server share: per-stream and per-connection credit flow control, the
// bounded receive queue a connection's reader fills without ever
// blocking, and the stream's end in each direction. The frames are
// pkg/wire's (streamframe.go); docs/design/streams.md has the rules.
package streamcore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Default receive windows, for a side that names none. The window is one
// of bytes: a side that names no message count gets one of a message per
// MsgCost bytes of its byte window, so a stream of small messages is not
// held to a few messages in flight (16 capped 64 B messages at 0.2 M/s
// on loopback, one credit round trip every 8), while what its queue
// holds stays bounded: each queued message costs about MsgCost bytes of
// bookkeeping and copy beyond its payload.
const (
	DefaultBytes = 1 << 20
	DefaultConn  = 16 << 20
	MsgCost      = 128
	// MinMessages is the fewest messages a derived window allows.
	MinMessages = 16
)

// ConnCost is what a message of size payload bytes counts against the
// connection's window, both sides alike: at least MsgCost, so the
// connection window bounds how many messages all its streams hold
// queued (16 MiB: 131,072), not only their bytes; per-stream counts
// alone let 10,000 streams of 1-byte messages queue 16 M of them.
func ConnCost(size int64) int64 { return max(size, MsgCost) }

// WithDefaults fills w's zero fields with the defaults; a zero message
// count is derived from the byte window (MsgCost).
func WithDefaults(w wire.StreamWindows) wire.StreamWindows {
	if w.Bytes <= 0 {
		w.Bytes = DefaultBytes
	}
	if w.Messages <= 0 {
		w.Messages = max(MinMessages, w.Bytes/MsgCost)
	}
	if w.Conn <= 0 {
		w.Conn = DefaultConn
	}
	return w
}

// Msg is one received data message.
type Msg struct {
	Buf *[]byte // pooled buffer Body lies in; nil when Body is its own
	// Loan: Body lies in a lane's reply, lent (Loan.Return gives it
	// back); Buf is nil then.
	Loan   *Loan
	Body   []byte
	Size   int64 // what it counts against the windows: the frame's payload
	Charge int64 // server memory budget it holds
}

// Errors a receiver resets a stream with (exception type PROTOCOL_ERROR).
var (
	ErrWindow     = errors.New("stream: data past the window")
	ErrAfterEnd   = errors.New("stream: data after the end of the stream")
	ErrUnknown    = errors.New("stream: data for an unknown stream")
	ErrOverCredit = errors.New("stream: window update beyond what was sent")
)

// smallCopy: messages under it are copied out of their pooled buffer.
const smallCopy = 1024

// maxKeptQueue is the largest queue array a drained stream keeps.
const maxKeptQueue = 256

// Conn is the stream state of one connection.
type Conn struct {
	write   func([]byte) error // a control frame (credit, reset)
	release func(*Msg)         // gives back a message's buffer and charge
	// Send: the peer's receive windows; Recv: ours.
	Send, Recv wire.StreamWindows

	sendMu sync.Mutex // orders credit and the data frame's write (see Send)

	mu        sync.Mutex
	streams   map[int32]*Stream
	sendConn  int64         // bytes in flight to the peer, not yet credited
	connWake  chan struct{} // closed and replaced when connection credit comes
	recvConn  int64         // bytes received, not yet credited back
	heldConn  int64         // of those, consumed: credit to send
	buffered  int64         // bytes queued in all streams (tests, metrics)
	err       error
	bulkBound bool   // BulkBound
	driver    Driver // WithDriver
}

// NewConn returns a connection's stream state; write sends a control
// frame, release gives back what a dropped or consumed message holds.
func NewConn(write func([]byte) error, release func(*Msg), send, recv wire.StreamWindows, opts ...ConnOption) *Conn {
	c := &Conn{write: write, release: release, Send: WithDefaults(send), Recv: WithDefaults(recv),
		streams: map[int32]*Stream{}, connWake: make(chan struct{})}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ConnOption configures a Conn (NewConn).
type ConnOption func(*Conn)

// BulkBound makes the Conn's streams send bulk messages (BulkMsg bytes or
// more) only while less than three quarters of their byte window, at
// least BulkInFlight, is in flight (Send, sendBound). For a TCP
// connection only: a lane's client polls while it reckons the server may
// send by the windows' rule (client.laneRunner.serverMaySend), and a
// server holding a poll under a tighter rule than the client's would hold
// it for ever.
func BulkBound() ConnOption { return func(c *Conn) { c.bulkBound = true } }

// Driver runs the exchanges of a lane carrying a Conn's one stream in
// the stream's sender (a server stream's handler) instead of the lane's
// goroutine: at the sender's wait for credit, which the exchange brings,
// so no goroutine is readied between them (pkg/server,
// stream_laneturn.go).
type Driver interface {
	// Drive runs before a sender of a size-byte message waits for
	// credit (until ctx ends); true: it ran an exchange, which may have
	// brought credit (the sender looks again before it waits).
	Drive(ctx context.Context, size int64) bool
	// Finished runs once a stream is finished: its sender will drive
	// no more.
	Finished()
}

// WithDriver makes d drive the Conn's exchanges (Driver).
func WithDriver(d Driver) ConnOption { return func(c *Conn) { c.driver = d } }

// Redrive wakes the senders waiting for credit, to Drive again: the
// driver has an exchange for them that it had not when they looked.
func (c *Conn) Redrive() {
	c.mu.Lock()
	for _, s := range c.streams {
		wake(s.sendWake)
	}
	c.mu.Unlock()
}

// Stream is one stream's flow state.
//
// Its fields are packed (the int32s and bools together): 10,000 idle
// streams on a connection cost their size twice, client and server.
type Stream struct {
	c *Conn

	// guarded by c.mu
	sendMsgs, sendBytes int64 // in flight to the peer, not yet credited
	sendErr             error
	sendWake            chan struct{}
	q                   []Msg // q[qHead:] are queued
	recvMsgs, recvBytes int64 // received, not yet credited
	heldMsgs, heldBytes int64 // of those, consumed
	recvErr             error // after the queue, Recv returns it
	recvWake            chan struct{}
	// The stream's windows: the connection's, unless a stream_window
	// hint set its own (SetWindows).
	sendWin, recvWin win
	// Owner is the client's or the server's stream object.
	Owner any
	arena []byte // small messages' bodies (copyOut), from len on free

	ID       int32
	sends    atomic.Int32 // messages sent since the last one received
	qHead    int32
	gone     bool // out of c.streams: no more stream credit
	finished bool
	headers  bool // a header block came (once per stream)
}

// win is one stream's window: messages and bytes.
type win struct{ msgs, bytes int32 }

// SetWindows gives s windows of its own (a stream_window hint, this
// side's or the peer's as the open or the hello told it): send bounds
// what s sends, recv what it receives. Zero fields keep the
// connection's. It is called before any data of s can be sent or filed.
func (s *Stream) SetWindows(send, recv wire.StreamWindows) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if send.Bytes > 0 {
		s.sendWin = win{send.Messages, send.Bytes}
	}
	if recv.Bytes > 0 {
		s.recvWin = win{recv.Messages, recv.Bytes}
	}
}

// RecvWindow is the receive window of s (messages, bytes).
func (s *Stream) RecvWindow() (msgs, bytes int32) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.recvWin.msgs, s.recvWin.bytes
}

// Queued is the number of received messages waiting for Recv.
func (s *Stream) Queued() int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return len(s.q) - int(s.qHead)
}

// Burst counts a message about to be sent and reports whether s sent one
// before it since it last received one: a stream sending several in a
// row has its frames batched by the connection's writer, one that
// alternates sending and receiving has each written at once
// (wire.Writer.WriteStream).
func (s *Stream) Burst() bool { return s.sends.Add(1) > 1 }

// Open registers stream id.
func (c *Conn) Open(id int32, owner any) (*Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	if _, ok := c.streams[id]; ok {
		return nil, fmt.Errorf("%w: stream %d opened twice", wire.ErrBadFrame, id)
	}
	s := &Stream{c: c, ID: id, sendWake: make(chan struct{}, 1), recvWake: make(chan struct{}, 1), Owner: owner,
		sendWin: win{c.Send.Messages, c.Send.Bytes}, recvWin: win{c.Recv.Messages, c.Recv.Bytes}}
	c.streams[id] = s
	return s, nil
}

// Get returns stream id, nil when it is not open.
func (c *Conn) Get(id int32) *Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

// Len is the number of open streams.
func (c *Conn) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams)
}

// Buffered is the bytes received and not yet consumed, over all streams.
func (c *Conn) Buffered() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buffered
}

// InFlight is the bytes sent and not yet credited by the peer.
func (c *Conn) InFlight() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendConn
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Data queues a received data message for stream id; the reader calls it
// and it never blocks. A message the stream may not take (unknown stream,
// after its end, past a window) is given back, its connection credit
// returned at once, and the error says why: the caller resets the stream
// (s, when not nil, is to be finished with it).
func (c *Conn) Data(id int32, m Msg, headerBlock bool) (*Stream, error) {
	c.mu.Lock()
	s := c.streams[id]
	if m.Buf != nil && len(m.Body) < smallCopy {
		// A small message would pin a pooled buffer many times its size
		// for as long as it waits: it is copied into its stream's arena
		// (one allocation per arenaSize bytes of messages, not one each).
		m.Body = s.copyOut(m.Body)
		wire.PutBuf(m.Buf)
		m.Buf = nil
	}
	var err error
	switch {
	case s == nil:
		err = ErrUnknown
	case s.recvErr != nil:
		err = ErrAfterEnd
	case headerBlock && s.headers:
		err = fmt.Errorf("%w: a second header block", wire.ErrBadFrame)
	case s.recvMsgs >= int64(s.recvWin.msgs) || s.recvBytes >= int64(s.recvWin.bytes):
		err = fmt.Errorf("%w: %d messages, %d bytes buffered of a window of %d messages, %d bytes (connection: %d of %d bytes)", ErrWindow,
			s.recvMsgs, s.recvBytes, s.recvWin.msgs, s.recvWin.bytes, c.buffered, c.Recv.Conn)
	case c.recvConn >= int64(c.Recv.Conn):
		err = fmt.Errorf("%w: the connection's window of %d bytes is full (%d bytes buffered, %d counting each message as at least %d bytes)", ErrWindow,
			c.Recv.Conn, c.buffered, c.recvConn, MsgCost)
	}
	if err != nil {
		c.mu.Unlock()
		c.release(&m)
		c.credit(0, 0, 0, ConnCost(m.Size))
		return s, err
	}
	s.headers = s.headers || headerBlock
	if s.qHead > 0 && len(s.q) == cap(s.q) {
		// Full with consumed slots at its start: moved down, not grown.
		n := copy(s.q, s.q[s.qHead:])
		clear(s.q[n:])
		s.q, s.qHead = s.q[:n], 0
	}
	s.q = append(s.q, m)
	s.recvMsgs++
	s.recvBytes += m.Size
	c.recvConn += ConnCost(m.Size)
	c.buffered += m.Size
	c.mu.Unlock()
	wake(s.recvWake)
	return s, nil
}

// Arenas small received messages are copied into: an arena lives while
// any message in it is queued or decoded aliased, so a stream holds at
// most one arena beyond its window. A stream's first is small and each
// next one twice its last, up to arenaSize: an idle stream that took a
// few messages holds half a KiB, not 8 (10,000 idle streams held 16 KiB
// each, client and server, with 8 KiB from the first message on), while
// a busy one still allocates once per 8 KiB of messages.
const (
	arenaSize     = 8 << 10
	firstArenaCap = 512
)

// copyOut copies a small message's body into s's arena (s may be nil:
// the message is refused, a copy of its own will do). c.mu is held.
func (s *Stream) copyOut(b []byte) []byte {
	if s == nil {
		return append([]byte(nil), b...)
	}
	if cap(s.arena)-len(s.arena) < len(b) {
		s.arena = make([]byte, 0, max(min(2*cap(s.arena), arenaSize), firstArenaCap, len(b)))
	}
	from := len(s.arena)
	s.arena = append(s.arena, b...)
	return s.arena[from:len(s.arena):len(s.arena)]
}

// Discarded returns the connection credit of a data frame of n payload
// bytes that was never read (the server's memory budget refused it).
func (c *Conn) Discarded(n int64) { c.credit(0, 0, 0, ConnCost(n)) }

// NoteHeaders records a header-only frame for s (not counted against the
// windows; one header block per stream).
func (c *Conn) NoteHeaders(id int32) (*Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	switch {
	case s == nil:
		return nil, ErrUnknown
	case s.headers:
		return s, fmt.Errorf("%w: a second header block", wire.ErrBadFrame)
	}
	s.headers = true
	return s, nil
}

// credit sends a window frame: msgs and n bytes to stream id, conn bytes
// to the connection.
func (c *Conn) credit(id int32, msgs, n, conn int64) {
	var b []byte
	if msgs > 0 || n > 0 {
		b = wire.AppendWindowFrame(b, id, uint32(msgs), uint32(n))
	}
	if conn > 0 {
		b = wire.AppendWindowFrame(b, 0, 0, uint32(conn))
	}
	if len(b) > 0 {
		_ = c.write(b) // a failed write fails the connection's reader
	}
}

// Window applies a window frame from the peer. An error is a protocol
// violation: for stream id (reset it) or, with id 0, the connection's.
func (c *Conn) Window(id int32, msgs, n uint32) (*Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == 0 {
		if msgs != 0 || int64(n) > c.sendConn {
			return nil, fmt.Errorf("%w: connection credit of %d messages, %d bytes with %d in flight", ErrOverCredit, msgs, n, c.sendConn)
		}
		c.sendConn -= int64(n)
		close(c.connWake)
		c.connWake = make(chan struct{})
		return nil, nil
	}
	s := c.streams[id]
	if s == nil {
		return nil, nil // the stream ended: credit is moot
	}
	if int64(msgs) > s.sendMsgs || int64(n) > s.sendBytes {
		return s, fmt.Errorf("%w: %d messages, %d bytes with %d, %d in flight", ErrOverCredit, msgs, n, s.sendMsgs, s.sendBytes)
	}
	s.sendMsgs -= int64(msgs)
	s.sendBytes -= int64(n)
	wake(s.sendWake)
	return s, nil
}

// Send writes the data frame of one message of s (size: its payload)
// once the windows allow, blocking while they do not, until ctx ends or
// the stream's sending does. A sender may go on while its stream and its
// connection have less than their window in flight, so one message may
// overshoot a window: the receiver checks the same rule, and credit it
// withholds (less than half a window) can never stall a sender. On a
// Conn made with BulkBound a bulk message (BulkMsg bytes or more)
// waits, in a window over BulkInFlight, until its stream has less than
// three quarters of its byte window (at least BulkInFlight) in flight
// (sendBound):
// the same bound, kept tighter by the sender alone, so it holds with any
// receiver that does not predict the sender's rule.
func (s *Stream) Send(ctx context.Context, size int64, write func() error) error {
	c := s.c
	for {
		c.sendMu.Lock()
		c.mu.Lock()
		err := s.sendErr
		if err == nil {
			err = c.err
		}
		if err != nil {
			c.mu.Unlock()
			c.sendMu.Unlock()
			return err
		}
		if s.sendMsgs < int64(s.sendWin.msgs) && s.sendBytes < c.sendBound(s.sendWin.bytes, size) && c.sendConn < int64(c.Send.Conn) {
			s.sendMsgs++
			s.sendBytes += size
			c.sendConn += ConnCost(size)
			c.mu.Unlock()
			// Written in the order credit was taken, so the receiver
			// sees the connection's bytes as they were counted here.
			err := write()
			c.sendMu.Unlock()
			return err
		}
		cw := c.connWake
		c.mu.Unlock()
		c.sendMu.Unlock()
		if c.driver != nil && c.driver.Drive(ctx, size) {
			continue
		}
		select {
		case <-s.sendWake:
		case <-cw:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// BulkMsg is the message size from which a sender on a TCP connection
// keeps what it has in flight under its window (BulkBound). A 64
// KiB server stream over loopback TCP with the default 1 MiB window in
// flight left most of it in the socket queues (850 KB in the receiver's,
// 1 MiB in the sender's, sent at the congestion control's pace) and its
// sender's writev took 21 us of CPU a message; with half in flight 14
// us, and the stream ran 1.3-1.5x faster in 5 of 6 alternated rounds
// (docs/performance/history.md, "half the window in flight"); three
// quarters (sendBound) keeps data on the way while a credit travels.
// Smaller messages are written in batches (wire.Writer.WriteStream) and
// keep the whole window: a 512 KiB window slowed 4 KiB streams by a
// tenth, and the rule from 4 or 16 KiB up gained nothing.
const BulkMsg = 32 << 10

// BulkInFlight is what a bulk sender needs in flight to keep the stream
// going: a window up to it is used whole, since half of one would leave
// a credit round trip between every message or two (64 KiB messages in
// a 128 KiB window ran at 801-850 MB/s with half of it, 1,218-2,391
// with the whole).
const BulkInFlight = 512 << 10

// sendBound is the bytes in flight under which a message of size bytes
// may be sent on a stream with a byte window of win: win, or on a
// BulkBound Conn, for a bulk message in a window over BulkInFlight,
// three quarters of it but at least BulkInFlight. A receiver credits
// once half its window is consumed, so what it withholds is under half a
// window: a bulk sender never stalls. The quarter above that half keeps
// messages on the way while the credit travels: with half the window as
// the bound, the sender had sent all it could when the receiver credited
// (both at 512 KiB of a 1 MiB window), so the receiver drained the
// socket and waited for each credit's round trip, every 8 messages of 64
// KiB (docs/performance/history.md, "the credit's round trip").
func (c *Conn) sendBound(win int32, size int64) int64 {
	w := int64(win)
	if !c.bulkBound || size < BulkMsg || w <= BulkInFlight {
		return w
	}
	return max(w/4*3, BulkInFlight)
}

// Recv returns the next message of s, blocking until one comes, the
// stream's receiving ends (its error: io.EOF after a clean end) or ctx
// does. Consuming a message credits the peer once half a window is
// consumed.
func (s *Stream) Recv(ctx context.Context) (Msg, error) { return s.RecvReading(ctx, nil) }

// RecvReading is Recv for a receiver that may read its connection
// itself: while s has nothing queued and has not ended, read (when not
// nil) runs before Recv blocks. It reports true once it read a frame of
// s or s ended (Recv looks again), false when another goroutine holds
// the connection's reading (Recv waits for it to file a message, or
// to give its reading up to this receiver with Wake).
func (s *Stream) RecvReading(ctx context.Context, read func() bool) (Msg, error) {
	c := s.c
	for {
		c.mu.Lock()
		if int(s.qHead) < len(s.q) {
			s.sends.Store(0)
			m := s.q[s.qHead]
			s.q[s.qHead] = Msg{}
			s.qHead++
			if int(s.qHead) == len(s.q) {
				// Drained: the array is reused from its start, unless it
				// holds a window's worth of a burst.
				s.q, s.qHead = s.q[:0], 0
				if cap(s.q) > maxKeptQueue {
					s.q = nil
				}
			}
			c.buffered -= m.Size
			var msgs, n, conn int64
			if !s.gone {
				s.heldMsgs++
				s.heldBytes += m.Size
				if s.heldMsgs >= max(1, int64(s.recvWin.msgs)/2) || s.heldBytes >= int64(s.recvWin.bytes)/2 {
					msgs, n = s.heldMsgs, s.heldBytes
					s.recvMsgs -= msgs
					s.recvBytes -= n
					s.heldMsgs, s.heldBytes = 0, 0
				}
			}
			c.heldConn += ConnCost(m.Size)
			if c.heldConn >= int64(c.Recv.Conn)/2 {
				conn = c.heldConn
				c.recvConn -= conn
				c.heldConn = 0
			}
			dead := c.err != nil
			c.mu.Unlock()
			if !dead {
				c.credit(s.ID, msgs, n, conn)
			}
			return m, nil
		}
		if err := s.recvErr; err != nil {
			c.mu.Unlock()
			return Msg{}, err
		}
		c.mu.Unlock()
		if read != nil && ctx.Err() == nil && read() {
			continue
		}
		select {
		case <-s.recvWake:
		case <-ctx.Done():
			return Msg{}, context.Cause(ctx)
		}
	}
}

// Wake wakes a receiver of s blocked in Recv to look again: a reader
// that gave its reading up to it (RecvReading) when nothing new may be
// queued.
func (s *Stream) Wake() { wake(s.recvWake) }

// EndRecv ends the receiving side of s: Recv returns err once the queue
// is drained (io.EOF: the peer ended its side cleanly).
func (s *Stream) EndRecv(err error) {
	s.c.mu.Lock()
	if s.recvErr == nil {
		s.recvErr = err
	}
	s.c.mu.Unlock()
	wake(s.recvWake)
}

// EndSend ends the sending side of s: Send returns err.
func (s *Stream) EndSend(err error) {
	s.c.mu.Lock()
	if s.sendErr == nil {
		s.sendErr = err
	}
	s.c.mu.Unlock()
	wake(s.sendWake)
}

// SendErr is the error sending ended with, nil while it may go on.
func (s *Stream) SendErr() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.sendErr
}

// Finish forgets s: both sides end with err (where not ended already),
// queued messages are dropped and their connection credit returned. It
// reports false when s was finished before.
func (s *Stream) Finish(err error) bool {
	c := s.c
	c.mu.Lock()
	if s.finished {
		c.mu.Unlock()
		return false
	}
	s.finished = true
	s.detachLocked()
	if s.sendErr == nil {
		s.sendErr = err
	}
	if s.recvErr == nil || int(s.qHead) < len(s.q) {
		s.recvErr = err
	}
	q := s.q[s.qHead:]
	s.q, s.qHead, s.arena = nil, 0, nil
	var drop, dropConn int64
	for i := range q {
		drop += q[i].Size
		dropConn += ConnCost(q[i].Size)
	}
	c.buffered -= drop
	c.recvConn -= dropConn
	dead := c.err != nil
	c.mu.Unlock()
	for i := range q {
		c.release(&q[i])
	}
	if dropConn > 0 && !dead {
		c.credit(0, 0, 0, dropConn)
	}
	wake(s.sendWake)
	wake(s.recvWake)
	if c.driver != nil {
		c.driver.Finished()
	}
	return true
}

// Detach takes s out of its connection's table once the peer will send
// nothing more for it (its end or reset came): frames for the id are then
// strays. Its queue stays readable; consuming it returns connection
// credit only.
func (s *Stream) Detach() {
	s.c.mu.Lock()
	s.detachLocked()
	s.c.mu.Unlock()
}

func (s *Stream) detachLocked() {
	if !s.gone {
		s.gone = true
		if s.c.streams[s.ID] == s {
			delete(s.c.streams, s.ID)
		}
	}
}

// Each runs f on every open stream.
func (c *Conn) Each(f func(*Stream)) {
	c.mu.Lock()
	all := make([]*Stream, 0, len(c.streams))
	for _, s := range c.streams {
		all = append(all, s)
	}
	c.mu.Unlock()
	for _, s := range all {
		f(s)
	}
}

// Fail ends every stream with err: the connection is gone. It returns the
// streams it ended.
func (c *Conn) Fail(err error) []*Stream {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.connWake)
		c.connWake = make(chan struct{})
	}
	all := make([]*Stream, 0, len(c.streams))
	for _, s := range c.streams {
		all = append(all, s)
	}
	c.mu.Unlock()
	for _, s := range all {
		s.Finish(err)
	}
	return all
}

// ResetError is a reset frame's payload as an error: the exception the
// stream ended with.
func ResetError(typ int32, text string) *proto.ApplicationException {
	return proto.NewApplicationException(typ, text)
}
