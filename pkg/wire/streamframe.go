package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Stream frame kinds (docs/design/streams.md), sent only on connections
// that negotiated CapStreams. The frame seqid is the stream id, chosen by
// the client from the numbers its calls use; a window frame with seqid 0
// grants connection credit.
const (
	// KindStreamOpen (client to server) opens a stream: the payload is
	// [header block] + a Thrift call message with an empty argument
	// struct naming the function; timeout is the client's deadline.
	KindStreamOpen Kind = 8
	// KindStreamData (either way) carries one message: the element
	// struct, encoded without a message header. From the server, a
	// header block may come first (its header metadata, once); a frame
	// of a header block and nothing else carries only the headers.
	KindStreamData Kind = 9
	// KindStreamWindow (either way) grants credit: payload u32 messages,
	// u32 bytes.
	KindStreamWindow Kind = 10
	// KindStreamEnd: from the client, the end of its messages (no
	// payload); from the server, the stream's end: [header block:
	// trailers] + a Thrift reply message (the final struct) or exception
	// message, or no payload (a clean end without a final struct).
	KindStreamEnd Kind = 11
	// KindStreamReset (either way) ends a stream at once: payload i32
	// exception type + its message text.
	KindStreamReset Kind = 12
	// KindStreamJoin (client to server, lanes only) ties a second lane to
	// a client or bidirectional stream another lane carries: payload the
	// JoinTokenSize bytes of the token the client chose for the stream,
	// sent once on each lane (docs/design/streams.md, "Streams on
	// lanes"). A TCP connection never carries it.
	KindStreamJoin Kind = 13
)

// JoinTokenSize is the size of a join frame's token: random, so only the
// client that opened a stream can tie a lane to it.
const JoinTokenSize = 16

// CapStreams: the peer speaks HatRPC streams on this connection. A high
// bit, as CapHeaders.
const CapStreams uint64 = 1 << 17

// CapStreamWindows: with CapStreams, streams may have windows of their
// own (a stream_window hint): the client's opens carry FlagWindow, and
// the hello reply lists the server's per-function windows
// (HelloReply.FnWindows). A peer without it keeps the hello's windows.
const CapStreamWindows uint64 = 1 << 18

// CapLaneCancel, on an attach hello (with CapAttach): the server
// understands the client's cancel of the stream the lane carries on the
// lane's link (fastpath.Cancel). A server without it (an earlier
// version) takes that cancel for the client gone and closes the lane, so
// a client it did not grant the bit sends none.
const CapLaneCancel uint64 = 1 << 19

// FlagWindow, on an open frame only (with CapStreamWindows): the payload
// starts with the client's receive window for the stream, u32 messages
// and u32 bytes (before any header block), in place of the hello's.
const FlagWindow uint8 = 1 << 2

// AppendOpenWindow appends the window an open with FlagWindow starts with.
func AppendOpenWindow(b []byte, msgs, n uint32) []byte {
	b = binary.BigEndian.AppendUint32(b, msgs)
	return binary.BigEndian.AppendUint32(b, n)
}

// OpenWindow splits the window off an open's payload with FlagWindow
// (msgs and n 0 without it): p is what follows.
func OpenWindow(h *Header, p []byte) (msgs, n uint32, rest []byte, err error) {
	if h.Flags&FlagWindow == 0 {
		return 0, 0, p, nil
	}
	if len(p) < WindowPayloadSize {
		return 0, 0, nil, fmt.Errorf("%w: open of %d payload bytes with a window", ErrBadFrame, len(p))
	}
	msgs, n = binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
	if msgs == 0 || n == 0 || msgs > 1<<31-1 || n > 1<<31-1 {
		return 0, 0, nil, fmt.Errorf("%w: open with a window of %d messages, %d bytes", ErrBadFrame, msgs, n)
	}
	return msgs, n, p[WindowPayloadSize:], nil
}

// WindowPayloadSize is the payload of a window frame.
const WindowPayloadSize = 8

// MaxResetText bounds the text a reset frame carries.
const MaxResetText = 1024

// IsStreamKind reports whether k is one of the stream frame kinds.
func IsStreamKind(k Kind) bool { return k >= KindStreamOpen && k <= KindStreamReset }

// CheckStreamHeader checks the rules of a stream frame's header that
// DecodeHeader cannot know: the stream id (0 only for connection
// credit), the timeout (open frames only), the fixed payloads.
func CheckStreamHeader(h *Header) error {
	n := h.PayloadLen()
	switch {
	case h.Kind == KindStreamWindow && (h.Seqid < 0 || n != WindowPayloadSize || h.Flags != 0):
		return fmt.Errorf("%w: window frame for %d with %d payload bytes, flags %#x", ErrBadFrame, h.Seqid, n, h.Flags)
	case h.Kind != KindStreamWindow && h.Seqid <= 0:
		return fmt.Errorf("%w: stream frame of kind %d for stream %d", ErrBadFrame, h.Kind, h.Seqid)
	case h.Kind != KindStreamOpen && h.Timeout != 0:
		return fmt.Errorf("%w: timeout on stream frame of kind %d", ErrBadFrame, h.Kind)
	case (h.Kind == KindStreamOpen || h.Kind == KindStreamData) && n == 0:
		return fmt.Errorf("%w: empty stream frame of kind %d", ErrBadFrame, h.Kind)
	case h.Kind == KindStreamReset && (n < 4 || n > 4+MaxResetText || h.Flags != 0):
		return fmt.Errorf("%w: reset frame with %d payload bytes, flags %#x", ErrBadFrame, n, h.Flags)
	case h.Kind == KindStreamJoin && (n != JoinTokenSize || h.Flags != 0):
		return fmt.Errorf("%w: join frame with %d payload bytes, flags %#x", ErrBadFrame, n, h.Flags)
	}
	return nil
}

