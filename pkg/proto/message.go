package proto

import (
	"encoding/binary"
	"sync"
)

// MessageHeader is the decoded header of a Thrift message.
type MessageHeader struct {
	Name  string
	Type  MessageType
	SeqID int32
}

// Encoder encodes whole messages; keep one per connection (or use
// EncodeMessage, which pools them) so encoding does not allocate.
type Encoder struct {
	bin BinaryWriter
	cmp CompactWriter
	js  *JSONCodec // made on first use
}

func (e *Encoder) json() *JSONCodec {
	if e.js == nil {
		e.js = new(JSONCodec)
	}
	return e.js
}

// Encode appends one message (header and body) to buf.
func (e *Encoder) Encode(p Protocol, buf []byte, name string, typ MessageType, seqid int32, body Struct) ([]byte, error) {
	switch p {
	case Binary:
		w := &e.bin
		w.Reset(buf)
		w.WriteMessageBegin(name, typ, seqid)
		err := body.EncodeBinary(w)
		out := w.Bytes()
		w.buf = nil
		return out, err
	case Compact:
		w := &e.cmp
		w.Reset(buf)
		w.WriteMessageBegin(name, typ, seqid)
		err := body.EncodeCompact(w)
		out := w.Bytes()
		w.buf = nil
		return out, err
	case JSON:
		return e.json().AppendMessage(buf, name, typ, seqid, body)
	}
	return buf, ErrBadProtocol
}

// EncodeFramed appends a 4-byte big-endian length followed by the message.
func (e *Encoder) EncodeFramed(p Protocol, buf []byte, name string, typ MessageType, seqid int32, body Struct) ([]byte, error) {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	out, err := e.Encode(p, buf, name, typ, seqid, body)
	if err != nil {
		return out[:start], err
	}
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out, nil
}

var encoderPool = sync.Pool{New: func() any { return new(Encoder) }}

// EncodeMessage appends one message (header and body) to buf using protocol p.
func EncodeMessage(p Protocol, buf []byte, name string, typ MessageType, seqid int32, body Struct) ([]byte, error) {
	e := encoderPool.Get().(*Encoder)
	out, err := e.Encode(p, buf, name, typ, seqid, body)
	encoderPool.Put(e)
	return out, err
}

// EncodeFramedMessage is EncodeMessage with a 4-byte length prefix.
func EncodeFramedMessage(p Protocol, buf []byte, name string, typ MessageType, seqid int32, body Struct) ([]byte, error) {
	e := encoderPool.Get().(*Encoder)
	out, err := e.EncodeFramed(p, buf, name, typ, seqid, body)
	encoderPool.Put(e)
	return out, err
}

// Marshal appends the encoding of a bare struct (no message header).
func Marshal(p Protocol, buf []byte, s Struct) ([]byte, error) {
	e := encoderPool.Get().(*Encoder)
	defer encoderPool.Put(e)
	switch p {
	case Binary:
		e.bin.Reset(buf)
		err := s.EncodeBinary(&e.bin)
		out := e.bin.buf
		e.bin.buf = nil
		return out, err
	case Compact:
		e.cmp.Reset(buf)
		err := s.EncodeCompact(&e.cmp)
		out := e.cmp.buf
		e.cmp.buf = nil
		return out, err
	case JSON:
		return e.json().AppendStruct(buf, s)
	}
	return buf, ErrBadProtocol
}

// Decoder decodes whole messages: Begin reads the header, ReadBody the
// payload, with one protocol switch per message. Keep one per connection.
// A JSON message is transcoded whole by Begin (see JSONCodec).
type Decoder struct {
	// Alias and UnsafeStrings are passed on to the readers (see
	// BinaryReader); JSON ignores them.
	Alias         bool
	UnsafeStrings bool
	p             Protocol
	lim           *Limits
	bin           BinaryReader
	cmp           CompactReader
	js            *JSONCodec // made on first use
	// lastName saves the name allocation when consecutive messages call the
	// same method, the common case on a connection.
	lastName string
}

// NewDecoder returns a decoder; nil lim means DefaultLimits.
func NewDecoder(lim *Limits) *Decoder {
	d := &Decoder{lim: limitsOrDefault(lim)}
	d.bin.lim, d.cmp.lim = d.lim, d.lim
	return d
}

