package proto

import (
	"encoding/binary"
	"math"
	"unsafe"
)

const binaryVersion1 = 0x80010000

// BinaryWriter appends the Thrift binary protocol to a caller-owned buffer.
// It never fails: the buffer simply grows, up to its limit if it has one
// (SetLimit). Make one with NewBinaryWriter, or Reset it before writing:
// a zero BinaryWriter has a limit of 0.
type BinaryWriter struct {
	buf    []byte
	refs   *[]Ref // see SetRefs
	refMin int
	json   bool // see SplitsBinary
	encLimit
}

// NewBinaryWriter returns a writer appending to buf.
func NewBinaryWriter(buf []byte) *BinaryWriter {
	w := &BinaryWriter{buf: buf}
	w.reset(len(buf))
	return w
}

// Reset makes the writer append to buf, without a limit (SetLimit).
func (w *BinaryWriter) Reset(buf []byte) {
	w.buf = buf
	w.reset(len(buf))
}

// Bytes returns the buffer with everything written so far.
func (w *BinaryWriter) Bytes() []byte { return w.buf }

// Len returns the current buffer length.
func (w *BinaryWriter) Len() int { return len(w.buf) }

// Grow makes room for n more bytes so later appends do not reallocate;
// not past the limit (SetLimit).
func (w *BinaryWriter) Grow(n int) {
	if cap(w.buf)-len(w.buf) < n && len(w.buf)+n <= w.lim {
		nb := make([]byte, len(w.buf), 2*cap(w.buf)+n)
		copy(nb, w.buf)
		w.buf = nb
	}
}

// SplitsBinary reports whether the writer must see every binary value
// through WriteBinary or WriteBinaries: it writes for TJSONProtocol, where
// a binary value (base64) differs from a string. Code that splices
// encoded bytes into the buffer must then write value by value.
func (w *BinaryWriter) SplitsBinary() bool { return w.json }

// WriteMessageBegin writes a strict (versioned) message header, as Apache
// does by default.
func (w *BinaryWriter) WriteMessageBegin(name string, typ MessageType, seqid int32) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, binaryVersion1|uint32(typ))
	// Not WriteString: a header within the limit or not is checked at the
	// body's end, and written inline it stays small enough to inline.
	w.buf = append(binary.BigEndian.AppendUint32(w.buf, uint32(len(name))), name...)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(seqid))
}

// WriteStructBegin writes nothing in the binary protocol.
func (w *BinaryWriter) WriteStructBegin() {}

// WriteStructEnd writes nothing; the struct is closed by WriteFieldStop.
func (w *BinaryWriter) WriteStructEnd() {}

// WriteFieldBegin writes a field header.
func (w *BinaryWriter) WriteFieldBegin(t Type, id int16) {
	w.buf = append(w.buf, byte(t), byte(uint16(id)>>8), byte(id))
}

// WriteFieldStop ends a struct.
func (w *BinaryWriter) WriteFieldStop() {
	w.buf = append(w.buf, byte(STOP))
	w.check(&w.buf)
}

// WriteBool writes a bool as one byte.
func (w *BinaryWriter) WriteBool(v bool) {
	var b byte
	if v {
		b = 1
	}
	w.buf = append(w.buf, b)
	w.drop(&w.buf)
}

// WriteI8 writes a byte.
func (w *BinaryWriter) WriteI8(v int8) {
	w.buf = append(w.buf, byte(v))
	w.drop(&w.buf)
}

// WriteI16 writes a big-endian i16.
func (w *BinaryWriter) WriteI16(v int16) {
	w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v))
	w.drop(&w.buf)
}

// WriteI32 writes a big-endian i32.
func (w *BinaryWriter) WriteI32(v int32) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v))
	w.drop(&w.buf)
}

// WriteI64 writes a big-endian i64.
func (w *BinaryWriter) WriteI64(v int64) {
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v))
	w.drop(&w.buf)
}

