package proto

import (
	"math"
	"strconv"
)

// JSONCodec encodes and decodes Apache's TJSONProtocol through the binary
// protocol, so a Struct needs only its binary methods. Encoding: the
// Struct writes itself in binary, its binary values kept apart (SetRefs),
// and that is transcoded to JSON, those values in base64, the others as
// JSON strings. Decoding: the JSON is transcoded to binary (a JSON message
// says the type of every value) and the Struct reads that with a reader
// that decodes a binary value's base64 when it asks for one.
//
// Decoded binary values and strings are always copies (Alias and
// UnsafeStrings do not apply). The zero value is ready to use; it keeps its
// buffers between uses, so keep one per goroutine.
type JSONCodec struct {
	w     BinaryWriter
	r     BinaryReader
	bin   []byte // the binary form, either way
	refs  []Ref
	end   int // JSON bytes the last Begin read
	limit int // SetLimit's, for the next encoding
}

// jsonKeep bounds the binary buffer a JSONCodec keeps between uses.
const jsonKeep = 1 << 20

// encodeLimits bound only the nesting the transcoder recurses through
// when it writes: values our own writer produced.
var encodeLimits = Limits{MaxMessageSize: math.MaxInt, MaxDepth: 1 << 10, MaxStringLength: math.MaxInt32, MaxContainerSize: math.MaxInt32}

func (c *JSONCodec) scratch() []byte {
	if cap(c.bin) > jsonKeep {
		c.bin = nil
	}
	return c.bin[:0]
}

// Release drops the codec's references to the last message and a large
// buffer, before the codec is pooled.
func (c *JSONCodec) Release() {
	c.r.Reset(nil)
	if cap(c.bin) > jsonKeep {
		c.bin = nil
	}
	c.limit = 0
}

// Bounded JSON encodings.
//
// A JSON message is built twice over: the Struct writes its binary
// form, which is transcoded. With a limit (SetLimit, the server's room
// for a reply) neither form is built past what the limit needs (issue
// 43): the transcoder stops once the JSON passes the limit (the error
// then says "more than" the limit: the exact size past it would take
// reading every string for its escapes), and the binary form is itself
// bounded, as binary replies are (enclimit.go). A JSON encoding takes at
// least a quarter of its binary form's bytes (an i64 list element, 8
// bytes, is at least ",0"; everything else takes more), so the binary
// form is first written with the limit as its own: within it, it is
// transcoded; past four times the limit the JSON cannot fit and nothing
// more is built; between the two (lists of numbers, JSON smaller than
// binary) the binary form, whose exact size the first pass counted, is
// written again into a buffer of that size and transcoded.

// jsonBinaryRatio bounds a binary form's size over its JSON's (above).
const jsonBinaryRatio = 4

// SetLimit bounds the next AppendMessage or AppendStruct to n bytes of
// JSON (n <= 0: no limit): past them the call returns dst unchanged and
// a *TooLargeError with More set, having built at most about n bytes of
// JSON and jsonBinaryRatio*n of binary form (above).
func (c *JSONCodec) SetLimit(n int) { c.limit = n }

func (c *JSONCodec) startWrite(limit, size int) *BinaryWriter {
	buf := c.scratch()
	if size > cap(buf) {
		buf = make([]byte, 0, size)
	}
	c.w.Reset(buf)
	c.w.SetLimit(limit)
	c.w.SetRefs(&c.refs, 1)
	c.w.json = true
	return &c.w
}

// jsonHead is the message header an encoding begins with, if message.
type jsonHead struct {
	message bool
	name    string
	typ     MessageType
	seqid   int32
}

// encode writes body (after h's message header) and transcodes it to JSON
// appended to dst, within SetLimit's limit.
func (c *JSONCodec) encode(dst []byte, body Struct, h *jsonHead) ([]byte, error) {
	limit := c.limit
	c.limit = 0
	binLimit, size := limit, 0
	for {
		w := c.startWrite(binLimit, size)
		if h.message {
			w.WriteMessageBegin(h.name, h.typ, h.seqid)
		}
		err := body.EncodeBinary(w)
		if err != nil || !w.Over() {
			return c.finishWrite(dst, err, h.message, limit)
		}
		size = w.Size()
		c.endWrite()
		if binLimit > limit || size > jsonBinaryRatio*limit {
			// Over four times the limit, or (a result that changed
			// between the passes) over its own size.
			return dst, &TooLargeError{Size: limit, Limit: limit, More: true}
		}
		binLimit = size
	}
}

// endWrite keeps the writer's buffer for the next use and forgets the
// values it referred to.
func (c *JSONCodec) endWrite() {
	c.bin = c.w.Bytes()[:0]
	c.w = BinaryWriter{}
	clear(c.refs) // the values are the caller's
	c.refs = c.refs[:0]
}

