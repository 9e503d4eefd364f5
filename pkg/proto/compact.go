package proto

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"
)

// Compact protocol constants, as in Apache's TCompactProtocol.
const (
	compactProtocolID = 0x82
	compactVersion    = 1
	compactVersionMsk = 0x1f
	compactTypeShift  = 5

	cTrue   = 0x01
	cFalse  = 0x02
	cByte   = 0x03
	cI16    = 0x04
	cI32    = 0x05
	cI64    = 0x06
	cDouble = 0x07
	cBinary = 0x08
	cList   = 0x09
	cSet    = 0x0A
	cMap    = 0x0B
	cStruct = 0x0C
	cUUID   = 0x0D
)

// toCompact maps a wire Type onto its compact nibble (indexed by t&31 so
// lookups need no bounds check).
var toCompact = [32]byte{
	BOOL: cTrue, I8: cByte, I16: cI16, I32: cI32, I64: cI64, DOUBLE: cDouble,
	STRING: cBinary, LIST: cList, SET: cSet, MAP: cMap, STRUCT: cStruct, UUID: cUUID,
}

// fromCompact maps a compact nibble onto a wire Type; 0xff marks invalid.
var fromCompact = [16]Type{
	0: STOP, cTrue: BOOL, cFalse: BOOL, cByte: I8, cI16: I16, cI32: I32, cI64: I64,
	cDouble: DOUBLE, cBinary: STRING, cList: LIST, cSet: SET, cMap: MAP,
	cStruct: STRUCT, cUUID: UUID, 14: 0xff, 15: 0xff,
}

// fastField maps a whole field-header byte to its type when ReadFieldBegin's
// fast path can take it (a delta id and a valid type), else to 0.
var fastField = func() (t [256]Type) {
	for b := 0x10; b < 0x100; b++ {
		switch lo := b & 0x0f; lo {
		case 0, 14, 15:
		default:
			t[b] = fromCompact[lo]
		}
	}
	return t
}()

// CompactWriter appends the Thrift compact protocol to a caller-owned buffer,
// up to its limit if it has one (SetLimit). Make one with
// NewCompactWriter, or Reset it before writing: a zero CompactWriter has
// a limit of 0.
type CompactWriter struct {
	buf         []byte
	last        int16
	stack       []int16
	boolPending bool
	boolID      int16
	stackArr    [8]int16
	refs        *[]Ref // see SetRefs
	refMin      int
	encLimit
}

// NewCompactWriter returns a writer appending to buf.
func NewCompactWriter(buf []byte) *CompactWriter {
	w := &CompactWriter{buf: buf}
	w.stack = w.stackArr[:0]
	w.reset(len(buf))
	return w
}

// Reset makes the writer append to buf with fresh field-id state, without
// a limit (SetLimit).
func (w *CompactWriter) Reset(buf []byte) {
	w.buf, w.last, w.boolPending = buf, 0, false
	w.reset(len(buf))
	if w.stack == nil {
		w.stack = w.stackArr[:0]
	}
	w.stack = w.stack[:0]
}

// Bytes returns the buffer with everything written so far.
func (w *CompactWriter) Bytes() []byte { return w.buf }

// Len returns the current buffer length.
func (w *CompactWriter) Len() int { return len(w.buf) }

// Grow makes room for n more bytes so later appends do not reallocate;
// not past the limit (SetLimit).
func (w *CompactWriter) Grow(n int) {
	if cap(w.buf)-len(w.buf) < n && len(w.buf)+n <= w.lim {
		nb := make([]byte, len(w.buf), 2*cap(w.buf)+n)
		copy(nb, w.buf)
		w.buf = nb
	}
}

// WriteMessageBegin writes a compact message header.
func (w *CompactWriter) WriteMessageBegin(name string, typ MessageType, seqid int32) {
	w.buf = append(w.buf, compactProtocolID, compactVersion|byte(typ)<<compactTypeShift)
	w.buf = appendVarint(w.buf, uint64(uint32(seqid)))
	w.WriteString(name)
}

// WriteStructBegin saves the enclosing struct's last field id.
func (w *CompactWriter) WriteStructBegin() {
	w.stack = append(w.stack, w.last)
	w.last = 0
}