// WriteDouble writes an IEEE 754 double, big-endian.
func (w *BinaryWriter) WriteDouble(v float64) {
	w.buf = binary.BigEndian.AppendUint64(w.buf, math.Float64bits(v))
	w.drop(&w.buf)
}

// WriteString writes a length-prefixed string.
func (w *BinaryWriter) WriteString(v string) {
	b, k := w.fitPrefixed(binary.BigEndian.AppendUint32(w.buf, uint32(len(v))), len(v))
	w.buf = append(b, v[:k]...)
}

// WriteBinary writes length-prefixed bytes.
func (w *BinaryWriter) WriteBinary(v []byte) {
	b := binary.BigEndian.AppendUint32(w.buf, uint32(len(v)))
	if w.refs != nil && len(v) >= w.refMin {
		w.buf = b
		w.noteRef(w.refs, len(b), v)
		w.drop(&w.buf)
		return
	}
	w.buf = append(b, v[:w.fit(len(b), len(v))]...)
	w.drop(&w.buf)
}

// WriteUUID writes 16 raw bytes.
func (w *BinaryWriter) WriteUUID(v [16]byte) {
	w.buf = append(w.buf, v[:]...)
	w.drop(&w.buf)
}

// WriteListBegin writes a list header.
func (w *BinaryWriter) WriteListBegin(elem Type, n int) {
	w.buf = append(w.buf, byte(elem))
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(n))
	w.drop(&w.buf)
}

// WriteSetBegin writes a set header (same layout as a list).
func (w *BinaryWriter) WriteSetBegin(elem Type, n int) { w.WriteListBegin(elem, n) }

// WriteMapBegin writes a map header.
func (w *BinaryWriter) WriteMapBegin(key, val Type, n int) {
	w.buf = append(w.buf, byte(key), byte(val))
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(n))
	w.drop(&w.buf)
}

// BinaryReader decodes the Thrift binary protocol from a byte slice with
// bounds and limit checks.
type BinaryReader struct {
	buf   []byte
	pos   int
	depth int
	lim   *Limits
	// Alias makes ReadBinary return sub-slices of the input instead of
	// copies; the caller must then keep the input alive and unmodified.
	Alias bool
	// UnsafeStrings makes ReadString return strings that share the input's
	// memory (no copy, no allocation). Only for inputs that are never
	// modified or reused while any decoded string is alive: a string that
	// changes under its holder breaks map keys and every Go invariant.
	UnsafeStrings bool
	strs          strArena // backs short copied strings
	// base64: the input is a JSON message's binary form (JSONCodec),
	// whose binary values are still base64 text; Alias is then off.
	base64 bool
}

// NewBinaryReader returns a reader over buf; a nil lim means DefaultLimits.
func NewBinaryReader(buf []byte, lim *Limits) *BinaryReader {
	return &BinaryReader{buf: buf, lim: limitsOrDefault(lim)}
}

// Reset restarts the reader on buf, keeping limits and Alias.
func (r *BinaryReader) Reset(buf []byte) {
	r.buf, r.pos, r.depth = buf, 0, 0
	if r.lim == nil {
		r.lim = &DefaultLimits
	}
}

// SetLimits replaces the limits (nil means DefaultLimits).
func (r *BinaryReader) SetLimits(lim *Limits) { r.lim = limitsOrDefault(lim) }

// Pos returns the number of bytes consumed.
func (r *BinaryReader) Pos() int { return r.pos }

// Remaining returns the number of unread bytes.
func (r *BinaryReader) Remaining() int { return len(r.buf) - r.pos }

func (r *BinaryReader) truncated() error { return decodeErr(ErrTruncated, r.pos, "") }

// ReadMessageBegin reads a strict or non-strict message header.
func (r *BinaryReader) ReadMessageBegin() (name string, typ MessageType, seqid int32, err error) {
	nb, typ, seqid, err := r.messageHeader()
	return string(nb), typ, seqid, err
}

