package proto

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// b2j transcodes the binary protocol into Apache's TJSONProtocol. The
// binary protocol does not tell a string from a binary value (both are
// type 11); refs does: a value the writer was given as binary (WriteBinary,
// with SetRefs(refs, 1)) is in refs, and goes out in base64 as Apache
// writes binary values; every other one is a JSON string.
type b2j struct {
	src   []byte
	pos   int
	refs  []Ref
	ri    int
	out   []byte
	depth int
	lim   *Limits
	max   int // the most out's length may reach (JSONCodec.SetLimit)
}

// errJSONOver stops a transcoding whose output passed its max: what
// follows is not read (finishWrite reports a *TooLargeError).
var errJSONOver = errors.New("proto: JSON over its limit")

func (x *b2j) fail(sentinel error, detail string) error { return decodeErr(sentinel, x.pos, detail) }

func (x *b2j) need(n int) error {
	if n > len(x.src)-x.pos {
		return x.fail(ErrTruncated, "")
	}
	return nil
}

func (x *b2j) u32() (uint32, error) {
	if err := x.need(4); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint32(x.src[x.pos:])
	x.pos += 4
	return v, nil
}

// message writes [1,"name",type,seqid,{body}] from a strict binary message.
func (x *b2j) message() error {
	v, err := x.u32()
	if err != nil {
		return err
	}
	if v&0xffff0000 != binaryVersion1 || v&0xff00 != 0 {
		return x.fail(ErrBadVersion, "")
	}
	x.out = append(x.out, "[1,"...)
	if err := x.value(STRING, false); err != nil {
		return err
	}
	x.out = append(x.out, ',')
	x.out = strconv.AppendInt(x.out, int64(int8(v)), 10)
	x.out = append(x.out, ',')
	seq, err := x.u32()
	if err != nil {
		return err
	}
	x.out = strconv.AppendInt(x.out, int64(int32(seq)), 10)
	x.out = append(x.out, ',')
	if err := x.value(STRUCT, false); err != nil {
		return err
	}
	x.out = append(x.out, ']')
	return nil
}

// jsonTags are TJSONProtocol's type names (Apache's TypeIdToString).
var jsonTags = [...]string{
	BOOL: "tf", I8: "i8", I16: "i16", I32: "i32", I64: "i64", DOUBLE: "dbl",
	STRING: "str", STRUCT: "rec", MAP: "map", SET: "set", LIST: "lst", UUID: "uid",
}

func (x *b2j) tag(t Type) error {
	if !t.Valid() {
		return x.fail(ErrBadType, t.String())
	}
	x.out = append(x.out, '"')
	x.out = append(x.out, jsonTags[t]...)
	x.out = append(x.out, '"')
	return nil
}

func (x *b2j) enter() error {
	x.depth++
	if x.depth > x.lim.MaxDepth {
		return x.fail(ErrDepthLimit, "")
	}
	return nil
}

// value writes one value of type t; key marks a map key, where Apache
// quotes numbers (JSON object keys are strings).
func (x *b2j) value(t Type, key bool) error {
	switch t {
	case BOOL, I8:
		if err := x.need(1); err != nil {
			return err
		}
		v := int64(int8(x.src[x.pos]))
		if t == BOOL && v != 0 {
			v = 1
		}
		x.pos++
		x.int(v, key)
	case I16:
		if err := x.need(2); err != nil {
			return err
		}
		x.int(int64(int16(binary.BigEndian.Uint16(x.src[x.pos:]))), key)
		x.pos += 2
	case I32:
		v, err := x.u32()
		if err != nil {
			return err
		}
		x.int(int64(int32(v)), key)
	case I64, DOUBLE:
		if err := x.need(8); err != nil {
			return err
		}
		v := binary.BigEndian.Uint64(x.src[x.pos:])
		x.pos += 8
		if t == I64 {
			x.int(int64(v), key)
		} else {
			x.out = appendJSONDouble(x.out, math.Float64frombits(v), key)
		}
	case UUID:
		if err := x.need(16); err != nil {
			return err
		}
		x.out = appendUUID(x.out, x.src[x.pos:x.pos+16])
		x.pos += 16
	case STRING:
		return x.str()
	case STRUCT:
		return x.structure()
	case LIST, SET, MAP:
		return x.container(t == MAP)
	default:
		return x.fail(ErrBadType, t.String())
	}
	return nil
}

func (x *b2j) int(v int64, key bool) {
	if key {
		x.out = append(x.out, '"')
	}
	x.out = strconv.AppendInt(x.out, v, 10)
	if key {
		x.out = append(x.out, '"')
	}
}

func (x *b2j) str() error {
	at := x.pos
	n, err := x.u32()
	if err != nil {
		return err
	}
	if int32(n) < 0 {
		return decodeErr(ErrNegativeSize, at, "")
	}
	if x.ri < len(x.refs) && x.refs[x.ri].Off == x.pos {
		// A binary value the writer left out of the buffer.
		v := x.refs[x.ri].Data
		if len(x.out)+base64.StdEncoding.EncodedLen(len(v))+2 > x.max {
			return errJSONOver
		}
		x.out = appendBase64(x.out, v)
		x.ri++
		return nil
	}
	if err := x.need(int(n)); err != nil {
		return err
	}
	var ok bool
	if x.out, ok = appendJSONStringMax(x.out, x.src[x.pos:x.pos+int(n)], x.max); !ok {
		return errJSONOver
	}
	x.pos += int(n)
	return nil
}