// AppendJoinFrame appends a whole join frame for stream id with token
// (JoinTokenSize bytes).
func AppendJoinFrame(b []byte, id int32, token []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, HeaderSize)...)
	b = append(b, token...)
	SealFrame(b[start:], KindStreamJoin, 0, id, 0)
	return b
}

// AppendWindowFrame appends a whole window frame granting msgs messages
// and n bytes to stream id (0: the connection).
func AppendWindowFrame(b []byte, id int32, msgs, n uint32) []byte {
	start := len(b)
	b = append(b, make([]byte, HeaderSize+WindowPayloadSize)...)
	f := b[start:]
	binary.BigEndian.PutUint32(f[HeaderSize:], msgs)
	binary.BigEndian.PutUint32(f[HeaderSize+4:], n)
	SealFrame(f, KindStreamWindow, 0, id, 0)
	return b
}

// ParseWindow reads a window frame's payload.
func ParseWindow(p []byte) (msgs, n uint32, err error) {
	if len(p) != WindowPayloadSize {
		return 0, 0, fmt.Errorf("%w: window payload of %d bytes", ErrBadFrame, len(p))
	}
	return binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:]), nil
}

// AppendResetFrame appends a whole reset frame for stream id: exception
// type typ and text (cut at MaxResetText bytes).
func AppendResetFrame(b []byte, id, typ int32, text string) []byte {
	if len(text) > MaxResetText {
		text = text[:MaxResetText]
	}
	start := len(b)
	b = append(b, make([]byte, HeaderSize+4)...)
	binary.BigEndian.PutUint32(b[start+HeaderSize:], uint32(typ))
	b = append(b, text...)
	SealFrame(b[start:], KindStreamReset, 0, id, 0)
	return b
}

// ParseReset reads a reset frame's payload.
func ParseReset(p []byte) (typ int32, text string, err error) {
	if len(p) < 4 || len(p) > 4+MaxResetText {
		return 0, "", fmt.Errorf("%w: reset payload of %d bytes", ErrBadFrame, len(p))
	}
	return int32(binary.BigEndian.Uint32(p)), string(p[4:]), nil
}

// StreamBody splits a stream frame's payload (data, open or end) into its
// header block (nil without FlagHeaders) and the rest.
func StreamBody(h *Header, p []byte) (block, rest []byte, err error) {
	if h.Flags&FlagHeaders == 0 {
		return nil, p, nil
	}
	n, err := HeaderBlockLen(p)
	if err != nil {
		return nil, nil, err
	}
	return p[4:n], p[n:], nil
}

// AppendStructRefs is AppendStruct leaving binary values of RefMin bytes
// or more out of dst, as AppendMessageRefs: send the result with
// Writer.WriteVec while the values are unchanged; refs is valid until
// the codec's next use.
func (c *Codec) AppendStructRefs(dst []byte, p proto.Protocol, body proto.Struct) (out []byte, refs []proto.Ref, err error) {
	clear(c.refs)
	c.refs = c.refs[:0]
	switch p {
	case proto.Compact:
		c.cw.SetRefs(&c.refs, RefMin)
		defer c.cw.SetRefs(nil, 0)
	case proto.Binary:
		c.bw.SetRefs(&c.refs, RefMin)
		defer c.bw.SetRefs(nil, 0)
	}
	out, err = c.AppendStruct(dst, p, body)
	if err != nil {
		clear(c.refs)
		c.refs = c.refs[:0]
	}
	return out, c.refs, err
}

// AppendStruct appends body encoded in p without a message header: a
// stream data frame's payload. A limit (SetLimit) bounds it as it bounds
// AppendMessage: past it, dst's bytes and a *proto.TooLargeError.
func (c *Codec) AppendStruct(dst []byte, p proto.Protocol, body proto.Struct) ([]byte, error) {
	limit := c.limit
	c.limit = 0
	switch p {
	case proto.Compact:
		c.cw.Reset(dst)
		c.cw.SetLimit(limit)
		err := body.EncodeCompact(c.cw)
		out := c.cw.Bytes()
		if c.cw.Over() {
			out, err = out[:len(dst)], &proto.TooLargeError{Size: c.cw.Size(), Limit: limit}
		}
		c.cw.Reset(nil)
		return out, err
	case proto.Binary:
		c.bw.Reset(dst)
		c.bw.SetLimit(limit)
		err := body.EncodeBinary(c.bw)
		out := c.bw.Bytes()
		if c.bw.Over() {
			out, err = out[:len(dst)], &proto.TooLargeError{Size: c.bw.Size(), Limit: limit}
		}
		c.bw.Reset(nil)
		return out, err
	}
	return dst, fmt.Errorf("wire: streams carry binary or compact, not %v", p)
}