// WriteStructEnd restores the enclosing struct's last field id.
func (w *CompactWriter) WriteStructEnd() {
	if n := len(w.stack); n > 0 {
		w.last = w.stack[n-1]
		w.stack = w.stack[:n-1]
	}
}

// WriteFieldBegin writes a field header; a BOOL header waits for its value.
func (w *CompactWriter) WriteFieldBegin(t Type, id int16) {
	if d := uint(int(id) - int(w.last) - 1); d < 15 && t != BOOL {
		w.buf = append(w.buf, byte(d+1)<<4|toCompact[t&31])
		w.last = id
		return
	}
	w.fieldBeginSlow(t, id)
}

func (w *CompactWriter) fieldBeginSlow(t Type, id int16) {
	if t == BOOL {
		w.boolPending, w.boolID = true, id
		return
	}
	w.fieldHeader(toCompact[t&31], id)
}

// fieldHeader writes a delta header when the id grows by 1..15 (as Apache
// does), else the type byte and a zigzag id.
func (w *CompactWriter) fieldHeader(ct byte, id int16) {
	if d := int(id) - int(w.last); uint(d-1) < 15 {
		w.buf = append(w.buf, byte(d<<4)|ct)
	} else {
		w.buf = binary.AppendUvarint(append(w.buf, ct), uint64(zigzag32(int32(id))))
	}
	w.last = id
}

// WriteFieldStop ends a struct.
func (w *CompactWriter) WriteFieldStop() {
	w.buf = append(w.buf, 0)
	w.check(&w.buf)
}

// WriteBool writes a bool, folded into a pending field header if any.
func (w *CompactWriter) WriteBool(v bool) {
	var ct byte = cFalse
	if v {
		ct = cTrue
	}
	if w.boolPending {
		w.boolPending = false
		w.fieldHeader(ct, w.boolID)
		return
	}
	w.buf = append(w.buf, ct)
	w.drop(&w.buf)
}

// WriteI8 writes a raw byte.
func (w *CompactWriter) WriteI8(v int8) {
	w.buf = append(w.buf, byte(v))
	w.drop(&w.buf)
}

// WriteI16 writes a zigzag varint.
func (w *CompactWriter) WriteI16(v int16) { w.WriteI32(int32(v)) }

// WriteI32 writes a zigzag varint.
func (w *CompactWriter) WriteI32(v int32) { w.writeVarint(uint64(uint32(v<<1) ^ uint32(v>>31))) }

// WriteI64 writes a zigzag varint.
func (w *CompactWriter) WriteI64(v int64) { w.writeVarint(uint64(v<<1) ^ uint64(v>>63)) }

// WriteDouble writes a little-endian IEEE 754 double (compact's byte order).
func (w *CompactWriter) WriteDouble(v float64) {
	w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(v))
	w.drop(&w.buf)
}

// WriteString writes a varint length and the bytes.
func (w *CompactWriter) WriteString(v string) {
	b := appendLen(w.buf, len(v))
	w.buf = append(b, v[:w.fit(len(b), len(v))]...)
	w.drop(&w.buf)
}

// WriteBinary writes a varint length and the bytes.
func (w *CompactWriter) WriteBinary(v []byte) {
	w.buf = appendLen(w.buf, len(v))
	if w.refs != nil && len(v) >= w.refMin {
		w.noteRef(w.refs, len(w.buf), v)
		w.drop(&w.buf)
		return
	}
	w.buf = append(w.buf, v[:w.fit(len(w.buf), len(v))]...)
	w.drop(&w.buf)
}

// appendLen writes a length prefix; it stays small enough to inline so
// short strings cost no call.
func appendLen(b []byte, n int) []byte {
	if n < 0x80 {
		return append(b, byte(n))
	}
	return binary.AppendUvarint(b, uint64(uint32(n)))
}

// WriteUUID writes 16 raw bytes.
func (w *CompactWriter) WriteUUID(v [16]byte) {
	w.buf = append(w.buf, v[:]...)
	w.drop(&w.buf)
}

