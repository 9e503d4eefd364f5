package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Streams (docs/design/streams.md): a HatRPC connection that negotiated
// wire.CapStreams carries streams next to its calls. The reader files
// each stream frame with the connection's streamcore.Conn without ever
// blocking on a stream; each stream's handler runs on a goroutine of its
// own, counted as a call in flight (so the connection, and a Shutdown,
// wait for it), and the connection's end cancels every stream.

// DefaultMaxStreams is how many streams one connection may have open
// unless WithMaxStreams says otherwise.
const DefaultMaxStreams = 1 << 14

type streamOptions struct {
	windows      wire.StreamWindows
	max          int
	interceptors []StreamInterceptor
}

// WithStreamWindow sets the receive windows the server grants each
// client for streams: messages and bytes per stream, bytes per
// connection over all its streams (0 keeps a default: 1 MiB per stream,
// 16 MiB per connection, and a message count derived from the stream's
// bytes, one per streamcore.MsgCost bytes: 8,192 for 1 MiB). A client
// may have up to one message beyond a window in flight, so a stream
// buffers at most its window plus one message.
func WithStreamWindow(messages, bytes, conn int) Option {
	return func(o *options) {
		o.streams.windows = wire.StreamWindows{Messages: clamp32(messages), Bytes: clamp32(bytes), Conn: clamp32(conn)}
	}
}

// WithMaxStreams bounds the streams one connection may have open
// (default DefaultMaxStreams); an open beyond it is reset.
func WithMaxStreams(n int) Option { return func(o *options) { o.streams.max = n } }

// StreamInfo describes the stream a StreamInterceptor wraps.
type StreamInfo struct {
	Service  string
	Method   *Method
	StreamID int32
	Protocol proto.Protocol
	Remote   string
	Deadline time.Time // zero when the client sent none
}

// StreamInterceptor wraps a stream's handler; it may wrap ss (to count
// or trace its messages) before passing it on.
type StreamInterceptor func(ctx context.Context, info *StreamInfo, ss ServerStream, next StreamHandler) (proto.Struct, error)

// WithStreamInterceptors appends stream interceptors; the first given
// runs outermost.
func WithStreamInterceptors(ic ...StreamInterceptor) Option {
	return func(o *options) { o.streams.interceptors = append(o.streams.interceptors, ic...) }
}

func clamp32(n int) int32 { return int32(min(max(n, 0), 1<<31-1)) }

// unaryStream is the arguments of a streaming function called as a unary
// one: skipped, and the call answered errUnaryStream.
type unaryStream struct{}

func (unaryStream) EncodeBinary(*proto.BinaryWriter) error     { return nil }
func (unaryStream) EncodeCompact(*proto.CompactWriter) error   { return nil }
func (unaryStream) DecodeBinary(r *proto.BinaryReader) error   { return r.Skip(proto.STRUCT) }
func (unaryStream) DecodeCompact(r *proto.CompactReader) error { return r.Skip(proto.STRUCT) }

func errUnaryStream(m *Method) error {
	return proto.NewApplicationException(proto.ExcUnknownMethod,
		fmt.Sprintf("%s is a %s streaming function: open it as a stream", m.Name, m.Stream))
}

// grantStreams answers a hello that offers streams: the windows the
// server receives in, and the connection's stream state.
func (c *conn) grantStreams(h *wire.Hello, rep *wire.HelloReply) {
	if h.Caps&wire.CapStreams == 0 {
		return
	}
	rep.Caps |= wire.CapStreams
	rep.Windows = streamcore.WithDefaults(c.s.opts.streams.windows)
	if h.Caps&wire.CapStreamWindows != 0 {
		// The client's opens then carry its window for each stream, and
		// it sends within the windows listed here.
		rep.Caps |= wire.CapStreamWindows
		if ws := c.s.fnWindows.Load(); ws != nil {
			rep.FnWindows = *ws
		}
	}
	st := streamcore.NewConn(c.w.Write, c.releaseStreamMsg, h.Windows, rep.Windows, streamcore.BulkBound())
	c.w.OnAsyncError(c.checkWrite) // a batched stream frame's write failed
	c.mu.Lock()
	c.st, c.sw = st, c.w
	c.mu.Unlock()
}

