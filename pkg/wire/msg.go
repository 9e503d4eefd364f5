package wire

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// MsgHeader is the Thrift message header at the start of a payload.
type MsgHeader struct {
	Name  []byte // aliases the message buffer
	Type  proto.MessageType
	Seqid int32
	Body  int // offset of the body struct
}

// ParseMsgHeader reads the message header without allocating, so dispatch
// (method lookup by name, reply matching by seqid) costs no garbage (a
// JSON name with escapes is the exception: Name is then a copy).
func ParseMsgHeader(p proto.Protocol, msg []byte) (MsgHeader, error) {
	var h MsgHeader
	if p == proto.JSON {
		return parseJSONHeader(msg)
	}
	if p == proto.Compact {
		if len(msg) < 2 {
			return h, fmt.Errorf("%w: message header", proto.ErrTruncated)
		}
		if msg[0] != compactMagic || msg[1]&0x1f != 1 {
			return h, fmt.Errorf("%w: compact header %x", proto.ErrBadVersion, msg[:2])
		}
		h.Type = proto.MessageType(msg[1] >> 5)
		seq, n := binary.Uvarint(msg[2:])
		if n <= 0 || seq > 0xffffffff {
			return h, fmt.Errorf("%w: seqid varint", proto.ErrInvalidData)
		}
		h.Seqid = int32(uint32(seq))
		off := 2 + n
		l, n := binary.Uvarint(msg[off:])
		if n <= 0 {
			return h, fmt.Errorf("%w: name length", proto.ErrInvalidData)
		}
		off += n
		if l > uint64(len(msg)-off) {
			return h, fmt.Errorf("%w: name", proto.ErrTruncated)
		}
		h.Name = msg[off : off+int(l)]
		h.Body = off + int(l)
		return h, nil
	}
	if len(msg) < 8 {
		return h, fmt.Errorf("%w: message header", proto.ErrTruncated)
	}
	v := binary.BigEndian.Uint32(msg)
	if v&0xffff0000 != 0x80010000 {
		return h, fmt.Errorf("%w: binary header %08x", proto.ErrBadVersion, v)
	}
	h.Type = proto.MessageType(v & 0xff)
	l := int64(int32(binary.BigEndian.Uint32(msg[4:])))
	if l < 0 {
		return h, fmt.Errorf("%w: name length %d", proto.ErrNegativeSize, l)
	}
	if l+4 > int64(len(msg)-8) {
		return h, fmt.Errorf("%w: name", proto.ErrTruncated)
	}
	h.Name = msg[8 : 8+l]
	h.Seqid = int32(binary.BigEndian.Uint32(msg[8+l:]))
	h.Body = int(8 + l + 4)
	return h, nil
}

// Codec bundles reusable writers and readers for every protocol; get one
// from GetCodec so the hot path does not allocate them per call.
type Codec struct {
	bw *proto.BinaryWriter
	cw *proto.CompactWriter
	br *proto.BinaryReader
	cr *proto.CompactReader

	refs []proto.Ref // AppendMessageRefs' result, reused

	limit int // SetLimit's, for the next message

	js *proto.JSONCodec // made on first use: JSON connections only

	// Spare is a small message buffer that travels with the codec: an
	// owner that encodes a message a use takes it (Get) and gives it
	// back (Keep) instead of the pool's.
	Spare Spare
}

var codecPool = sync.Pool{New: func() any {
	return &Codec{
		bw: proto.NewBinaryWriter(nil), cw: proto.NewCompactWriter(nil),
		br: proto.NewBinaryReader(nil, nil), cr: proto.NewCompactReader(nil, nil),
	}
}}

// GetCodec returns a pooled codec; release it with PutCodec.
func GetCodec() *Codec { return codecPool.Get().(*Codec) }

// PutCodec returns c to the pool, dropping its buffer references.
func PutCodec(c *Codec) {
	c.Reset()
	codecPool.Put(c)
}

// Reset drops c's buffer references, as PutCodec does, for an owner that
// keeps c for its next message instead of pooling it. The writers hold
// none: every encode drops its buffer as it ends (AppendMessage,
// AppendStruct), so resetting them again cost each kept codec's call ~35
// instructions for nothing (TestCodecResetKeepsNothing).
func (c *Codec) Reset() {
	c.br.Reset(nil)
	c.cr.Reset(nil)
	clear(c.refs) // must not pin the values of the last message
	c.refs = c.refs[:0]
	if c.js != nil {
		c.js.Release()
	}
	c.limit = 0
}