func (x *b2j) structure() error {
	if err := x.enter(); err != nil {
		return err
	}
	x.out = append(x.out, '{')
	first := true
	for {
		if err := x.need(1); err != nil {
			return err
		}
		t := Type(x.src[x.pos])
		x.pos++
		if t == STOP {
			break
		}
		if err := x.need(2); err != nil {
			return err
		}
		id := int16(binary.BigEndian.Uint16(x.src[x.pos:]))
		x.pos += 2
		if len(x.out) > x.max {
			return errJSONOver
		}
		if !first {
			x.out = append(x.out, ',')
		}
		first = false
		x.int(int64(id), true)
		x.out = append(x.out, ":{"...)
		if err := x.tag(t); err != nil {
			return err
		}
		x.out = append(x.out, ':')
		if err := x.value(t, false); err != nil {
			return err
		}
		x.out = append(x.out, '}')
	}
	x.out = append(x.out, '}')
	x.depth--
	return nil
}

// count reads a container size; each element takes at least one byte of
// the input, which bounds the loop over a hostile count.
func (x *b2j) count() (int, error) {
	at := x.pos
	n, err := x.u32()
	if err != nil {
		return 0, err
	}
	switch {
	case int32(n) < 0:
		return 0, decodeErr(ErrNegativeSize, at, "")
	case int(n) > x.lim.MaxContainerSize:
		return 0, decodeErr(ErrSizeLimit, at, "container size")
	case int(n) > len(x.src)-x.pos:
		return 0, decodeErr(ErrTruncated, at, "container larger than input")
	}
	return int(n), nil
}

// container writes a list or set, ["tag",n,v1,...], or a map,
// ["ktag","vtag",n,{k1:v1,...}] (keys quoted).
func (x *b2j) container(isMap bool) error {
	if err := x.enter(); err != nil {
		return err
	}
	nt := 1 + btoi(isMap)
	if err := x.need(nt); err != nil {
		return err
	}
	tags := [2]Type{Type(x.src[x.pos]), Type(x.src[x.pos+nt-1])}
	x.pos += nt
	n, err := x.count()
	if err != nil {
		return err
	}
	x.out = append(x.out, '[')
	for i := range nt {
		if err := x.tag(tags[i]); err != nil {
			return err
		}
		x.out = append(x.out, ',')
	}
	x.out = strconv.AppendInt(x.out, int64(n), 10)
	if isMap {
		x.out = append(x.out, ",{"...)
	}
	for i := range n {
		if len(x.out) > x.max {
			return errJSONOver
		}
		if i > 0 || !isMap {
			x.out = append(x.out, ',')
		}
		if err := x.value(tags[0], isMap); err != nil {
			return err
		}
		if !isMap {
			continue
		}
		x.out = append(x.out, ':')
		if err := x.value(tags[1], false); err != nil {
			return err
		}
	}
	if isMap {
		x.out = append(x.out, '}')
	}
	x.out = append(x.out, ']')
	x.depth--
	return nil
}

// appendJSONDouble writes v as Apache's OutputF64 does: Go's shortest
// 'g' form, quoted as a map key; NaN and the infinities always quoted.
func appendJSONDouble(b []byte, v float64, key bool) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Infinity"`...)
	}
	if key {
		b = append(b, '"')
	}
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	if key {
		b = append(b, '"')
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendUUID writes the quoted 8-4-4-4-12 lower-case form (Apache's
// Tuuid.String).
func appendUUID(b, u []byte) []byte {
	b = append(b, '"')
	for i, c := range u[:16] {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return append(b, '"')
}

// appendBase64 writes a binary value quoted in padded standard base64, as
// Apache's WriteBinary does.
func appendBase64(b, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendJSONString quotes s exactly as encoding/json's Marshal does (which
// Apache's Go library uses): <, > and & escaped for HTML, control
// characters as \b \f \n \r \t or \u00XX, U+2028 and U+2029 escaped, each
// byte of invalid UTF-8 replaced by \ufffd.
func appendJSONString(b, s []byte) []byte {
	b, _ = appendJSONStringMax(b, s, math.MaxInt)
	return b
}

// appendJSONStringMax is appendJSONString that stops (false) where b's
// length would pass max: a string takes at least its bytes and quotes,
// and only escapes (the rare path, where it is checked) take more.
func appendJSONStringMax(b, s []byte, max int) ([]byte, bool) {
	if len(b) > max-len(s)-2 {
		return b, false
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			if len(b) > max-(len(s)-i)-1 { // the rest and the closing quote
				return b, false
			}
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			if len(b) > max-(len(s)-i)-1 { // the rest and the closing quote
				return b, false
			}
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			if len(b) > max-(len(s)-i)-1 { // the rest and the closing quote
				return b, false
			}
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