func (c *conn) releaseStreamMsg(m *streamcore.Msg) {
	if m.Buf != nil {
		wire.PutBuf(m.Buf)
	}
	if m.Charge > 0 {
		c.s.budget.release(c, m.Charge)
	}
	*m = streamcore.Msg{}
}

// streamFrame handles one stream frame read by the reader (bp holds it,
// with the memory charged for it). An error is the connection's: a
// malformed frame closes it; a stream's violation resets only that stream.
func (c *conn) streamFrame(h *wire.Header, bp *[]byte) error {
	return c.fileStream(c.st, c.sw, h, bp, c.takeCharge())
}

// fileStream files one stream frame with sc, the streams whose frames
// go to sw: the connection's, or those of a lane stream a second lane
// joined (stream_lane.go). charge is what the frame holds of the memory
// budget: a data message keeps it until consumed, any other frame gives
// it back at once.
func (c *conn) fileStream(sc *streamcore.Conn, sw streamWriter, h *wire.Header, bp *[]byte, charge int64) error {
	if sc == nil {
		c.dropFrame(bp, charge)
		return fmt.Errorf("%w: stream frame of kind %d on a connection without streams", wire.ErrBadFrame, h.Kind)
	}
	if err := wire.CheckStreamHeader(h); err != nil {
		c.dropFrame(bp, charge)
		return err
	}
	payload := (*bp)[wire.HeaderSize:]
	if h.Kind == wire.KindStreamData {
		if h.Flags&wire.FlagHeaders != 0 {
			c.dropFrame(bp, charge)
			return fmt.Errorf("%w: header block on a client's stream data", wire.ErrBadFrame)
		}
		m := streamcore.Msg{Buf: bp, Body: payload, Size: int64(len(payload)), Charge: charge}
		if st, err := sc.Data(h.Seqid, m, false); err != nil {
			c.resetStream(sw, h.Seqid, st, proto.ExcProtocolError, err)
		}
		return nil
	}
	defer wire.PutBuf(bp)
	c.s.budget.release(c, charge)
	switch h.Kind {
	case wire.KindStreamOpen:
		return c.openStream(h, payload)
	case wire.KindStreamWindow:
		msgs, n, _ := wire.ParseWindow(payload) // CheckStreamHeader checked its size
		st, err := sc.Window(h.Seqid, msgs, n)
		if err != nil && h.Seqid == 0 {
			return err
		}
		if err != nil {
			c.resetStream(sw, h.Seqid, st, proto.ExcProtocolError, err)
		}
	case wire.KindStreamEnd:
		if len(payload) != 0 {
			return fmt.Errorf("%w: client's stream end with %d payload bytes", wire.ErrBadFrame, len(payload))
		}
		if st := sc.Get(h.Seqid); st != nil {
			st.EndRecv(io.EOF)
		}
	case wire.KindStreamReset:
		typ, text, _ := wire.ParseReset(payload)
		if st := sc.Get(h.Seqid); st != nil {
			clientReset(st, typ, text)
		}
	default:
		return fmt.Errorf("%w: frame kind %d where a stream frame belongs", wire.ErrBadFrame, h.Kind)
	}
	return nil
}

// clientReset ends st as the client's reset (of type typ, saying text)
// does: its handler's context is canceled, no closing message goes.
func clientReset(st *streamcore.Stream, typ int32, text string) {
	ss := st.Owner.(*serverStream)
	err := streamcore.ResetError(typ, "client reset the stream: "+text)
	ss.reset.Store(true)
	st.Finish(err)
	ss.cancel(err)
}

// dropFrame gives back a frame's buffer and its charge.
func (c *conn) dropFrame(bp *[]byte, charge int64) {
	wire.PutBuf(bp)
	c.s.budget.release(c, charge)
}

// resetStream resets stream id (st: the stream, nil when unknown) with
// an exception of type typ, written to sw: a violation of its rules, or
// a message the memory budget refused.
func (c *conn) resetStream(sw streamWriter, id int32, st *streamcore.Stream, typ int32, cause error) {
	c.s.log.Debug("hatrpc: stream reset", "remote", c.remote, "stream", id, "err", cause)
	c.checkWrite(sw.WriteStream(wire.AppendResetFrame(nil, id, typ, cause.Error()), nil, false))
	if st != nil {
		ss := st.Owner.(*serverStream)
		ss.reset.Store(true)
		st.Finish(cause)
		ss.cancel(cause)
	}
}