// Begin starts decoding msg and returns its header.
func (d *Decoder) Begin(p Protocol, msg []byte) (MessageHeader, error) {
	if d.lim == nil {
		d.lim = &DefaultLimits
		d.bin.lim, d.cmp.lim = d.lim, d.lim
	}
	d.p = p
	if len(msg) > d.lim.MaxMessageSize {
		d.p = 0
		return MessageHeader{}, decodeErr(ErrSizeLimit, 0, "message size")
	}
	var h MessageHeader
	var name []byte
	var err error
	switch p {
	case Binary:
		d.bin.Reset(msg)
		d.bin.Alias, d.bin.UnsafeStrings = d.Alias, d.UnsafeStrings
		name, h.Type, h.SeqID, err = d.bin.messageHeader()
	case Compact:
		d.cmp.Reset(msg)
		d.cmp.Alias, d.cmp.UnsafeStrings = d.Alias, d.UnsafeStrings
		name, h.Type, h.SeqID, err = d.cmp.messageHeader()
	case JSON:
		if d.js == nil {
			d.js = new(JSONCodec)
		}
		name, h.Type, h.SeqID, err = d.js.begin(msg, d.lim)
	default:
		return h, ErrBadProtocol
	}
	if err != nil {
		return MessageHeader{}, err
	}
	if string(name) != d.lastName {
		d.lastName = string(name)
	}
	h.Name = d.lastName
	return h, nil
}

// ReadBody decodes the message body into s.
func (d *Decoder) ReadBody(s Struct) error {
	switch d.p {
	case Binary:
		return s.DecodeBinary(&d.bin)
	case Compact:
		return s.DecodeCompact(&d.cmp)
	case JSON:
		return s.DecodeBinary(&d.js.r)
	}
	return ErrBadProtocol
}

// SkipBody consumes the message body without decoding it (e.g. for an
// unknown method whose reply is an exception).
func (d *Decoder) SkipBody() error {
	switch d.p {
	case Binary:
		return d.bin.Skip(STRUCT)
	case Compact:
		return d.cmp.Skip(STRUCT)
	case JSON:
		return d.js.r.Skip(STRUCT)
	}
	return ErrBadProtocol
}

// Pos returns the bytes consumed of the current message (JSON: all of
// it, from Begin on).
func (d *Decoder) Pos() int {
	switch d.p {
	case Compact:
		return d.cmp.Pos()
	case JSON:
		return d.js.end
	}
	return d.bin.Pos()
}

// DecodeMessageHeader decodes the header of msg and returns it together
// with the offset at which the body starts.
func DecodeMessageHeader(p Protocol, msg []byte, lim *Limits) (MessageHeader, int, error) {
	var h MessageHeader
	var err error
	switch p {
	case Binary:
		r := BinaryReader{buf: msg, lim: limitsOrDefault(lim)}
		h.Name, h.Type, h.SeqID, err = r.ReadMessageBegin()
		return h, r.pos, err
	case Compact:
		r := CompactReader{buf: msg, lim: limitsOrDefault(lim)}
		h.Name, h.Type, h.SeqID, err = r.ReadMessageBegin()
		return h, r.pos, err
	case JSON:
		if len(msg) > limitsOrDefault(lim).MaxMessageSize {
			return h, 0, decodeErr(ErrSizeLimit, 0, "message size")
		}
		name, typ, seq, body, err := JSONMessageHeader(msg)
		if err != nil {
			return h, 0, err
		}
		return MessageHeader{Name: string(name), Type: typ, SeqID: seq}, body, nil
	}
	return h, 0, ErrBadProtocol
}

// DecodeMessage decodes a whole message into body and returns its header.
// Binary values are copied (no aliasing of msg).
func DecodeMessage(p Protocol, msg []byte, lim *Limits, body Struct) (MessageHeader, error) {
	d := NewDecoder(lim)
	h, err := d.Begin(p, msg)
	if err != nil {
		return h, err
	}
	return h, d.ReadBody(body)
}

// Unmarshal decodes a bare struct (no message header) from data.
func Unmarshal(p Protocol, data []byte, lim *Limits, s Struct) error {
	switch p {
	case Binary:
		return s.DecodeBinary(NewBinaryReader(data, lim))
	case Compact:
		return s.DecodeCompact(NewCompactReader(data, lim))
	case JSON:
		return new(JSONCodec).Unmarshal(data, lim, s)
	}
	return ErrBadProtocol
}

// AppendFrame appends msg to buf behind a 4-byte big-endian length (the
// framing of Apache Thrift's TFramedTransport).
func AppendFrame(buf, msg []byte) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(msg)))
	return append(buf, msg...)
}
