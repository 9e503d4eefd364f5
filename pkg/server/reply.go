package server

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// replyTo says where and how a reply goes: its framing (hat: a HatRPC
// frame, else the connection's plain format), protocol, the message
// header's name and seqid, for a HatRPC frame fseq, the seqid of the
// request frame, which the client dispatches on (the two differ only for
// a client that numbers them differently), for a plain connection its
// position among the connection's replies (order), and for a FLOCK
// call's reply the storage to encode it into (dst). A request embeds
// one: its reply path passes a pointer to it rather than the fields one
// by one or a copy (a struct copied whole is stored field by field and
// read back 16 bytes at a time, each read waiting for the stores).
type replyTo struct {
	hat bool
	// hello: the handshake's reply, bounded by wire.MaxHelloSize as its
	// call is, not by a smaller message limit.
	hello bool
	proto proto.Protocol
	seqid int32 // of the message header
	fseq  int32 // of the HatRPC frame: replies and Cancel frames use it
	order uint64
	name  string
	dst   []byte
	// mem is the memory budget the call holds (its request's and its
	// reply's reservation), until its reply is admitted in exchange
	// (replygate.go) or, without a reply, the call ends.
	mem int64
}

// reply encodes and sends one reply message to to and returns its size.
// codec may be nil.
func (c *conn) reply(to *replyTo, typ proto.MessageType, body proto.Struct, codec *wire.Codec) int {
	return c.replyHinted(to, typ, body, codec, nil, nil)
}

// replyNow is reply to a message answered on the spot: its reply takes
// the next position among the connection's replies.
func (c *conn) replyNow(to *replyTo, typ proto.MessageType, body proto.Struct, codec *wire.Codec) int {
	c.takeOrder(to)
	return c.replyHinted(to, typ, body, codec, nil, nil)
}

// replyHinted is reply with the size of the method's last reply (hint,
// updated here): a large reply is then encoded into a pooled buffer of
// its size instead of growing a small one into fresh memory. md are reply
// headers for a HatRPC frame (THeader replies take theirs in wrapTHeader).
func (c *conn) replyHinted(to *replyTo, typ proto.MessageType, body proto.Struct, codec *wire.Codec, hint *wire.SizeHint, md metadata.MD) int {
	hat := to.hat
	if codec == nil {
		codec = wire.GetCodec()
		defer wire.PutCodec(codec)
	}
	var bp *[]byte
	switch {
	case hint != nil && hint.Large():
		bp = hint.Buf()
	case hat:
		bp = codec.Spare.Get() // back with Spare.Keep once written
	default:
		bp = wire.GetBuf()
	}
	b := *bp
	switch {
	case hat:
		b = b[:wire.HeaderSize]
	case c.format.Framed && !c.format.Header:
		b = b[:4]
	}
	start := len(b)
	var hflag uint8
	if hat && len(md) > 0 {
		b = wire.AppendHeaderBlock(b, md)
		hflag = wire.FlagHeaders
	}
	if hat {
		// Large binary values (an echoed payload, a blob read from
		// storage) go out from the handler's slices with one vectored
		// write instead of being copied into the frame.
		limit, pre := c.s.opts.limits.MaxMessageSize, len(b)-start // the header block counts
		var refs []proto.Ref
		var size int
		var more bool
		b, refs, typ, size, more = appendReplyRefs(codec, b, to, typ, body, c.replyRoom(limit)-pre)
		if exc := c.refusal(pre+size, limit, more); exc != nil {
			b, refs, typ, hflag = appendRefused(codec, b[:start], to, exc, limit, true), nil, proto.Exception, 0
		}
		if hint != nil {
			hint.Note(len(b))
		}
		sealReplyRefs(b, refs, to.proto, to.fseq, typ, hflag)
		*bp = b
		n := len(b) + proto.RefsLen(refs)
		if !c.admitReply(to, int64(n)) {
			codec.Spare.Keep(bp)
			return 0
		}
		c.s.met.io(c.shard).out[ioTCP].Add(uint64(n))
		c.checkWrite(c.w.WriteVec(b, refs))
		c.s.budget.release(c, int64(n))
		codec.Spare.Keep(bp)
		return n - start
	}
	limit := c.s.opts.limits.MaxMessageSize
	if to.hello {
		limit = max(limit, wire.MaxHelloSize)
	}
	var size int
	var more bool
	b, typ, size, more = appendReply(codec, b, to, typ, body, c.replyRoom(limit))
	if exc := c.refusal(size, limit, more); exc != nil {
		b, typ = appendRefused(codec, b[:start], to, exc, limit, false), proto.Exception
	}
	if hint != nil {
		hint.Note(len(b))
	}
	if c.format.Framed && !c.format.Header {
		putLen(b, len(b)-4)
	}
	*bp = b
	if c.format.Header {
		c.wrapTHeader(to.order, bp)
		b = *bp
	}
	n := len(b) - start
	if !c.admitReply(to, int64(len(b))) {
		wire.PutBuf(bp)
		return 0
	}
	c.s.met.io(c.shard).out[ioThrift].Add(uint64(len(b)))
	c.deliver(to.order, bp)
	return n
}

