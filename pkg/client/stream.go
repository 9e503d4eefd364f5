package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Streams (docs/design/streams.md) ride the Conn's first TCP connection
// when its server granted wire.CapStreams, next to its calls, except a
// stream the plan puts on lanes (stream_lane.go, stream_duplex.go).
// While a stream is open some goroutine holds the connection's read role
// (reader.go), so stream frames are filed with their streams whether or
// not a call waits, except while it is parked with a lone server stream
// whose consumer reads for itself (stream_read.go).

type streamOptions struct {
	windows      wire.StreamWindows
	interceptors []StreamInterceptor
	ownedMsgs    bool
	cancelWait   time.Duration // WithStreamCancelWait (stream_lanecancel.go)
	hangCancels  bool          // tests: canceled lane streams act as if the server never answered
	lateWatch    bool          // tests: a lane stream's cancel watcher never runs (it had not yet)
	noLinkCancel bool          // tests: lanes offer no wire.CapLaneCancel (a server of the previous version grants none)
}

// WithOwnedMsgs ignores the borrow_msgs hint: every message RecvMsg
// decodes owns its binary values, as without the hint. For a caller
// suspected of keeping a borrowed value past its next RecvMsg (which a
// later message would then overwrite), and for comparisons.
func WithOwnedMsgs() Option { return func(o *options) { o.streams.ownedMsgs = true } }

// WithStreamWindow sets the receive windows the Conn grants servers for
// streams: messages and bytes per stream, bytes per connection over all
// its streams (0 keeps a default: 1 MiB per stream, 16 MiB per
// connection, and a message count derived from the stream's bytes, one
// per 128 bytes: 8,192 for 1 MiB). A server may have up to one message
// beyond a window in flight.
func WithStreamWindow(messages, bytes, conn int) Option {
	return func(o *options) {
		o.streams.windows = wire.StreamWindows{Messages: clamp32(messages), Bytes: clamp32(bytes), Conn: clamp32(conn)}
	}
}

// DefaultStreamCancelWait bounds how long a canceled stream on lanes waits
// for the server's acknowledgement before it closes its lanes.
const DefaultStreamCancelWait = 2 * time.Second

// WithStreamCancelWait sets how long a canceled stream on lanes waits for
// the server's acknowledgement before it closes its lanes (0: the
// default, DefaultStreamCancelWait). The caller does not wait: the stream
// ends on its side at once, and the lanes go back to the pool once the
// server answered.
func WithStreamCancelWait(d time.Duration) Option {
	return func(o *options) { o.streams.cancelWait = d }
}

func clamp32(n int) int32 { return int32(min(max(n, 0), 1<<31-1)) }

// StreamMeter is told the size of each message a stream sends or
// receives: its data frame's payload, what the stream windows count and
// the server's hatrpc_server_stream_message_bytes_total adds (a server
// message's header block included). Calls come from the goroutine of
// the SendMsg or RecvMsg that moved the message, once it returned nil.
type StreamMeter interface {
	SentMsg(bytes int64)
	ReceivedMsg(bytes int64)
}

type meterKey struct{}