// WriteListBegin writes a list header. Past the limit it is dropped at
// once, as the binary writer's is: an empty list has no value to drop
// it, and a list of empty lists kept every header until the struct's end
// (32 MiB of them against a 1 MiB room allocated 201 MB). The drop costs
// the method its inlining (cost 96 of 80): 1-2 ns per header
// (BenchmarkWriteOneByOne's small-lists and small-maps).
func (w *CompactWriter) WriteListBegin(elem Type, n int) {
	ct := toCompact[elem&31]
	if n <= 14 {
		w.buf = append(w.buf, byte(n)<<4|ct)
	} else {
		w.buf = binary.AppendUvarint(append(w.buf, 0xf0|ct), uint64(uint32(n)))
	}
	w.drop(&w.buf)
}

// WriteSetBegin writes a set header (same layout as a list).
func (w *CompactWriter) WriteSetBegin(elem Type, n int) { w.WriteListBegin(elem, n) }

// WriteMapBegin writes a map header; an empty map is the single byte 0.
// Past the limit it is dropped at once (WriteListBegin).
func (w *CompactWriter) WriteMapBegin(key, val Type, n int) {
	if n == 0 {
		w.buf = append(w.buf, 0)
	} else {
		w.buf = append(binary.AppendUvarint(w.buf, uint64(uint32(n))), toCompact[key&31]<<4|toCompact[val&31])
	}
	w.drop(&w.buf)
}

// CompactReader decodes the Thrift compact protocol from a byte slice with
// bounds and limit checks.
type CompactReader struct {
	buf      []byte
	pos      int
	depth    int
	lim      *Limits
	last     int16
	stack    []int16
	boolSet  bool
	boolVal  bool
	stackArr [8]int16
	// Alias makes ReadBinary return sub-slices of the input instead of
	// copies; the caller must then keep the input alive and unmodified.
	Alias bool
	// UnsafeStrings makes ReadString return strings that share the input's
	// memory (no copy, no allocation). Only for inputs that are never
	// modified or reused while any decoded string is alive: a string that
	// changes under its holder breaks map keys and every Go invariant.
	UnsafeStrings bool
	strs          strArena // backs short copied strings
}

// NewCompactReader returns a reader over buf; a nil lim means DefaultLimits.
func NewCompactReader(buf []byte, lim *Limits) *CompactReader {
	r := &CompactReader{buf: buf, lim: limitsOrDefault(lim)}
	r.stack = r.stackArr[:0]
	return r
}

// Reset restarts the reader on buf, keeping limits and Alias.
func (r *CompactReader) Reset(buf []byte) {
	r.buf, r.pos, r.depth, r.last, r.boolSet = buf, 0, 0, 0, false
	if r.stack == nil {
		r.stack = r.stackArr[:0]
	}
	r.stack = r.stack[:0]
	if r.lim == nil {
		r.lim = &DefaultLimits
	}
}

// SetLimits replaces the limits (nil means DefaultLimits).
func (r *CompactReader) SetLimits(lim *Limits) { r.lim = limitsOrDefault(lim) }

// Pos returns the number of bytes consumed.
func (r *CompactReader) Pos() int { return r.pos }

// Remaining returns the number of unread bytes.
func (r *CompactReader) Remaining() int { return len(r.buf) - r.pos }

func (r *CompactReader) truncated() error { return decodeErr(ErrTruncated, r.pos, "") }

// uvarint reads an unsigned varint of at most 10 bytes.
func (r *CompactReader) uvarint() (uint64, error) {
	if p := r.pos; p >= 0 && p+8 <= len(r.buf) {
		w := binary.LittleEndian.Uint64(r.buf[p : p+8])
		if w&0x80 == 0 {
			r.pos = p + 1
			return w & 0x7f, nil
		}
		if m := ^w & 0x8080808080808080; m != 0 {
			// m^(m-1) keeps every bit up to the last byte's stop bit.
			r.pos = p + bits.TrailingZeros64(m)>>3 + 1
			return gather(w & (m ^ (m - 1))), nil
		}
	}
	return r.uvarintSlow()
}

// uvarintSlow handles varints near the end of the input or over 8 bytes.
func (r *CompactReader) uvarintSlow() (uint64, error) {
	p := r.pos
	v, n := binary.Uvarint(r.buf[p:])
	if n <= 0 {
		if n == 0 {
			return 0, r.truncated()
		}
		return 0, decodeErr(ErrInvalidVarint, p, "")
	}
	r.pos = p + n
	return v, nil
}

// ErrInvalidVarint reports a varint longer than 64 bits.
var ErrInvalidVarint error = &protoError{"proto: varint overflow"}