// messageHeader reads a message header; name aliases the input.
func (r *BinaryReader) messageHeader() (name []byte, typ MessageType, seqid int32, err error) {
	start := r.pos
	v, err := r.ReadI32()
	if err != nil {
		return nil, 0, 0, err
	}
	if v < 0 {
		if uint32(v)&0xffff0000 != binaryVersion1 {
			return nil, 0, 0, decodeErr(ErrBadVersion, start, "")
		}
		typ = MessageType(v & 0xff)
		if name, err = r.rawBytes(); err != nil {
			return nil, 0, 0, err
		}
	} else {
		// Old non-strict header: the i32 was the name length.
		r.pos = start
		if name, err = r.rawBytes(); err != nil {
			return nil, 0, 0, err
		}
		b, err := r.ReadI8()
		if err != nil {
			return nil, 0, 0, err
		}
		typ = MessageType(b)
	}
	if seqid, err = r.ReadI32(); err != nil {
		return nil, 0, 0, err
	}
	return name, typ, seqid, nil
}

// rawBytes reads a length-prefixed value as a sub-slice of the input.
func (r *BinaryReader) rawBytes() ([]byte, error) {
	n, err := r.readLen()
	if err != nil {
		return nil, err
	}
	b := r.buf[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return b, nil
}

// ReadStructBegin accounts for nesting depth.
func (r *BinaryReader) ReadStructBegin() error {
	r.depth++
	if r.depth > r.lim.MaxDepth {
		return decodeErr(ErrDepthLimit, r.pos, "")
	}
	return nil
}

// ReadStructEnd closes the struct opened by ReadStructBegin.
func (r *BinaryReader) ReadStructEnd() error {
	r.depth--
	return nil
}

// ReadFieldBegin reads a field header; t == STOP ends the struct. Generated
// decoders call it once per field, so the common case (a value field) gets
// one bounds check and a table lookup; STOP and errors take the slow path.
func (r *BinaryReader) ReadFieldBegin() (t Type, id int16, err error) {
	if p := r.pos; p >= 0 && p+3 <= len(r.buf) {
		b := r.buf[p : p+3]
		if t = Type(b[0]); validType[t] {
			r.pos = p + 3
			return t, int16(uint16(b[1])<<8 | uint16(b[2])), nil
		}
	}
	return r.fieldBeginSlow()
}

// fieldBeginSlow handles STOP, bad types and input ending mid-header.
func (r *BinaryReader) fieldBeginSlow() (t Type, id int16, err error) {
	p := r.pos
	if p >= len(r.buf) {
		return 0, 0, r.truncated()
	}
	t = Type(r.buf[p])
	if t == STOP {
		r.pos = p + 1
		return STOP, 0, nil
	}
	if p+3 > len(r.buf) {
		return 0, 0, r.truncated()
	}
	if !t.Valid() {
		return 0, 0, decodeErr(ErrBadType, p, t.String())
	}
	id = int16(binary.BigEndian.Uint16(r.buf[p+1:]))
	r.pos = p + 3
	return t, id, nil
}

// ReadBool reads a one-byte bool (any non-zero byte is true, as in Apache).
func (r *BinaryReader) ReadBool() (bool, error) {
	if r.pos >= len(r.buf) {
		return false, r.truncated()
	}
	b := r.buf[r.pos]
	r.pos++
	return b != 0, nil
}

// ReadI8 reads a byte.
func (r *BinaryReader) ReadI8() (int8, error) {
	if r.pos >= len(r.buf) {
		return 0, r.truncated()
	}
	b := r.buf[r.pos]
	r.pos++
	return int8(b), nil
}

// ReadI16 reads a big-endian i16.
func (r *BinaryReader) ReadI16() (int16, error) {
	if p := r.pos; p >= 0 && p+2 <= len(r.buf) {
		v := binary.BigEndian.Uint16(r.buf[p : p+2])
		r.pos = p + 2
		return int16(v), nil
	}
	return 0, r.truncated()
}

// ReadI32 reads a big-endian i32.
func (r *BinaryReader) ReadI32() (int32, error) {
	if p := r.pos; p >= 0 && p+4 <= len(r.buf) {
		v := binary.BigEndian.Uint32(r.buf[p : p+4])
		r.pos = p + 4
		return int32(v), nil
	}
	return 0, r.truncated()
}

// ReadI64 reads a big-endian i64.
func (r *BinaryReader) ReadI64() (int64, error) {
	if p := r.pos; p >= 0 && p+8 <= len(r.buf) {
		v := binary.BigEndian.Uint64(r.buf[p : p+8])
		r.pos = p + 8
		return int64(v), nil
	}
	return 0, r.truncated()
}

// ReadDouble reads a big-endian IEEE 754 double.
func (r *BinaryReader) ReadDouble() (float64, error) {
	v, err := r.ReadI64()
	return math.Float64frombits(uint64(v)), err
}

// readLen reads and validates a string/binary length prefix.
func (r *BinaryReader) readLen() (int, error) {
	if len(r.buf)-r.pos < 4 {
		return 0, r.truncated()
	}
	n := int32(binary.BigEndian.Uint32(r.buf[r.pos:]))
	if n < 0 {
		return 0, decodeErr(ErrNegativeSize, r.pos, "")
	}
	if int(n) > r.lim.MaxStringLength && (!r.base64 || int(n) > jsonMaxString(r.lim)) {
		return 0, decodeErr(ErrSizeLimit, r.pos, "string length")
	}
	r.pos += 4
	if int(n) > len(r.buf)-r.pos {
		return 0, r.truncated()
	}
	return int(n), nil
}

// ReadString reads a length-prefixed string, copied unless UnsafeStrings.
func (r *BinaryReader) ReadString() (string, error) {
	var b []byte
	// rawBytes' fast path, repeated so that a string costs one call.
	if p := r.pos; p >= 0 && p+4 <= len(r.buf) {
		n := int(int32(binary.BigEndian.Uint32(r.buf[p : p+4])))
		if n >= 0 && n <= r.lim.MaxStringLength && n <= len(r.buf)-p-4 {
			e := p + 4 + n
			r.pos = e
			if uint(n-1) < 16 && p+20 <= len(r.buf) && !r.UnsafeStrings {
				return r.strs.short((*[16]byte)(r.buf[p+4:p+20]), n), nil
			}
			b = r.buf[p+4 : e]
		}
	}
	if b == nil {
		var err error
		if b, err = r.rawBytes(); err != nil {
			return "", err
		}
		if err := r.checkText(len(b)); err != nil {
			return "", err
		}
	}
	if r.UnsafeStrings && len(b) > 0 {
		return unsafe.String(&b[0], len(b)), nil
	}
	return r.strs.str(b), nil
}

// SplitsBinary reports whether the input is a JSON message's binary form
// (JSONCodec), whose binary values are still base64 text: BytesFrom then
// returns that form, not the binary protocol's bytes, and values must be
// read one by one.
func (r *BinaryReader) SplitsBinary() bool { return r.base64 }

// BytesFrom returns the input from offset start (an earlier Pos) to the
// current position: what was read since, as encoded. It is a sub-slice of
// the input whatever Alias says, so a caller that keeps it copies it
// unless the input outlives its use. A reader that keeps a value in its
// encoded form (a store's record) reads or skips it and takes its bytes,
// without building and encoding it again. nil when start is not an
// offset at or before the current position.
func (r *BinaryReader) BytesFrom(start int) []byte {
	if start < 0 || start > r.pos {
		return nil
	}
	return r.buf[start:r.pos:r.pos]
}

// checkText applies the string limit to a JSON string, which readLen
// lets grow to a binary value's base64 length.
func (r *BinaryReader) checkText(n int) error {
	if r.base64 && n > r.lim.MaxStringLength {
		return decodeErr(ErrSizeLimit, r.pos, "string length")
	}
	return nil
}

// ReadBinary reads length-prefixed bytes, aliasing the input when Alias is
// set. An empty value is returned as a non-nil empty slice.
func (r *BinaryReader) ReadBinary() ([]byte, error) {
	if p := r.pos; r.Alias && p >= 0 && p+4 <= len(r.buf) {
		// Fast path of rawBytes, so an aliased value costs one call.
		n := int(int32(binary.BigEndian.Uint32(r.buf[p : p+4])))
		if n >= 0 && n <= r.lim.MaxStringLength && n <= len(r.buf)-p-4 {
			e := p + 4 + n
			r.pos = e
			return r.buf[p+4 : e : e], nil
		}
	}
	src, err := r.rawBytes()
	if err != nil || r.Alias {
		return src, err
	}
	if r.base64 {
		b, err := decodeBase64(src, r.pos)
		if err == nil && len(b) > r.lim.MaxStringLength {
			err = decodeErr(ErrSizeLimit, r.pos, "binary length")
		}
		return b, err
	}
	out := make([]byte, len(src))
	copy(out, src)
	return out, nil
}

// ReadUUID reads 16 raw bytes.
func (r *BinaryReader) ReadUUID() (u [16]byte, err error) {
	if len(r.buf)-r.pos < 16 {
		return u, r.truncated()
	}
	copy(u[:], r.buf[r.pos:])
	r.pos += 16
	return u, nil
}

// checkCount validates a container element count against limits and against
// the bytes left, so hostile counts cannot make callers allocate huge slices.
func (r *BinaryReader) checkCount(at int, n int32, minElem int) (int, error) {
	if n < 0 {
		return 0, decodeErr(ErrNegativeSize, at, "")
	}
	if int(n) > r.lim.MaxContainerSize {
		return 0, decodeErr(ErrSizeLimit, at, "container size")
	}
	if int64(n)*int64(minElem) > int64(len(r.buf)-r.pos) {
		return 0, decodeErr(ErrTruncated, at, "container larger than input")
	}
	return int(n), nil
}

// ReadListBegin reads a list header.
func (r *BinaryReader) ReadListBegin() (elem Type, n int, err error) {
	p := r.pos
	if len(r.buf)-p < 5 {
		return 0, 0, r.truncated()
	}
	elem = Type(r.buf[p])
	cnt := int32(binary.BigEndian.Uint32(r.buf[p+1:]))
	r.pos = p + 5
	if cnt == 0 {
		return elem, 0, nil
	}
	if !elem.Valid() {
		return 0, 0, decodeErr(ErrBadType, p, elem.String())
	}
	n, err = r.checkCount(p, cnt, binaryMinSize[elem])
	return elem, n, err
}

// ReadSetBegin reads a set header.
func (r *BinaryReader) ReadSetBegin() (elem Type, n int, err error) { return r.ReadListBegin() }

// ReadMapBegin reads a map header.
func (r *BinaryReader) ReadMapBegin() (key, val Type, n int, err error) {
	p := r.pos
	if len(r.buf)-p < 6 {
		return 0, 0, 0, r.truncated()
	}
	key, val = Type(r.buf[p]), Type(r.buf[p+1])
	cnt := int32(binary.BigEndian.Uint32(r.buf[p+2:]))
	r.pos = p + 6
	if cnt == 0 {
		return key, val, 0, nil
	}
	if !key.Valid() || !val.Valid() {
		return 0, 0, 0, decodeErr(ErrBadType, p, "map "+key.String()+"/"+val.String())
	}
	n, err = r.checkCount(p, cnt, binaryMinSize[key]+binaryMinSize[val])
	return key, val, n, err
}

// validType marks the value types, indexed by any byte so lookups need no
// bounds check.
var validType = func() (v [256]bool) {
	for t := range v {
		v[t] = Type(t).Valid()
	}
	return v
}()

// binaryMinSize is the smallest encoding of one value of each type.
var binaryMinSize = [17]int{
	BOOL: 1, I8: 1, DOUBLE: 8, I16: 2, I32: 4, I64: 8, STRING: 4,
	STRUCT: 1, MAP: 6, SET: 5, LIST: 5, UUID: 16,
}

// Skip consumes one value of type t, for unknown fields.
func (r *BinaryReader) Skip(t Type) error {
	switch t {
	case BOOL, I8:
		return r.skipN(1)
	case I16:
		return r.skipN(2)
	case I32:
		return r.skipN(4)
	case I64, DOUBLE:
		return r.skipN(8)
	case UUID:
		return r.skipN(16)
	case STRING:
		n, err := r.readLen()
		if err != nil {
			return err
		}
		r.pos += n
		return nil
	case STRUCT:
		if err := r.ReadStructBegin(); err != nil {
			return err
		}
		for {
			ft, _, err := r.ReadFieldBegin()
			if err != nil {
				return err
			}
			if ft == STOP {
				break
			}
			if err := r.Skip(ft); err != nil {
				return err
			}
		}
		return r.ReadStructEnd()
	case LIST, SET:
		elem, n, err := r.ReadListBegin()
		if err != nil {
			return err
		}
		return r.skipElems(elem, n)
	case MAP:
		k, v, n, err := r.ReadMapBegin()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if err := r.enter(); err != nil {
			return err
		}
		if k == STRING && v == STRING {
			if err := r.skipStrings(2 * n); err != nil {
				return err
			}
			r.depth--
			return nil
		}
		for i := 0; i < n; i++ {
			if err := r.Skip(k); err != nil {
				return err
			}
			if err := r.Skip(v); err != nil {
				return err
			}
		}
		r.depth--
		return nil
	}
	return decodeErr(ErrBadType, r.pos, t.String())
}

func (r *BinaryReader) enter() error {
	r.depth++
	if r.depth > r.lim.MaxDepth {
		return decodeErr(ErrDepthLimit, r.pos, "")
	}
	return nil
}

func (r *BinaryReader) skipElems(elem Type, n int) error {
	if n == 0 {
		return nil
	}
	if sz := binaryFixedSize(elem); sz > 0 {
		// checkCount already proved n*sz bytes are present.
		return r.skipN(n * sz)
	}
	if err := r.enter(); err != nil {
		return err
	}
	if elem == STRING {
		if err := r.skipStrings(n); err != nil {
			return err
		}
		r.depth--
		return nil
	}
	for i := 0; i < n; i++ {
		if err := r.Skip(elem); err != nil {
			return err
		}
	}
	r.depth--
	return nil
}

// skipStrings skips n length-prefixed values with readLen's checks, in
// one loop: for the maps and lists of strings a reader skips whole (a
// record's fields kept in wire form), where a call of Skip and of readLen
// per value was most of the work. A value the loop does not take at once
// (a bad length, or a JSON value's longer base64 text) goes through
// readLen, so the outcome and any error are readLen's.
func (r *BinaryReader) skipStrings(n int) error {
	buf, limit, p := r.buf, r.lim.MaxStringLength, r.pos
	for ; n > 0; n-- {
		if len(buf)-p >= 4 {
			l := int(int32(binary.BigEndian.Uint32(buf[p:])))
			if l >= 0 && l <= limit && l <= len(buf)-p-4 {
				p += 4 + l
				continue
			}
		}
		r.pos = p
		l, err := r.readLen()
		if err != nil {
			return err
		}
		r.pos += l
		p = r.pos
	}
	r.pos = p
	return nil
}

func binaryFixedSize(t Type) int {
	switch t {
	case BOOL, I8:
		return 1
	case I16:
		return 2
	case I32:
		return 4
	case I64, DOUBLE:
		return 8
	case UUID:
		return 16
	}
	return 0
}

func (r *BinaryReader) skipN(n int) error {
	if len(r.buf)-r.pos < n {
		return r.truncated()
	}
	r.pos += n
	return nil
}