// dropHeld gives back the replies held for a connection that ended.
func (c *conn) dropHeld() {
	for _, bp := range c.held {
		c.s.budget.release(c, int64(len(*bp)))
		wire.PutBuf(bp)
	}
	clear(c.held)
}

func putLen(b []byte, n int) {
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}

// deliver writes plain replies in request order, holding early finishers.
// Each was admitted to the memory budget (admitReply) and stays charged
// until it is written: behind a reply its client does not read, 190
// replies of 11 MB were held uncounted.
func (c *conn) deliver(order uint64, bp *[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if order != c.nextOut {
		c.held[order] = bp
		return
	}
	for {
		err := c.w.Write(*bp)
		c.checkWrite(err)
		c.written(int64(len(*bp)), err)
		wire.PutBuf(bp)
		c.nextOut++
		next, ok := c.held[c.nextOut]
		if !ok {
			return
		}
		delete(c.held, c.nextOut)
		bp = next
	}
}

// Replies that cannot be sent.
//
// A reply larger than its route's message limit, or than its
// connection's share of the memory budget, can never be sent: the call
// gets an INTERNAL_ERROR exception naming the size and the limit in its
// place (the client would refuse an oversized frame with a message that
// names neither the call nor the cause). Such a reply is not built: the
// encoder keeps at most the room the reply can have (replyRoom: the
// limit, or the share if smaller; a lane's batch, what its frame and the
// free share leave) and only counts the rest (wire.Codec.SetLimit), so a
// handler's result of 1 GB against a 64 MiB limit costs a buffer of
// about 64 MiB, not 1 GB (issue 43, D2). A JSON reply (a plain Thrift
// connection's TJSONProtocol) is bounded the same way, but its size past
// the room is not counted (proto.JSONCodec.SetLimit): its exception says
// "reply of more than N bytes", N the room. Binary and compact sizes are
// counted whole: past the room the encoder adds up lengths (a string or
// binary value by its length, a bulk list by its count) without reading
// or copying the values, so the count costs a call per value the
// handler's result holds, not a pass over its bytes. refusal decides, for
// every route (TCP, HTTP, lanes, batches, FLOCK), from the size the
// encoder counted.

// replyRoom is the most a reply's message may take on c when the route's
// message limit is limit: that, or c's share of the memory budget if
// smaller. A reply within it may still wait for room (admitReply).
func (c *conn) replyRoom(limit int) int {
	if b := &c.s.budget; b.total > 0 {
		return int(min(int64(limit), b.shareOf(c)))
	}
	return limit
}

// refusal is the exception a call gets in place of its reply of size
// bytes (more: of more than size bytes, size its room) when the route's
// message limit is limit, or nil when the reply may be sent.
func (c *conn) refusal(size, limit int, more bool) *proto.ApplicationException {
	switch {
	case size > limit || more && size >= limit:
		c.s.met.rejected.WithLabelValues("reply_too_large").Inc()
		return replyTooLarge(size, limit, more)
	case more || c.overShare(size):
		// more within the limit: the room was the share.
		return c.replyOverShare(size, more)
	}
	return nil
}

// sizeText is "N bytes", or with more "more than N bytes".
func sizeText(size int, more bool) string {
	if more {
		return fmt.Sprintf("more than %d bytes", size)
	}
	return fmt.Sprintf("%d bytes", size)
}

// appendReply appends the reply message to b, keeping at most room bytes
// of it (nothing when it is larger: see above), or, when the result does
// not encode (e.g. a required field left unset), an INTERNAL_ERROR
// exception in its place; it returns the message type it wrote and the
// message's size, counted whole even where it was not kept (more: a
// JSON reply past its room, of more than size bytes).
func appendReply(codec *wire.Codec, b []byte, to *replyTo, typ proto.MessageType, body proto.Struct, room int) ([]byte, proto.MessageType, int, bool) {
	start := len(b)
	codec.SetLimit(max(room, 1))
	out, err := codec.AppendMessage(b, to.proto, to.name, typ, to.seqid, body)
	if err == nil {
		return out, typ, len(out) - start, false
	}
	if tl, ok := err.(*proto.TooLargeError); ok {
		return out[:start], typ, tl.Size, tl.More
	}
	out = appendEncodeFailed(codec, out[:start], to, err)
	return out, proto.Exception, len(out) - start, false
}

// replyTooLarge is the exception a call whose reply of size bytes (more:
// of more than size) exceeds limit gets.
func replyTooLarge(size, limit int, more bool) *proto.ApplicationException {
	return proto.NewApplicationException(proto.ExcInternalError,
		fmt.Sprintf("hatrpc: reply of %s exceeds the message limit of %d bytes", sizeText(size, more), limit))
}

// appendRefused appends exc, which a call gets in place of a reply that
// cannot be sent, as a message of at most room bytes: the refusal must fit
// the limit the reply did not. Its text is at most about 170 bytes and the
// limit at least wire.MinMessageSize, but the message repeats the method
// name, which may take the limit nearly whole (the request carried it):
// then the text is cut to what is left, and where even that does not fit
// and the peer dispatches on the frame (anon: a HatRPC frame, whose client
// reads no name) the name is left out. A plain Thrift client checks the
// name, so its refusal keeps it and sheds the exception's fields instead:
// the text, then the type (bareException). With neither it is no larger
// than the request that named the method, so it fits.
func appendRefused(codec *wire.Codec, b []byte, to *replyTo, exc *proto.ApplicationException, room int, anon bool) []byte {
	start := len(b)
	out, _ := codec.AppendMessage(b, to.proto, to.name, proto.Exception, to.seqid, exc)
	over := len(out) - start - room
	if over <= 0 {
		return out
	}
	cut := *exc
	cut.Message = cutText(exc.Message, len(exc.Message)-over)
	name := to.name
	if cut.Message == "" && anon {
		cut.Message, name = exc.Message, ""
		over -= len(to.name)
		if over > 0 {
			cut.Message = cutText(exc.Message, len(exc.Message)-over)
		}
	}
	if cut.Message != "" || anon {
		if cut.Message == "" {
			cut.Message = exc.Message[:1] // an empty one is sent as Apache's default text, which is longer
		}
		out, _ = codec.AppendMessage(out[:start], to.proto, name, proto.Exception, to.seqid, &cut)
		return out
	}
	bare := bareException{typ: exc.Type, typed: true}
	if out, _ = codec.AppendMessage(out[:start], to.proto, name, proto.Exception, to.seqid, &bare); len(out)-start <= room {
		return out
	}
	bare.typed = false
	out, _ = codec.AppendMessage(out[:start], to.proto, name, proto.Exception, to.seqid, &bare)
	return out
}

// bareException is a TApplicationException of fewer fields than
// proto.ApplicationException writes (which always has a text: an empty
// one is sent as Apache's default): its type alone, or none, which a
// reader takes for UNKNOWN with Apache's default text. It is only
// written.
type bareException struct {
	typ   int32
	typed bool
}

// encode writes the struct with w, a proto.BinaryWriter or CompactWriter.
func (e *bareException) encode(w interface {
	WriteStructBegin()
	WriteFieldBegin(t proto.Type, id int16)
	WriteI32(v int32)
	WriteFieldStop()
	WriteStructEnd()
}) error {
	w.WriteStructBegin()
	if e.typed {
		w.WriteFieldBegin(proto.I32, 2)
		w.WriteI32(e.typ)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (e *bareException) EncodeBinary(w *proto.BinaryWriter) error   { return e.encode(w) }
func (e *bareException) EncodeCompact(w *proto.CompactWriter) error { return e.encode(w) }

func (e *bareException) DecodeBinary(*proto.BinaryReader) error {
	return errors.New("server: bareException is only written")
}

func (e *bareException) DecodeCompact(*proto.CompactReader) error {
	return errors.New("server: bareException is only written")
}

// cutText is s cut to at most n bytes, at a character's start.
func cutText(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// appendEncodeFailed replaces a reply that could not be encoded with an
// INTERNAL_ERROR exception saying why.
func appendEncodeFailed(codec *wire.Codec, b []byte, to *replyTo, err error) []byte {
	out, _ := codec.AppendMessage(b, to.proto, to.name, proto.Exception, to.seqid,
		proto.NewApplicationException(proto.ExcInternalError, "encode result: "+err.Error()))
	return out
}

// appendReplyRefs is appendReply leaving large binary values out of b, as
// wire.Codec.AppendMessageRefs; the size counts them.
func appendReplyRefs(codec *wire.Codec, b []byte, to *replyTo, typ proto.MessageType, body proto.Struct, room int) ([]byte, []proto.Ref, proto.MessageType, int, bool) {
	start := len(b)
	codec.SetLimit(max(room, 1))
	out, refs, err := codec.AppendMessageRefs(b, to.proto, to.name, typ, to.seqid, body)
	if err == nil {
		return out, refs, typ, len(out) + proto.RefsLen(refs) - start, false
	}
	if tl, ok := err.(*proto.TooLargeError); ok {
		return out[:start], nil, typ, tl.Size, tl.More
	}
	out = appendEncodeFailed(codec, out[:start], to, err)
	return out, nil, proto.Exception, len(out) - start, false
}

// sealReplyRefs is sealReply for a frame continued by refs.
func sealReplyRefs(frame []byte, refs []proto.Ref, p proto.Protocol, seqid int32, typ proto.MessageType, flags uint8) {
	kind := wire.KindReply
	if typ == proto.Exception {
		kind = wire.KindException
	}
	if p == proto.Compact {
		flags |= wire.FlagCompact
	}
	wire.SealFrameRefs(frame, refs, kind, flags, seqid, 0)
}

// sealReply fills in the HatRPC frame header of a reply frame.
func sealReply(frame []byte, p proto.Protocol, seqid int32, typ proto.MessageType) {
	sealReplyRefs(frame, nil, p, seqid, typ, 0)
}