// SetLimit bounds the next AppendMessage, AppendMessageRefs, AppendStruct
// or AppendStructRefs: a message (refs included) that would take more
// than n bytes is not kept past about n bytes of buffer (proto's writers
// count the rest, enclimit.go), and the call returns dst's bytes (in a
// buffer that may have grown) and a *proto.TooLargeError with its whole
// size. n <= 0: no limit. JSON is bounded too (proto.JSONCodec.SetLimit),
// but past the limit its error's size is a lower bound (More): the limit.
func (c *Codec) SetLimit(n int) { c.limit = n }

// AppendMessage appends a whole message (header and body struct) to dst.
func (c *Codec) AppendMessage(dst []byte, p proto.Protocol, name string, typ proto.MessageType, seqid int32, body proto.Struct) ([]byte, error) {
	limit := c.limit
	c.limit = 0
	switch p {
	case proto.JSON:
		js := c.json()
		js.SetLimit(limit)
		return js.AppendMessage(dst, name, typ, seqid, body)
	case proto.Compact:
		c.cw.Reset(dst)
		c.cw.SetLimit(limit)
		c.cw.WriteMessageBegin(name, typ, seqid)
		err := body.EncodeCompact(c.cw)
		out := c.cw.Bytes()
		if c.cw.Over() {
			out, err = out[:len(dst)], &proto.TooLargeError{Size: c.cw.Size(), Limit: limit}
		}
		c.cw.Reset(nil)
		return out, err
	}
	c.bw.Reset(dst)
	c.bw.SetLimit(limit)
	c.bw.WriteMessageBegin(name, typ, seqid)
	err := body.EncodeBinary(c.bw)
	out := c.bw.Bytes()
	if c.bw.Over() {
		out, err = out[:len(dst)], &proto.TooLargeError{Size: c.bw.Size(), Limit: limit}
	}
	c.bw.Reset(nil)
	return out, err
}

// RefMin is the binary value size from which AppendMessageRefs leaves a
// value out of the buffer: from there a vectored write costs less than
// copying the value into the frame.
const RefMin = 32 << 10

// AppendMessageRefs is AppendMessage that leaves binary values of RefMin
// bytes or more out of dst and returns them as refs (see proto.Ref); refs
// is owned by c and valid until its next use or PutCodec. Send the result
// with Writer.WriteVec while the values are unchanged. JSON (base64)
// leaves nothing out.
func (c *Codec) AppendMessageRefs(dst []byte, p proto.Protocol, name string, typ proto.MessageType, seqid int32, body proto.Struct) (out []byte, refs []proto.Ref, err error) {
	clear(c.refs)
	c.refs = c.refs[:0]
	switch p {
	case proto.JSON:
		out, err = c.AppendMessage(dst, p, name, typ, seqid, body)
		return out, nil, err
	case proto.Compact:
		c.cw.SetRefs(&c.refs, RefMin)
		defer c.cw.SetRefs(nil, 0)
	default:
		c.bw.SetRefs(&c.refs, RefMin)
		defer c.bw.SetRefs(nil, 0)
	}
	out, err = c.AppendMessage(dst, p, name, typ, seqid, body)
	if err != nil {
		clear(c.refs)
		c.refs = c.refs[:0]
	}
	return out, c.refs, err
}

// Decode decodes body (a struct encoded in p) into s with limits lim.
func (c *Codec) Decode(p proto.Protocol, body []byte, lim *proto.Limits, s proto.Struct) error {
	return c.decode(p, body, lim, s, false)
}

// decode sets the reader's Alias on every decode rather than resetting it
// after one (a deferred reset cost ~10 ns of a 64 B lane call), so no
// decode, even one a panic cut short, leaves it for the next.
func (c *Codec) decode(p proto.Protocol, body []byte, lim *proto.Limits, s proto.Struct, alias bool) error {
	switch p {
	case proto.JSON: // values are copies: alias does not apply
		return c.json().Unmarshal(body, lim, s)
	case proto.Compact:
		c.cr.SetLimits(lim)
		c.cr.Reset(body)
		c.cr.Alias = alias
		return s.DecodeCompact(c.cr)
	}
	c.br.SetLimits(lim)
	c.br.Reset(body)
	c.br.Alias = alias
	return s.DecodeBinary(c.br)
}

// bufPool holds message buffers. Buffers that grew huge are dropped rather
// than pooled so one large message does not pin memory forever.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledBuf = 1 << 20

// GetBuf returns an empty pooled buffer.
func GetBuf() *[]byte { return bufPool.Get().(*[]byte) }

// PutBuf returns b to the pool.
func PutBuf(b *[]byte) {
	if b == nil || cap(*b) > maxPooledBuf {
		return
	}
	if cap(*b) >= largeMin {
		putLarge(*b) // see bufpool.go
		*b = nil
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}