// openStream starts the handler of the stream an open frame asks for.
func (c *conn) openStream(h *wire.Header, payload []byte) error {
	winMsgs, winBytes, payload, err := wire.OpenWindow(h, payload)
	if err != nil {
		return err
	}
	block, msg, err := wire.StreamBody(h, payload)
	if err != nil {
		return err
	}
	p := h.Protocol()
	mh, err := wire.ParseMsgHeader(p, msg)
	if err != nil {
		return err
	}
	if mh.Type != proto.Call {
		return fmt.Errorf("%w: stream open of message type %v", proto.ErrInvalidData, mh.Type)
	}
	if c.st.Get(h.Seqid) != nil {
		return fmt.Errorf("%w: stream %d opened twice", wire.ErrBadFrame, h.Seqid)
	}
	c.busy()
	m := c.s.lookup(mh.Name)
	refuse := func(typ int32, text string) error {
		c.checkWrite(c.sw.WriteStream(wire.AppendResetFrame(nil, h.Seqid, typ, text), nil, false))
		return nil
	}
	switch {
	case m == nil:
		return refuse(proto.ExcUnknownMethod, "unknown method "+string(mh.Name))
	case m.m.HandleStream == nil:
		return refuse(proto.ExcUnknownMethod, m.m.Name+" is not a streaming function")
	case c.st.Len() >= c.maxStreams():
		return refuse(proto.ExcInternalError, fmt.Sprintf("server busy: %d streams open on the connection", c.st.Len()))
	}
	route := routeTCP
	if c.fp != nil {
		route = routeLane
	}
	ss := &serverStream{c: c, w: c.sw, m: m, proto: p, id: h.Seqid, seqid: mh.Seqid, limit: c.streamLimit(),
		stats: c.s.smet.begin(m.svc, m.m.Name, route)}
	ctx, cancel := context.WithCancelCause(c.ctx)
	ss.cancel = cancel
	if h.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, h.Timeout)
		ss.stopTimer = stop
	}
	if block != nil {
		ctx = metadata.NewServerContext(ctx, metadata.NewLazyServerCallCopy(block, wire.ParseKV))
	}
	ss.ctx = ctx
	if ss.st, err = c.st.Open(h.Seqid, ss); err != nil {
		cancel(err)
		if ss.stopTimer != nil {
			ss.stopTimer()
		}
		return nil // the connection failed meanwhile
	}
	if winBytes > 0 {
		// A client that names its window knows ours (the hello reply's
		// FnWindows): each side counts this stream by the other's.
		ss.st.SetWindows(wire.StreamWindows{Messages: int32(winMsgs), Bytes: int32(winBytes)}, m.window)
	}
	c.begin()
	go ss.run()
	return nil
}

func (c *conn) maxStreams() int {
	if n := c.s.opts.streams.max; n > 0 {
		return n
	}
	return DefaultMaxStreams
}

// endStreams ends every stream of a connection whose reading stopped:
// their handlers' contexts are canceled and their buffers given back.
func (c *conn) endStreams(err error) {
	if c.st == nil {
		return
	}
	for _, st := range c.st.Fail(err) {
		st.Owner.(*serverStream).cancel(err)
	}
}

// serverStream is the server's side of one stream.
type serverStream struct {
	c         *conn
	w         streamWriter // c.sw when it opened
	st        *streamcore.Stream
	m         *method
	ctx       context.Context
	cancel    context.CancelCauseFunc
	stopTimer context.CancelFunc
	proto     proto.Protocol
	id, seqid int32
	limit     int         // the largest frame payload it sends (conn.streamLimit)
	reset     atomic.Bool // reset by either side: no closing message
	stats     *streamStats
	// size of the last message sent: the next is encoded into a pooled
	// buffer of about its size, not grown from 4 KiB into fresh memory
	// (~250 KiB of garbage per 64 KiB message, measured with hatkv's
	// streamed scan)
	hint wire.SizeHint
	// held: with borrow_msgs, the message whose buffer the values of the
	// handler's last RecvMsg alias, given back (with its memory charge)
	// by its next RecvMsg or when it returns (the handler's goroutine
	// only).
	held streamcore.Msg

	mu         sync.Mutex
	header     metadata.MD
	headerSent bool
	trailer    metadata.MD
}