// finishWrite transcodes what the Struct wrote, within limit bytes
// (none if <= 0); message: it began with a message header.
func (c *JSONCodec) finishWrite(dst []byte, err error, message bool, limit int) ([]byte, error) {
	defer c.endWrite()
	if err != nil {
		return dst, err
	}
	bin := c.w.Bytes()
	x := b2j{src: bin, refs: c.refs, out: dst, lim: &encodeLimits, max: math.MaxInt}
	if limit > 0 {
		x.max = len(dst) + limit
	}
	if message {
		err = x.message()
	} else {
		err = x.value(STRUCT, false)
	}
	switch {
	case err == errJSONOver || err == nil && len(x.out) > x.max:
		return dst, &TooLargeError{Size: limit, Limit: limit, More: true}
	case err != nil:
		return dst, err
	case x.pos != len(bin) || x.ri != len(c.refs):
		return dst, decodeErr(ErrInvalidData, x.pos, "bytes after the struct")
	}
	return x.out, nil
}

// AppendMessage appends one message, header and body, in TJSONProtocol.
func (c *JSONCodec) AppendMessage(dst []byte, name string, typ MessageType, seqid int32, body Struct) ([]byte, error) {
	return c.encode(dst, body, &jsonHead{true, name, typ, seqid})
}

// AppendStruct appends a bare struct in TJSONProtocol.
func (c *JSONCodec) AppendStruct(dst []byte, s Struct) ([]byte, error) {
	return c.encode(dst, s, &jsonHead{})
}

func (c *JSONCodec) startRead(lim *Limits) {
	c.r.lim = lim
	c.r.Reset(c.bin)
	c.r.Alias, c.r.UnsafeStrings, c.r.base64 = false, false, true
}

// Begin transcodes the whole message msg and returns its header; Reader
// then reads the body.
func (c *JSONCodec) Begin(msg []byte, lim *Limits) (MessageHeader, error) {
	name, typ, seqid, err := c.begin(msg, limitsOrDefault(lim))
	return MessageHeader{Name: string(name), Type: typ, SeqID: seqid}, err
}

func (c *JSONCodec) begin(msg []byte, lim *Limits) (name []byte, typ MessageType, seqid int32, err error) {
	c.r.Reset(nil)
	if len(msg) > lim.MaxMessageSize {
		return nil, 0, 0, decodeErr(ErrSizeLimit, 0, "message size")
	}
	x := j2b{in: msg, out: c.scratch(), lim: lim}
	err = x.message()
	c.bin, c.end = x.out, x.pos
	if err != nil {
		return nil, 0, 0, err
	}
	c.startRead(lim)
	return c.r.messageHeader()
}

// Reader reads the body of the message Begin transcoded, or nothing
// after a failed Begin.
func (c *JSONCodec) Reader() *BinaryReader { return &c.r }

// Unmarshal decodes a bare struct (or a message body: what follows the
// struct is not read) from data.
func (c *JSONCodec) Unmarshal(data []byte, lim *Limits, s Struct) error {
	lim = limitsOrDefault(lim)
	c.r.Reset(nil)
	if len(data) > lim.MaxMessageSize {
		return decodeErr(ErrSizeLimit, 0, "message size")
	}
	x := j2b{in: data, out: c.scratch(), lim: lim}
	err := x.value(STRUCT)
	c.bin = x.out
	if err != nil {
		return err
	}
	c.startRead(lim)
	return s.DecodeBinary(&c.r)
}

// JSONMessageHeader reads the header of a TJSONProtocol message,
// [1,"name",type,seqid,{body}], without transcoding the body. name
// aliases msg unless the name holds escapes; body is the offset of the
// body struct.
func JSONMessageHeader(msg []byte) (name []byte, typ MessageType, seqid int32, body int, err error) {
	x := j2b{in: msg, lim: &DefaultLimits}
	if err = x.expect('['); err != nil {
		return
	}
	at := x.pos
	v, err := x.int(32)
	if err != nil {
		return
	}
	if v != 1 {
		return nil, 0, 0, 0, decodeErr(ErrBadVersion, at, "TJSONProtocol version "+strconv.FormatInt(v, 10))
	}
	if err = x.expect(','); err != nil {
		return
	}
	c, err := x.peek()
	if err != nil {
		return
	}
	end := x.pos + 1
	for end < len(msg) && msg[end] != '"' && msg[end] != '\\' && msg[end] >= 0x20 {
		end++
	}
	if c == '"' && end < len(msg) && msg[end] == '"' { // no escapes: the text is the name
		name = msg[x.pos+1 : end : end]
		x.pos = end + 1
	} else if _, err = x.str(x.lim.MaxStringLength); err != nil {
		return
	} else {
		name = x.out
	}
	if err = x.expect(','); err != nil {
		return
	}
	at = x.pos
	t, err := x.int(8)
	if err != nil {
		return
	}
	if t < 0 {
		return nil, 0, 0, 0, decodeErr(ErrJSONSyntax, at, "negative message type")
	}
	if err = x.expect(','); err != nil {
		return
	}
	s, err := x.int(32)
	if err != nil {
		return
	}
	if err = x.expect(','); err != nil {
		return
	}
	if c, err = x.peek(); err != nil {
		return
	}
	if c != '{' {
		return nil, 0, 0, 0, x.syntax("want the body struct")
	}
	return name, MessageType(t), int32(s), x.pos, nil
}