// WithStreamMeter returns ctx carrying m: a stream NewStream opens with
// it (under any interceptors) reports every message to m. Metering costs
// a stream without a meter one nil check per message.
// clientmetrics.StreamInterceptor counts bytes this way.
func WithStreamMeter(ctx context.Context, m StreamMeter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// StreamOpener opens a stream; stream interceptors receive the next one.
type StreamOpener func(ctx context.Context, m *Method, final proto.Struct) (Stream, error)

// StreamInterceptor wraps the opening of a stream; it may wrap the Stream
// it returns (to count or trace its messages).
type StreamInterceptor func(ctx context.Context, m *Method, final proto.Struct, next StreamOpener) (Stream, error)

// WithStreamInterceptors appends stream interceptors; the first given
// runs outermost.
func WithStreamInterceptors(ic ...StreamInterceptor) Option {
	return func(o *options) { o.streams.interceptors = append(o.streams.interceptors, ic...) }
}

var _ Streamer = (*Conn)(nil)

// NewStream opens a stream of m (see Streamer). Its context bounds the
// stream: canceling it, or its deadline, ends the stream on both sides.
// Read until RecvMsg returns an error, or cancel ctx: either releases
// what the stream holds.
func (c *Conn) NewStream(ctx context.Context, m *Method, final proto.Struct) (Stream, error) {
	return chainStream(ctx, c.o.streams.interceptors, m, final, c.newStream)
}

func chainStream(ctx context.Context, ics []StreamInterceptor, m *Method, final proto.Struct, open StreamOpener) (Stream, error) {
	if len(ics) == 0 {
		return open(ctx, m, final)
	}
	return ics[0](ctx, m, final, func(ctx context.Context, m *Method, f proto.Struct) (Stream, error) {
		return chainStream(ctx, ics[1:], m, f, open)
	})
}

func (c *Conn) newStream(ctx context.Context, m *Method, final proto.Struct) (Stream, error) {
	if m.Stream == stream.None {
		return nil, fmt.Errorf("client: %s is not a streaming function: call it", m.Name)
	}
	m = c.prepare(m) // planned as a call is (WithServiceLevelHints too)
	if c.http != nil {
		return nil, fmt.Errorf("%w: %s is Thrift over HTTP", stream.ErrNeedsHatRPCPeer, c.addr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	if s.st == nil {
		return nil, fmt.Errorf("%w: %s", stream.ErrNeedsHatRPCPeer, s.peerKind())
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	if cs, err := c.laneStream(ctx, s, m, final, timeout); cs != nil || err != nil {
		return cs, err // stream_lane.go; neither: the plan has it on TCP
	}
	sctx, cancel := context.WithCancelCause(ctx)
	cs := &clientStream{s: s, m: m, final: final, ctx: sctx, cancel: cancel, proto: s.format.Proto, headerCh: make(chan struct{}), timed: timeout > 0,
		selfRead: m.Stream == stream.Server}
	s.mu.Lock()
	if s.err != nil {
		err := s.connErrLocked()
		s.mu.Unlock()
		cancel(err)
		return nil, err
	}
	s.seq++
	if s.seq <= 0 {
		s.seq = 1
	}
	cs.id = s.seq
	st, err := s.st.Open(cs.id, cs)
	if err != nil {
		s.mu.Unlock()
		cancel(err)
		return nil, err
	}
	cs.st = st
	s.streams++
	if !s.reading {
		// Stream frames must be read even when no call waits.
		s.reading = true
		go s.readIdle()
	}
	s.mu.Unlock()

	err = c.writeOpen(ctx, cs, timeout, func(b []byte) error {
		if werr := s.w.Write(b); werr != nil {
			s.fail(werr)
			return &ConnError{Op: "write", Err: werr}
		}
		return nil
	})
	if err != nil {
		cs.end(err)
		return nil, err
	}
	cs.stop = context.AfterFunc(sctx, func() { cs.end(context.Cause(sctx)) })
	return cs, nil
}

// writeOpen encodes cs's open frame (its headers, and the call message
// with no arguments that names the function) and hands it to write.
//
// With a server that grants wire.CapStreamWindows every open names the
// stream's receive window on this side (FlagWindow), and the stream
// counts by the windows of its function on both sides: its own
// stream_window hint, and the server's as the hello listed it. writeOpen
// is the one place both TCP and lane streams set them, before anything
// of the stream is sent.
func (c *Conn) writeOpen(ctx context.Context, cs *clientStream, timeout time.Duration, write func([]byte) error) error {
	name := cs.m.Name
	if c.o.multiplexed && cs.m.Service != "" {
		name = cs.m.Service + ":" + cs.m.Name
	}
	codec := wire.GetCodec()
	bp := wire.GetBuf()
	defer wire.PutBuf(bp)
	b := (*bp)[:wire.HeaderSize]
	var flags uint8
	cs.meter, _ = ctx.Value(meterKey{}).(StreamMeter) // both routes open through here
	cs.borrow = cs.m.Hints != nil && cs.m.Hints.Client.BorrowMsgs && !cs.s.c.o.streams.ownedMsgs
	if cs.s.caps&wire.CapStreamWindows != 0 {
		var recv wire.StreamWindows
		if cs.m.Hints != nil {
			n, msgs := hints.StreamWindowOf(cs.m.Hints.Client) // as the plan's table shows it
			recv = wire.StreamWindows{Messages: int32(msgs), Bytes: int32(n)}
		}
		cs.st.SetWindows(cs.s.fnWin[name], recv)
		msgs, n := cs.st.RecvWindow()
		b = wire.AppendOpenWindow(b, uint32(msgs), uint32(n))
		flags |= wire.FlagWindow
	}
	if cs.s.carriesHeaders() {
		var hf uint8
		b, hf = cs.s.appendRequestHead(ctx, b, cs.id)
		flags |= hf
	}
	b, err := codec.AppendMessage(b, cs.proto, name, proto.Call, cs.id, emptyStruct{})
	wire.PutCodec(codec)
	*bp = b
	if err != nil {
		return err
	}
	wire.SealFrame(b, wire.KindStreamOpen, flags|compactFlag(cs.proto), cs.id, timeout)
	return write(b)
}

// peerKind says what the session's peer is, for ErrNeedsHatRPCPeer.
func (s *session) peerKind() string {
	switch {
	case s.hat:
		return s.c.addr + " is a HatRPC server that did not grant streams"
	case s.format.Header:
		return s.c.addr + " speaks THeader (" + s.format.String() + ")"
	}
	return s.c.addr + " is a plain Thrift server (" + s.format.String() + ")"
}

func compactFlag(p proto.Protocol) uint8 {
	if p == proto.Compact {
		return wire.FlagCompact
	}
	return 0
}

// emptyStruct is a stream open's argument struct: the messages follow.
type emptyStruct struct{}

func (emptyStruct) EncodeBinary(w *proto.BinaryWriter) error {
	w.WriteStructBegin()
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (emptyStruct) EncodeCompact(w *proto.CompactWriter) error {
	w.WriteStructBegin()
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}
func (emptyStruct) DecodeBinary(r *proto.BinaryReader) error   { return r.Skip(proto.STRUCT) }
func (emptyStruct) DecodeCompact(r *proto.CompactReader) error { return r.Skip(proto.STRUCT) }

// errEnded: the server's closing message came; RecvMsg decodes it once
// the messages before it are read.
var errEnded = errors.New("client: stream ended")

var errSendClosed = errors.New("client: SendMsg after CloseSend")

// clientStream is the client's side of one stream.
type clientStream struct {
	s      *session
	st     *streamcore.Stream
	m      *Method
	meter  StreamMeter // nil: none (WithStreamMeter)
	final  proto.Struct
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool
	proto  proto.Protocol
	id     int32

	headerCh chan struct{} // closed once the header is known

	mu       sync.Mutex
	header   metadata.MD
	trailer  metadata.MD
	endMsg   []byte // the closing message (nil: a clean end without one)
	result   error  // what RecvMsg returns from now on
	ended    bool   // finished: the session no longer counts it
	headerOK bool
	closed   bool // CloseSend

	peerDone atomic.Bool // the server ended the stream (end or reset), or the connection did
	timed    bool        // the open carried a deadline
	// lane: the outbox of the lane carrying the stream (stream_lane.go);
	// nil on the session's TCP connection.
	lane *streamcore.Outbox
	// laneMax: on a lane, the largest frame payload its lanes carry
	// (lanePool.maxBody); 0 on TCP.
	laneMax int
	// laneEnded: on lanes, tells the pool the stream's lanes are coming
	// back once RecvMsg returned its end (laneRunner.startDrain), so the
	// caller's next stream or call waits for them rather than set up new
	// ones; nil on TCP.
	laneEnded func()
	// laneDrv: a server stream's lane runner that lends its messages;
	// RecvMsg gives them back through it and may run the lane's next
	// exchange (stream_lanedrive.go).
	laneDrv *laneRunner
	// borrow: the function's borrow_msgs hint (set by writeOpen); then
	// held is the message whose buffer the caller's values of its last
	// RecvMsg alias, given back by the next RecvMsg (RecvMsg's goroutine
	// only).
	borrow bool
	held   streamcore.Msg
	// selfRead: a server stream on TCP, whose RecvMsg reads the socket
	// itself while it is the session's only stream (stream_read.go).
	// readStop (guarded by s.mu): it ended, so it reads no more;
	// uncounted (s.mu): release took it off s.streams.
	selfRead  bool
	readStop  bool
	uncounted bool
}

func (cs *clientStream) Context() context.Context { return cs.ctx }

// limit is the largest data message the stream sends: the message
// limit, on a lane no more than the lane carries.
func (cs *clientStream) limit() int {
	if cs.laneMax > 0 {
		return min(cs.laneMax, cs.s.c.o.limits.MaxMessageSize)
	}
	return cs.s.c.o.limits.MaxMessageSize
}

func (cs *clientStream) Header() (metadata.MD, error) {
	select {
	case <-cs.headerCh:
	case <-cs.ctx.Done():
		select {
		case <-cs.headerCh:
		default:
			return nil, context.Cause(cs.ctx)
		}
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.header, nil
}

func (cs *clientStream) Trailer() metadata.MD {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.trailer
}

// gotHeader records the header metadata (nil: none came) on the first
// frame from the server.
func (cs *clientStream) gotHeader(md metadata.MD) {
	cs.mu.Lock()
	if !cs.headerOK {
		cs.headerOK = true
		cs.header = md
		close(cs.headerCh)
	}
	cs.mu.Unlock()
}

func (cs *clientStream) SendMsg(msg proto.Struct) error {
	if !cs.m.Stream.ClientSends() {
		cs.mu.Lock()
		closed := cs.closed
		cs.mu.Unlock()
		if closed {
			return fmt.Errorf("client: %s is a server stream: its one message went before CloseSend", cs.m.Name)
		}
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	bp := wire.GetBuf()
	defer wire.PutBuf(bp)
	// Large binary values go out from the caller's slices (writev). A
	// message past the limit is not built: *stream.TooLargeError, and
	// the stream goes on.
	b, refs, size, err := streamcore.AppendMsg(codec, (*bp)[:wire.HeaderSize], cs.proto, msg, cs.limit())
	*bp = b
	if err != nil {
		if _, ok := err.(*stream.TooLargeError); ok {
			return err
		}
		return fmt.Errorf("client: encode stream message: %w", err)
	}
	wire.SealFrameRefs(b, refs, wire.KindStreamData, compactFlag(cs.proto), cs.id, 0)
	burst := cs.st.Burst()
	err = cs.st.Send(cs.ctx, size, func() error {
		if cs.lane != nil {
			return laneWriteErr(cs.lane.WriteVec(b, refs))
		}
		if werr := cs.s.w.WriteStream(b, refs, burst); werr != nil {
			cs.s.fail(werr)
			return &ConnError{Op: "write", Err: werr}
		}
		return nil
	})
	if err == nil && cs.meter != nil {
		cs.meter.SentMsg(size)
	}
	if errors.Is(err, errEnded) {
		// The server ended the stream: io.EOF, unless RecvMsg already
		// found out how and it was an error (gRPC-Go's rule).
		cs.mu.Lock()
		res := cs.result
		cs.mu.Unlock()
		if res != nil && res != io.EOF {
			return res
		}
		return io.EOF
	}
	return err
}

func (cs *clientStream) CloseSend() error {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return nil
	}
	cs.closed = true
	cs.mu.Unlock()
	if cs.m.Stream.ClientSends() {
		cs.st.EndSend(errSendClosed)
	}
	var f [wire.HeaderSize]byte
	wire.SealFrame(f[:], wire.KindStreamEnd, 0, cs.id, 0)
	if cs.lane != nil {
		if err := laneWriteErr(cs.lane.Write(f[:])); err != errEnded {
			return err
		}
		return nil // ended already: RecvMsg says how, as after a TCP stream's end
	}
	if err := cs.s.w.WriteStream(f[:], nil, false); err != nil {
		cs.s.fail(err)
		return &ConnError{Op: "write", Err: err}
	}
	return nil
}

func (cs *clientStream) RecvMsg(msg proto.Struct) error {
	// borrow_msgs: the values RecvMsg gave last are the caller's no
	// longer, so their frame's buffer goes back to the pool, warm, for a
	// later frame (a fresh 64 KiB buffer per message cost more than the
	// copy into it: page faults, zeroing, collections).
	if cs.laneDrv != nil {
		cs.laneDrv.driveHere(&cs.held)
	} else {
		releaseStreamMsg(&cs.held)
	}
	var (
		m   streamcore.Msg
		err error
	)
	if cs.selfRead {
		m, err = cs.st.RecvReading(cs.ctx, cs.readSelf)
	} else {
		m, err = cs.st.Recv(cs.ctx)
	}
	if err == nil {
		// A borrowed message's binary values, and a large message's,
		// keep its frame's buffer instead of being copied out of it
		// (wire.AliasMin).
		borrow := cs.borrow && (m.Buf != nil || m.Loan != nil)
		alias := borrow || (m.Buf != nil && len(m.Body) >= wire.AliasMin)
		codec := wire.GetCodec()
		if alias {
			err = codec.DecodeAliased(cs.proto, m.Body, &cs.s.c.o.limits, msg)
		} else {
			err = codec.Decode(cs.proto, m.Body, &cs.s.c.o.limits, msg)
		}
		wire.PutCodec(codec)
		switch {
		case borrow:
			cs.held = m
		case m.Buf != nil:
			wire.Release(m.Buf, alias)
		}
		if err != nil {
			err = fmt.Errorf("client: decode %s stream message: %w", cs.m.Name, err)
			cs.reset(err)
		} else if cs.meter != nil {
			cs.meter.ReceivedMsg(m.Size)
		}
		return err
	}
	return cs.finishRecv(err)
}

// finishRecv turns the end of receiving into RecvMsg's answer (the
// closing message decoded: io.EOF or its exception) and releases the
// stream.
func (cs *clientStream) finishRecv(err error) error {
	cs.mu.Lock()
	if cs.result != nil {
		err = cs.result
		cs.mu.Unlock()
		return err
	}
	if errors.Is(err, errEnded) {
		err = io.EOF
		if cs.endMsg != nil {
			codec := wire.GetCodec()
			if derr := decodeReply(codec, cs.proto, cs.endMsg, &cs.s.c.o.limits, cs.final, copyBinaries); derr != nil {
				// The server's handler ending on the deadline we sent
				// it is our own deadline (ctxerr.go).
				err = ownDeadline(cs.ctx, derr)
			}
			wire.PutCodec(codec)
			cs.endMsg = nil
		}
	} else if cs.ctx.Err() != nil {
		err = context.Cause(cs.ctx)
	} else {
		err = ownDeadline(cs.ctx, err)
	}
	cs.result = err
	cs.mu.Unlock()
	cs.end(err)
	cs.cancel(err)
	if cs.laneEnded != nil {
		cs.laneEnded()
	}
	if cs.stop != nil {
		cs.stop()
	}
	return err
}

// reset ends the stream from this side: the server is told with a reset
// frame and the stream's context is canceled.
func (cs *clientStream) reset(err error) {
	cs.end(err)
	cs.cancel(err)
}

// end finishes the stream once, telling the server with a reset frame
// unless the server ended it or the stream's deadline passed (the open
// carried it: the server's own timer ends the handler's context with
// context.DeadlineExceeded), and takes it off the session's count.
func (cs *clientStream) end(err error) {
	if !cs.st.Finish(err) {
		cs.stopRead()
		cs.release()
		return
	}
	cs.stopRead()
	cs.gotHeader(nil)
	if !cs.peerDone.Load() && !(cs.timed && errors.Is(err, context.DeadlineExceeded)) {
		rf := wire.AppendResetFrame(nil, cs.id, proto.ExcUnknown, "canceled: "+err.Error())
		if cs.lane != nil {
			_ = cs.lane.Write(rf)
		} else {
			_ = cs.s.w.WriteStream(rf, nil, false)
		}
	}
	cs.release()
}

// release takes the stream off the session's count, once.
func (cs *clientStream) release() {
	cs.mu.Lock()
	if cs.ended {
		cs.mu.Unlock()
		return
	}
	cs.ended = true
	cs.mu.Unlock()
	if cs.lane != nil {
		return // never counted: the session's reader has nothing to read for it
	}
	s := cs.s
	s.mu.Lock()
	s.streams--
	cs.uncounted = true
	if s.streams == 0 && !s.reading && s.pending.len() == 0 && s.err == nil && !s.idleArmed {
		// The role was parked with this stream (stream_read.go): the
		// connection is watched again as after a call.
		s.idleArmed = true
		s.idle.Reset(idleDelay)
	}
	s.mu.Unlock()
}

// stopRead ends cs's reading of the session's socket (stream_read.go).
func (cs *clientStream) stopRead() {
	if cs.selfRead {
		cs.s.stopStreamRead(cs)
	}
}

// readSelf is cs's read for streamcore.Stream.RecvReading.
func (cs *clientStream) readSelf() bool { return cs.s.recvRead(cs) }

// streamFrame files one stream frame read by the session's reader (bp
// holds it). An error is the connection's.
func (s *session) streamFrame(h *wire.Header, bp *[]byte) error {
	if s.st == nil {
		wire.PutBuf(bp)
		return fmt.Errorf("%w: stream frame of kind %d on a connection without streams", wire.ErrBadFrame, h.Kind)
	}
	s.filedID = h.Seqid
	return fileStreamFrame(s.st, h, bp)
}

// fileStreamFrame files one stream frame from the server with st, the
// streams of a session or of a lane (bp holds it). An error is the
// connection's (the lane's).
func fileStreamFrame(sc *streamcore.Conn, h *wire.Header, bp *[]byte) error {
	if err := wire.CheckStreamHeader(h); err != nil {
		wire.PutBuf(bp)
		return err
	}
	payload := (*bp)[wire.HeaderSize:]
	if h.Kind == wire.KindStreamData {
		return fileData(sc, h, payload, streamcore.Msg{Buf: bp})
	}
	defer wire.PutBuf(bp)
	switch h.Kind {
	case wire.KindStreamWindow:
		msgs, n, _ := wire.ParseWindow(payload)
		st, err := sc.Window(h.Seqid, msgs, n)
		if err != nil && h.Seqid == 0 {
			return err
		}
		if err != nil {
			st.Owner.(*clientStream).reset(err)
		}
	case wire.KindStreamEnd:
		block, msg, err := wire.StreamBody(h, payload)
		if err != nil {
			return err
		}
		st := sc.Get(h.Seqid)
		if st == nil {
			return nil
		}
		cs := st.Owner.(*clientStream)
		cs.gotHeader(nil)
		cs.mu.Lock()
		if block != nil {
			if cs.trailer, err = wire.ParseKV(block); err != nil {
				cs.mu.Unlock()
				return err
			}
		}
		if len(msg) > 0 {
			cs.endMsg = append([]byte(nil), msg...)
		}
		cs.mu.Unlock()
		cs.peerDone.Store(true)
		st.Detach()
		st.EndSend(errEnded)
		st.EndRecv(errEnded)
	case wire.KindStreamReset:
		typ, text, _ := wire.ParseReset(payload)
		if st := sc.Get(h.Seqid); st != nil {
			cs := st.Owner.(*clientStream)
			exc := streamcore.ResetError(typ, text)
			cs.peerDone.Store(true)
			cs.end(exc)
		}
	default:
		return fmt.Errorf("%w: stream frame of kind %d from server", wire.ErrBadFrame, h.Kind)
	}
	return nil
}

// fileData files the payload of a data frame whose header was checked;
// m holds what its body lies in (a pooled buffer, or a loan of a lane's
// reply), given back when the message is not queued.
func fileData(sc *streamcore.Conn, h *wire.Header, payload []byte, m streamcore.Msg) error {
	block, body, err := wire.StreamBody(h, payload)
	if err != nil {
		releaseStreamMsg(&m)
		return err
	}
	var md metadata.MD
	if block != nil {
		if md, err = wire.ParseKV(block); err != nil {
			releaseStreamMsg(&m)
			return err
		}
	}
	var st *streamcore.Stream
	if len(body) == 0 { // headers only
		releaseStreamMsg(&m)
		st, err = sc.NoteHeaders(h.Seqid)
	} else {
		m.Body, m.Size = body, int64(len(payload))
		st, err = sc.Data(h.Seqid, m, block != nil)
	}
	if st != nil {
		cs := st.Owner.(*clientStream)
		if err == nil {
			cs.gotHeader(md)
		} else {
			cs.reset(fmt.Errorf("client: server broke the stream's rules: %w", err))
		}
	}
	// Frames for a stream this side ended are strays: dropped.
	return nil
}

// failStreams ends the streams of a session that failed.
func (s *session) failStreams(err error) {
	if s.st == nil {
		return
	}
	s.st.Each(func(st *streamcore.Stream) { st.Owner.(*clientStream).peerDone.Store(true) })
	for _, st := range s.st.Fail(err) {
		cs := st.Owner.(*clientStream)
		cs.gotHeader(nil)
		cs.release()
	}
}

func releaseStreamMsg(m *streamcore.Msg) {
	if m.Buf != nil {
		wire.PutBuf(m.Buf)
	}
	if m.Loan != nil {
		m.Loan.Return()
	}
	*m = streamcore.Msg{}
}

// laneWriteErr is a lane stream's write error as a TCP stream's would be:
// the lane's outbox closes when the stream ended (the server's end or
// reset came, possibly in the exchange that carried this side's last
// frames, and is filed just after) or the lane failed, and either way the
// stream's outcome is RecvMsg's to tell (errEnded: SendMsg returns io.EOF
// or that outcome).
func laneWriteErr(err error) error {
	if errors.Is(err, streamcore.ErrLaneGone) {
		return errEnded
	}
	return err
}