var _ ServerStream = (*serverStream)(nil)

var errStreamDone = errors.New("server: the stream's handler returned")

func (ss *serverStream) Context() context.Context { return ss.ctx }

// streamLimit is the largest frame payload a stream of the connection
// sends: the message limit, on a lane no more than the lane carries
// (laneSession.maxReplyBody; a larger frame cannot be sent at all).
func (c *conn) streamLimit() int {
	if c.fp != nil {
		return c.fp.maxReplyBody()
	}
	return c.s.opts.limits.MaxMessageSize
}

func (ss *serverStream) SendHeader(md metadata.MD) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.headerSent {
		return errors.New("server: stream headers already sent")
	}
	h := merge(maps.Clone(ss.header), md)
	// A header frame is a data frame, held to the message limit (the
	// peer takes a larger one for a broken connection): past it nothing
	// is sent and nothing changes, so a smaller header may follow.
	if n := wire.HeaderBlockSize(h); len(h) > 0 && n > ss.limit {
		ss.c.s.met.rejected.WithLabelValues(streamTooLarge).Inc()
		return &stream.TooLargeError{Size: n, Limit: ss.limit}
	}
	ss.headerSent = true
	ss.header = h
	return ss.writeHeaderLocked()
}

// streamTooLarge is the rejected_total reason of a stream data frame (a
// message, a header block) refused for passing the message limit.
const streamTooLarge = "stream_message_too_large"

// writeHeaderLocked sends the header metadata in a frame of its own
// (a data frame holding only a header block, not counted as a message),
// within the limit (SendHeader).
func (ss *serverStream) writeHeaderLocked() error {
	if len(ss.header) == 0 {
		return nil
	}
	b := wire.AppendHeaderBlock(make([]byte, wire.HeaderSize, 256), ss.header)
	wire.SealFrame(b, wire.KindStreamData, wire.FlagHeaders|compactFlag(ss.proto), ss.id, 0)
	return ss.w.WriteStream(b, nil, false)
}

func compactFlag(p proto.Protocol) uint8 {
	if p == proto.Compact {
		return wire.FlagCompact
	}
	return 0
}

func merge(dst, src metadata.MD) metadata.MD {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = metadata.MD{}
	}
	maps.Copy(dst, src)
	return dst
}

func (ss *serverStream) SetTrailer(md metadata.MD) {
	ss.mu.Lock()
	ss.trailer = merge(ss.trailer, md)
	ss.mu.Unlock()
}