// ReadMessageBegin reads a compact message header.
func (r *CompactReader) ReadMessageBegin() (name string, typ MessageType, seqid int32, err error) {
	nb, typ, seqid, err := r.messageHeader()
	return string(nb), typ, seqid, err
}

// messageHeader reads a message header; name aliases the input.
func (r *CompactReader) messageHeader() (name []byte, typ MessageType, seqid int32, err error) {
	p := r.pos
	if len(r.buf)-p < 2 {
		return nil, 0, 0, r.truncated()
	}
	if r.buf[p] != compactProtocolID || r.buf[p+1]&compactVersionMsk != compactVersion {
		return nil, 0, 0, decodeErr(ErrBadVersion, p, "")
	}
	typ = MessageType(r.buf[p+1] >> compactTypeShift)
	r.pos = p + 2
	u, err := r.uvarint()
	if err != nil {
		return nil, 0, 0, err
	}
	n, err := r.readLen()
	if err != nil {
		return nil, 0, 0, err
	}
	name = r.buf[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return name, typ, int32(u), nil
}

// ReadStructBegin saves the enclosing field id and accounts for depth.
func (r *CompactReader) ReadStructBegin() error {
	r.depth++
	if r.depth > r.lim.MaxDepth {
		return decodeErr(ErrDepthLimit, r.pos, "")
	}
	r.stack = append(r.stack, r.last)
	r.last = 0
	return nil
}

// ReadStructEnd restores the enclosing struct's field id.
func (r *CompactReader) ReadStructEnd() error {
	r.depth--
	if n := len(r.stack); n > 0 {
		r.last = r.stack[n-1]
		r.stack = r.stack[:n-1]
	}
	return nil
}

// ReadFieldBegin reads a field header; t == STOP ends the struct.
func (r *CompactReader) ReadFieldBegin() (t Type, id int16, err error) {
	if p := r.pos; uint(p) < uint(len(r.buf)) {
		// Fast path: a delta id and a valid type.
		b := r.buf[p]
		if t = fastField[b]; t != 0 {
			r.pos = p + 1
			r.last += int16(b >> 4)
			if t == BOOL {
				r.boolSet, r.boolVal = true, b&0x0f == cTrue
			}
			return t, r.last, nil
		}
	}
	return r.fieldBeginSlow()
}

func (r *CompactReader) fieldBeginSlow() (t Type, id int16, err error) {
	p := r.pos
	if p >= len(r.buf) {
		return 0, 0, r.truncated()
	}
	b := r.buf[p]
	ct := b & 0x0f
	if ct == 0 {
		r.pos = p + 1
		return STOP, 0, nil
	}
	t = fromCompact[ct]
	if t == 0xff {
		return 0, 0, decodeErr(ErrBadType, p, "")
	}
	r.pos = p + 1
	if d := b >> 4; d != 0 {
		id = r.last + int16(d)
	} else {
		u, err := r.uvarint()
		if err != nil {
			return 0, 0, err
		}
		u32 := uint32(u)
		id = int16(int32(u32>>1) ^ -int32(u32&1))
	}
	if t == BOOL {
		r.boolSet, r.boolVal = true, ct == cTrue
	}
	r.last = id
	return t, id, nil
}

// ReadBool returns a bool folded into the field header, or reads one byte
// inside containers.
func (r *CompactReader) ReadBool() (bool, error) {
	if r.boolSet {
		r.boolSet = false
		return r.boolVal, nil
	}
	return r.readBoolByte()
}

func (r *CompactReader) readBoolByte() (bool, error) {
	if r.pos >= len(r.buf) {
		return false, r.truncated()
	}
	b := r.buf[r.pos]
	r.pos++
	return b == cTrue, nil
}

// ReadI8 reads a raw byte.
func (r *CompactReader) ReadI8() (int8, error) {
	if r.pos >= len(r.buf) {
		return 0, r.truncated()
	}
	b := r.buf[r.pos]
	r.pos++
	return int8(b), nil
}

// ReadI16 reads a zigzag varint.
func (r *CompactReader) ReadI16() (int16, error) {
	v, err := r.ReadI32()
	return int16(v), err
}

// ReadI32 reads a zigzag varint (truncated to 32 bits, as Apache does).
func (r *CompactReader) ReadI32() (int32, error) {
	if p := r.pos; p >= 0 && p+8 <= len(r.buf) {
		w := binary.LittleEndian.Uint64(r.buf[p : p+8])
		if w&0x80 == 0 {
			r.pos = p + 1
			u := int32(w & 0x7f)
			return u>>1 ^ -(u & 1), nil
		}
		if m := ^w & 0x8080808080808080; m != 0 {
			r.pos = p + bits.TrailingZeros64(m)>>3 + 1
			u := uint32(gather(w & (m ^ (m - 1))))
			return int32(u>>1) ^ -int32(u&1), nil
		}
	}
	u, err := r.uvarintSlow()
	u32 := uint32(u)
	return int32(u32>>1) ^ -int32(u32&1), err
}

// ReadI64 reads a zigzag varint.
func (r *CompactReader) ReadI64() (int64, error) {
	if p := r.pos; p >= 0 && p+8 <= len(r.buf) {
		w := binary.LittleEndian.Uint64(r.buf[p : p+8])
		if w&0x80 == 0 {
			r.pos = p + 1
			u := int64(w & 0x7f)
			return u>>1 ^ -(u & 1), nil
		}
		if m := ^w & 0x8080808080808080; m != 0 {
			r.pos = p + bits.TrailingZeros64(m)>>3 + 1
			u := gather(w & (m ^ (m - 1)))
			return int64(u>>1) ^ -int64(u&1), nil
		}
		if p+10 <= len(r.buf) {
			// 9 or 10 bytes: the 8 loaded groups carry 56 bits.
			b8, b9 := r.buf[p+8], r.buf[p+9]
			if b8 < 0x80 {
				u := gather(w) | uint64(b8)<<56
				r.pos = p + 9
				return int64(u>>1) ^ -int64(u&1), nil
			}
			if b9 <= 1 {
				u := gather(w) | uint64(b8&0x7f)<<56 | uint64(b9)<<63
				r.pos = p + 10
				return int64(u>>1) ^ -int64(u&1), nil
			}
		}
	}
	u, err := r.uvarintSlow()
	return int64(u>>1) ^ -int64(u&1), err
}

// ReadDouble reads a little-endian IEEE 754 double.
func (r *CompactReader) ReadDouble() (float64, error) {
	if len(r.buf)-r.pos < 8 {
		return 0, r.truncated()
	}
	v := binary.LittleEndian.Uint64(r.buf[r.pos:])
	r.pos += 8
	return math.Float64frombits(v), nil
}

func (r *CompactReader) readLen() (int, error) {
	p := r.pos
	u, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	n := int32(uint32(u))
	if n < 0 {
		return 0, decodeErr(ErrNegativeSize, p, "")
	}
	if int(n) > r.lim.MaxStringLength {
		return 0, decodeErr(ErrSizeLimit, p, "string length")
	}
	if int(n) > len(r.buf)-r.pos {
		return 0, r.truncated()
	}
	return int(n), nil
}

// ReadString reads a length-prefixed string, copied unless UnsafeStrings.
func (r *CompactReader) ReadString() (string, error) {
	var b []byte
	// value's fast path (a 1-byte length), repeated so that a short
	// string costs one call.
	if p := r.pos; p >= 0 && p < len(r.buf) {
		n := int(r.buf[p])
		if e := p + 1 + n; n < 0x80 && n <= r.lim.MaxStringLength && e <= len(r.buf) {
			r.pos = e
			if uint(n-1) < 16 && p+17 <= len(r.buf) && !r.UnsafeStrings {
				return r.strs.short((*[16]byte)(r.buf[p+1:p+17]), n), nil
			}
			b = r.buf[p+1 : e]
		}
	}
	if b == nil {
		var err error
		if b, err = r.value(); err != nil {
			return "", err
		}
	}
	if r.UnsafeStrings && len(b) > 0 {
		return unsafe.String(&b[0], len(b)), nil
	}
	return r.strs.str(b), nil
}

// ReadBinary reads length-prefixed bytes, aliasing the input when Alias is
// set. An empty value is returned as a non-nil empty slice.
func (r *CompactReader) ReadBinary() ([]byte, error) {
	if p := r.pos; r.Alias && p >= 0 && p < len(r.buf) {
		// Fast path of value for a one-byte length: one call per value.
		n := int(r.buf[p])
		if e := p + 1 + n; n < 0x80 && n <= r.lim.MaxStringLength && e <= len(r.buf) {
			r.pos = e
			return r.buf[p+1 : e : e], nil
		}
	}
	src, err := r.value()
	if err != nil || r.Alias {
		return src, err
	}
	out := make([]byte, len(src))
	copy(out, src)
	return out, nil
}

// value reads a length-prefixed value as a sub-slice of the input.
func (r *CompactReader) value() ([]byte, error) {
	n, err := r.readLen()
	if err != nil {
		return nil, err
	}
	src := r.buf[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return src, nil
}

// ReadUUID reads 16 raw bytes.
func (r *CompactReader) ReadUUID() (u [16]byte, err error) {
	if len(r.buf)-r.pos < 16 {
		return u, r.truncated()
	}
	copy(u[:], r.buf[r.pos:])
	r.pos += 16
	return u, nil
}

// compactMinSize is the smallest encoding of one value of each type.
var compactMinSize = [17]int{
	BOOL: 1, I8: 1, DOUBLE: 8, I16: 1, I32: 1, I64: 1, STRING: 1,
	STRUCT: 1, MAP: 1, SET: 1, LIST: 1, UUID: 16,
}

func (r *CompactReader) checkCount(at int, u uint64, minElem int) (int, error) {
	n := int32(uint32(u))
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
func (r *CompactReader) ReadListBegin() (elem Type, n int, err error) {
	p := r.pos
	if p >= len(r.buf) {
		return 0, 0, r.truncated()
	}
	b := r.buf[p]
	r.pos = p + 1
	u := uint64(b >> 4)
	if u == 15 {
		if u, err = r.uvarint(); err != nil {
			return 0, 0, err
		}
	}
	elem = fromCompact[b&0x0f]
	if u == 0 {
		if elem == 0xff {
			elem = STOP
		}
		return elem, 0, nil
	}
	if elem == 0xff || elem == STOP {
		return 0, 0, decodeErr(ErrBadType, p, "list element")
	}
	n, err = r.checkCount(p, u, compactMinSize[elem])
	return elem, n, err
}

// ReadSetBegin reads a set header.
func (r *CompactReader) ReadSetBegin() (elem Type, n int, err error) { return r.ReadListBegin() }

// ReadMapBegin reads a map header.
func (r *CompactReader) ReadMapBegin() (key, val Type, n int, err error) {
	p := r.pos
	u, err := r.uvarint()
	if err != nil {
		return 0, 0, 0, err
	}
	if u == 0 {
		return STOP, STOP, 0, nil
	}
	if r.pos >= len(r.buf) {
		return 0, 0, 0, r.truncated()
	}
	kv := r.buf[r.pos]
	r.pos++
	key, val = fromCompact[kv>>4], fromCompact[kv&0x0f]
	if key == 0xff || key == STOP || val == 0xff || val == STOP {
		return 0, 0, 0, decodeErr(ErrBadType, p, "map key/value")
	}
	n, err = r.checkCount(p, u, compactMinSize[key]+compactMinSize[val])
	return key, val, n, err
}

func (r *CompactReader) enter() error {
	r.depth++
	if r.depth > r.lim.MaxDepth {
		return decodeErr(ErrDepthLimit, r.pos, "")
	}
	return nil
}

func (r *CompactReader) skipN(n int) error {
	if len(r.buf)-r.pos < n {
		return r.truncated()
	}
	r.pos += n
	return nil
}

// Skip consumes one value of type t, for unknown fields.
func (r *CompactReader) Skip(t Type) error {
	switch t {
	case BOOL:
		_, err := r.ReadBool()
		return err
	case I8:
		return r.skipN(1)
	case I16, I32, I64:
		_, err := r.uvarint()
		return err
	case DOUBLE:
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
		if err != nil || n == 0 {
			return err
		}
		if err := r.enter(); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := r.Skip(elem); err != nil {
				return err
			}
		}
		r.depth--
		return nil
	case MAP:
		k, v, n, err := r.ReadMapBegin()
		if err != nil || n == 0 {
			return err
		}
		if err := r.enter(); err != nil {
			return err
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