func (ss *serverStream) SendMsg(msg proto.Struct) error {
	if !ss.m.m.Stream.ServerSends() {
		return fmt.Errorf("server: %s is a %s stream: its one reply is the handler's result", ss.m.m.Name, ss.m.m.Stream)
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	bp := ss.hint.Buf()
	owned := false // given to the connection's writer, which returns it
	defer func() {
		if !owned {
			wire.PutBuf(bp)
		}
	}()
	b := (*bp)[:wire.HeaderSize]
	flags := compactFlag(ss.proto)
	ss.mu.Lock()
	if !ss.headerSent {
		ss.headerSent = true
		if len(ss.header) > 0 {
			b = wire.AppendHeaderBlock(b, ss.header)
			flags |= wire.FlagHeaders
		}
	}
	ss.mu.Unlock()
	// Large binary values go out from the handler's slices (writev). A
	// message past the limit (its header block counting) is not built:
	// *stream.TooLargeError, and the stream goes on.
	b, refs, size, err := streamcore.AppendMsg(codec, b, ss.proto, msg, ss.limit)
	*bp = b
	if err != nil {
		if _, ok := err.(*stream.TooLargeError); ok {
			ss.c.s.met.rejected.WithLabelValues(streamTooLarge).Inc()
			return err
		}
		return fmt.Errorf("server: encode stream message: %w", err)
	}
	ss.hint.Note(len(b))
	wire.SealFrameRefs(b, refs, wire.KindStreamData, flags, ss.id, 0)
	burst := ss.st.Burst()
	err = ss.st.Send(ss.ctx, size, func() error {
		var err error
		if ow, ok := ss.w.(ownedWriter); ok && len(refs) == 0 {
			// The frame is queued in its buffer, not copied into the
			// writer's chunks: the message is encoded once.
			owned = true
			err = ow.WriteStreamOwned(bp, burst)
		} else {
			err = ss.w.WriteStream(b, refs, burst)
		}
		ss.c.checkWrite(err)
		return err
	})
	if err == nil {
		ss.stats.outMsgs.Inc()
		ss.stats.outBytes.Add(float64(size))
		ss.countTCP(size + wire.HeaderSize)
	}
	return err
}

func (ss *serverStream) RecvMsg(msg proto.Struct) error {
	// borrow_msgs: the values of the last RecvMsg are the handler's no
	// longer; their frame's buffer goes back to the pool.
	ss.c.releaseStreamMsg(&ss.held)
	m, err := ss.st.Recv(ss.ctx)
	if err != nil {
		return err
	}
	ss.stats.inMsgs.Inc()
	ss.stats.inBytes.Add(float64(m.Size))
	// A borrowed message's binary values, and a large message's, keep its
	// frame's buffer instead of being copied out of it (wire.AliasMin).
	borrow := ss.m.bmsgs && m.Buf != nil
	alias := borrow || (m.Buf != nil && len(m.Body) >= wire.AliasMin)
	codec := wire.GetCodec()
	if alias {
		err = codec.DecodeAliased(ss.proto, m.Body, ss.m.lim, msg)
	} else {
		err = codec.Decode(ss.proto, m.Body, ss.m.lim, msg)
	}
	wire.PutCodec(codec)
	switch {
	case borrow:
		ss.held = m
	case alias:
		wire.Adopt(m.Buf)
		m.Buf = nil
		fallthrough
	default:
		ss.c.releaseStreamMsg(&m)
	}
	if err != nil {
		return proto.NewApplicationException(proto.ExcProtocolError, "decode "+ss.m.m.Name+" stream message: "+err.Error())
	}
	return nil
}

// run runs the handler and sends the stream's closing message.
func (ss *serverStream) run() {
	c := ss.c
	defer c.end()
	final, err := ss.invoke()
	c.releaseStreamMsg(&ss.held) // the handler's borrowed values end with it
	if !ss.reset.Load() && c.ctx.Err() == nil {
		c.checkWrite(ss.writeEnd(final, err))
	}
	ss.st.Finish(errStreamDone)
	ss.cancel(errStreamDone)
	ss.stats.open.Dec()
	if ss.stopTimer != nil {
		ss.stopTimer()
	}
}

func (ss *serverStream) invoke() (final proto.Struct, err error) {
	defer func() {
		if v := recover(); v != nil {
			ss.c.s.log.Error("hatrpc: stream handler panic", "method", ss.m.m.Name, "remote", ss.c.remote,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			final, err = nil, &panicError{v}
		}
	}()
	ics := ss.c.s.opts.streams.interceptors
	if len(ics) == 0 {
		return ss.m.m.HandleStream(ss.ctx, ss)
	}
	info := &StreamInfo{Service: ss.m.svc, Method: ss.m.m, StreamID: ss.id, Protocol: ss.proto, Remote: ss.c.remote}
	if dl, ok := ss.ctx.Deadline(); ok {
		info.Deadline = dl
	}
	return chainStream(ss.ctx, ics, info, ss, ss.m.m.HandleStream)
}

func chainStream(ctx context.Context, ics []StreamInterceptor, info *StreamInfo, ss ServerStream, h StreamHandler) (proto.Struct, error) {
	if len(ics) == 0 {
		return h(ctx, ss)
	}
	return ics[0](ctx, info, ss, func(ctx context.Context, ss ServerStream) (proto.Struct, error) {
		return chainStream(ctx, ics[1:], info, ss, h)
	})
}

// writeEnd sends the closing message: headers first if none went yet,
// then the end frame with the trailers and the final struct (nil final
// and nil error: none) or the exception the error maps to.
func (ss *serverStream) writeEnd(final proto.Struct, herr error) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.headerSent {
		ss.headerSent = true
		if err := ss.writeHeaderLocked(); err != nil {
			return err
		}
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	bp := wire.GetBuf()
	defer wire.PutBuf(bp)
	to := replyTo{proto: ss.proto, name: ss.m.m.Name, seqid: ss.seqid}
	// The end frame is a data frame, held to the limit with its trailer
	// block (the peer takes a larger one for a broken connection, a lane
	// cannot send it): the block is sized before it is built, and the
	// message gets what the block leaves. A trailer past the limit on
	// its own is dropped and the stream ends with the exception saying
	// so, in place of the final or the handler's error, which the peer
	// would otherwise take for a whole answer without its trailer.
	limit, tsize := ss.limit, 0
	var exc *proto.ApplicationException
	if len(ss.trailer) > 0 {
		if tsize = wire.HeaderBlockSize(ss.trailer); tsize > limit {
			ss.c.s.met.rejected.WithLabelValues("reply_too_large").Inc()
			exc = trailerTooLarge(tsize, limit)
			tsize = 0
		}
	}
	room := limit - tsize
	b := (*bp)[:wire.HeaderSize]
	flags := compactFlag(ss.proto)
	if tsize > 0 {
		b = wire.AppendHeaderBlock(b, ss.trailer)
		flags |= wire.FlagHeaders
	}
	start := len(b)
	var refused *proto.ApplicationException // in place of the message built
	typ, body := proto.Reply, final
	if herr != nil && exc == nil {
		typ, body = proto.Exception, ss.exception(herr)
	}
	switch {
	case exc != nil:
		b = appendRefused(codec, b, &to, exc, limit, true)
	case body != nil:
		// Encoded within its room as a unary reply is (appendReply): a
		// final or an exception past it (the handler's text may be
		// large) is counted, not built, and refused.
		var size int
		var more bool
		if b, _, size, more = appendReply(codec, b, &to, typ, body, room); size > room || more {
			ss.c.s.met.rejected.WithLabelValues("reply_too_large").Inc()
			refused = endTooLarge(size, tsize, limit, more)
		}
	}
	if refused != nil {
		b = appendRefused(codec, b[:start], &to, refused, math.MaxInt, true)
		// The refusal itself may not fit beside a trailer that nearly
		// fills the limit: then it goes without the trailer.
		if len(b)-start > room {
			b = appendRefused(codec, b[:wire.HeaderSize], &to, refused, limit, true)
			flags &^= wire.FlagHeaders
		}
	}
	*bp = b
	wire.SealFrame(b, wire.KindStreamEnd, flags, ss.id, 0)
	ss.countTCP(int64(len(b)))
	return ss.w.WriteStream(b, nil, false)
}

// endTooLarge is the exception a stream ends with in place of its final
// (or the handler's exception) of size bytes (more: of more than size)
// that, with a trailer block of tsize bytes (0: none), exceeds limit.
func endTooLarge(size, tsize, limit int, more bool) *proto.ApplicationException {
	if tsize == 0 {
		return replyTooLarge(size, limit, more)
	}
	return proto.NewApplicationException(proto.ExcInternalError,
		fmt.Sprintf("hatrpc: reply of %s with a trailer of %d bytes exceeds the message limit of %d bytes",
			sizeText(size, more), tsize, limit))
}

// trailerTooLarge is the exception a stream ends with when its trailer
// block of size bytes exceeds limit on its own.
func trailerTooLarge(size, limit int) *proto.ApplicationException {
	return proto.NewApplicationException(proto.ExcInternalError,
		fmt.Sprintf("hatrpc: stream trailer of %d bytes exceeds the message limit of %d bytes", size, limit))
}

// exception maps a handler's error as a unary call's (wire.md §4).
func (ss *serverStream) exception(err error) *proto.ApplicationException {
	var pe *panicError
	if !errors.As(err, &pe) {
		var ae *proto.ApplicationException
		if !errors.As(err, &ae) {
			ss.c.s.log.Debug("hatrpc: stream handler error", "method", ss.m.m.Name, "remote", ss.c.remote, "err", err)
		}
	}
	return toAppException(err)
}
