package proto

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// j2b transcodes Apache's TJSONProtocol into the binary protocol. JSON is
// self-describing (type tags, field ids, sizes), so no schema is needed;
// only strings and binary values share one tag ("str"). A string keeps
// its unescaped JSON text in the binary form, so a binary value stays in
// base64 there until a BinaryReader in JSON mode decodes it in ReadBinary
// (readers know which fields are binary; the transcoder does not).
//
// Every value costs at least one byte of input and at most 8 of output
// (a 1-byte i64 or double), so the output is bounded by the input's size.
type j2b struct {
	in    []byte
	pos   int
	out   []byte
	depth int
	lim   *Limits
}

func (x *j2b) fail(sentinel error, detail string) error { return decodeErr(sentinel, x.pos, detail) }

func (x *j2b) syntax(detail string) error { return x.fail(ErrJSONSyntax, detail) }

// peek skips JSON whitespace (Apache's reader does) and returns the next
// byte.
func (x *j2b) peek() (byte, error) {
	for x.pos < len(x.in) {
		switch c := x.in[x.pos]; c {
		case ' ', '\t', '\n', '\r':
			x.pos++
		default:
			return c, nil
		}
	}
	return 0, x.fail(ErrTruncated, "")
}

func (x *j2b) expect(c byte) error {
	b, err := x.peek()
	if err != nil {
		return err
	}
	if b != c {
		return x.syntax("want " + strconv.QuoteRune(rune(c)) + ", have " + strconv.QuoteRune(rune(b)))
	}
	x.pos++
	return nil
}

// token returns a number's text. Apache quotes the numbers that are
// object keys (field ids, map keys) and NaN and the infinities; its reader
// takes quotes around any number, and so does this one.
func (x *j2b) token() ([]byte, error) {
	c, err := x.peek()
	if err != nil {
		return nil, err
	}
	quoted := c == '"'
	if quoted {
		x.pos++
	}
	start := x.pos
	for x.pos < len(x.in) {
		c := x.in[x.pos]
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c|0x20 >= 'a' && c|0x20 <= 'z' {
			x.pos++
			continue
		}
		break
	}
	tok := x.in[start:x.pos]
	if quoted {
		if x.pos >= len(x.in) {
			return nil, x.fail(ErrTruncated, "")
		}
		if x.in[x.pos] != '"' {
			return nil, x.syntax("unterminated quoted number")
		}
		x.pos++
	}
	if len(tok) == 0 {
		if x.pos >= len(x.in) {
			return nil, x.fail(ErrTruncated, "")
		}
		return nil, x.syntax("want a number")
	}
	return tok, nil
}

// int reads an integer that must fit in bits.
func (x *j2b) int(bits int) (int64, error) {
	at := x.pos
	tok, err := x.token()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(tok), 10, bits)
	if err != nil {
		return 0, decodeErr(ErrJSONSyntax, at, "not an i"+strconv.Itoa(bits))
	}
	return v, nil
}

func (x *j2b) double() (float64, error) {
	at := x.pos
	tok, err := x.token()
	if err != nil {
		return 0, err
	}
	switch string(tok) {
	case "NaN":
		return math.NaN(), nil
	case "Infinity", "+Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	for _, c := range tok {
		if c|0x20 != 'e' && (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' {
			return 0, decodeErr(ErrJSONSyntax, at, "not a double")
		}
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil && !math.IsInf(v, 0) { // out of range: ±Inf, as Apache reads it
		return 0, decodeErr(ErrJSONSyntax, at, "not a double")
	}
	return v, nil
}

// tag reads a quoted type name.
func (x *j2b) tag() (Type, error) {
	if err := x.expect('"'); err != nil {
		return 0, err
	}
	start := x.pos
	for x.pos < len(x.in) && x.in[x.pos] != '"' && x.pos-start < 4 {
		x.pos++
	}
	if x.pos >= len(x.in) {
		return 0, x.fail(ErrTruncated, "")
	}
	t := tagType(x.in[start:x.pos])
	if t == STOP || x.in[x.pos] != '"' {
		return 0, decodeErr(ErrBadType, start, "unknown type name")
	}
	x.pos++
	return t, nil
}

func tagType(b []byte) Type {
	switch string(b) {
	case "tf":
		return BOOL
	case "i8":
		return I8
	case "i16":
		return I16
	case "i32":
		return I32
	case "i64":
		return I64
	case "dbl":
		return DOUBLE
	case "str":
		return STRING
	case "rec":
		return STRUCT
	case "map":
		return MAP
	case "set":
		return SET
	case "lst":
		return LIST
	case "uid":
		return UUID
	}
	return STOP
}

func (x *j2b) enter() error {
	x.depth++
	if x.depth > x.lim.MaxDepth {
		return x.fail(ErrDepthLimit, "")
	}
	return nil
}

// message reads [1,"name",type,seqid,{body}] into a strict binary message.
func (x *j2b) message() error {
	if err := x.expect('['); err != nil {
		return err
	}
	at := x.pos
	v, err := x.int(32)
	if err != nil {
		return err
	}
	if v != 1 {
		return decodeErr(ErrBadVersion, at, "TJSONProtocol version "+strconv.FormatInt(v, 10))
	}
	if err := x.expect(','); err != nil {
		return err
	}
	head := len(x.out)
	x.out = append(x.out, 0, 0, 0, 0)
	if err := x.value(STRING); err != nil {
		return err
	}
	if err := x.expect(','); err != nil {
		return err
	}
	at = x.pos
	typ, err := x.int(8)
	if err != nil {
		return err
	}
	if typ < 0 {
		return decodeErr(ErrJSONSyntax, at, "negative message type")
	}
	binary.BigEndian.PutUint32(x.out[head:], binaryVersion1|uint32(typ))
	if err := x.expect(','); err != nil {
		return err
	}
	if err := x.value(I32); err != nil {
		return err
	}
	if err := x.expect(','); err != nil {
		return err
	}
	if err := x.value(STRUCT); err != nil {
		return err
	}
	return x.expect(']')
}

func (x *j2b) value(t Type) error {
	switch t {
	case BOOL, I8:
		bits := 8
		if t == BOOL {
			bits = 64
		}
		v, err := x.int(bits)
		if err != nil {
			return err
		}
		if t == BOOL && v != 0 {
			v = 1 // Apache reads any non-zero number as true
		}
		x.out = append(x.out, byte(v))
	case I16:
		v, err := x.int(16)
		if err != nil {
			return err
		}
		x.out = binary.BigEndian.AppendUint16(x.out, uint16(v))
	case I32:
		v, err := x.int(32)
		if err != nil {
			return err
		}
		x.out = binary.BigEndian.AppendUint32(x.out, uint32(v))
	case I64:
		v, err := x.int(64)
		if err != nil {
			return err
		}
		x.out = binary.BigEndian.AppendUint64(x.out, uint64(v))
	case DOUBLE:
		v, err := x.double()
		if err != nil {
			return err
		}
		x.out = binary.BigEndian.AppendUint64(x.out, math.Float64bits(v))
	case STRING:
		at := len(x.out)
		x.out = append(x.out, 0, 0, 0, 0)
		n, err := x.str(jsonMaxString(x.lim))
		if err != nil {
			return err
		}
		binary.BigEndian.PutUint32(x.out[at:], uint32(n))
	case UUID:
		return x.uuid()
	case STRUCT:
		return x.structure()
	case LIST, SET, MAP:
		return x.container(t == MAP)
	default:
		return x.fail(ErrBadType, t.String())
	}
	return nil
}

// str appends the unescaped text of a JSON string to out and returns its
// length. Escapes are JSON's; a \u escape of a UTF-16 surrogate must be
// a high one followed by a low one (a lone one is an error, as in
// Apache's C++, Java and Python readers); other bytes are copied as they
// are, as Apache's C++ reader does, so a peer's non-UTF-8 bytes survive.
func (x *j2b) str(maxLen int) (int, error) {
	if err := x.expect('"'); err != nil {
		return 0, err
	}
	start := len(x.out)
	for {
		i := x.pos
		for i < len(x.in) {
			if c := x.in[i]; c == '"' || c == '\\' || c < 0x20 {
				break
			}
			i++
		}
		x.out = append(x.out, x.in[x.pos:i]...)
		x.pos = i
		if len(x.out)-start > maxLen {
			return 0, x.fail(ErrSizeLimit, "string length")
		}
		if i >= len(x.in) {
			return 0, x.fail(ErrTruncated, "")
		}
		switch x.in[i] {
		case '"':
			x.pos++
			return len(x.out) - start, nil
		case '\\':
			if err := x.escape(); err != nil {
				return 0, err
			}
		default:
			return 0, x.syntax("control character in string")
		}
	}
}

func (x *j2b) escape() error {
	if x.pos+1 >= len(x.in) {
		return x.fail(ErrTruncated, "")
	}
	e := x.in[x.pos+1]
	x.pos += 2
	var c byte
	switch e {
	case '"', '\\', '/':
		c = e
	case 'b':
		c = '\b'
	case 'f':
		c = '\f'
	case 'n':
		c = '\n'
	case 'r':
		c = '\r'
	case 't':
		c = '\t'
	case 'u':
		r, err := x.hex4()
		if err != nil {
			return err
		}
		if utf16.IsSurrogate(r) {
			if r >= 0xdc00 {
				return x.syntax("UTF-16 low surrogate without a high one")
			}
			if x.pos+1 >= len(x.in) || x.in[x.pos] != '\\' || x.in[x.pos+1] != 'u' {
				return x.syntax("UTF-16 high surrogate without a low one")
			}
			x.pos += 2
			lo, err := x.hex4()
			if err != nil {
				return err
			}
			if lo < 0xdc00 || lo > 0xdfff {
				return x.syntax("UTF-16 high surrogate without a low one")
			}
			r = utf16.DecodeRune(r, lo)
		}
		x.out = utf8.AppendRune(x.out, r)
		return nil
	default:
		return x.syntax("bad escape")
	}
	x.out = append(x.out, c)
	return nil
}

func (x *j2b) hex4() (rune, error) {
	if len(x.in)-x.pos < 4 {
		return 0, x.fail(ErrTruncated, "")
	}
	var r rune
	for _, c := range x.in[x.pos : x.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			c = c | 0x20 - 'a' + 10
		default:
			return 0, x.syntax("bad \\u escape")
		}
		r = r<<4 | rune(c)
	}
	x.pos += 4
	return r, nil
}

// uuid reads the 8-4-4-4-12 hex form (Apache's ParseTuuid) into 16 bytes.
func (x *j2b) uuid() error {
	at, mark := x.pos, len(x.out)
	n, err := x.str(36)
	if err != nil || n != 36 {
		return decodeErr(ErrJSONSyntax, at, "malformed uuid")
	}
	s := x.out[mark:]
	var u [16]byte
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return decodeErr(ErrJSONSyntax, at, "malformed uuid")
			}
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return decodeErr(ErrJSONSyntax, at, "malformed uuid")
		}
		u[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	x.out = append(x.out[:mark], u[:]...)
	return nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		return c | 0x20 - 'a' + 10, true
	}
	return 0, false
}

func (x *j2b) structure() error {
	if err := x.enter(); err != nil {
		return err
	}
	if err := x.expect('{'); err != nil {
		return err
	}
	c, err := x.peek()
	if err != nil {
		return err
	}
	if c == '}' {
		x.pos++
	} else {
		for {
			id, err := x.int(16)
			if err != nil {
				return err
			}
			if err := x.expect(':'); err != nil {
				return err
			}
			if err := x.expect('{'); err != nil {
				return err
			}
			t, err := x.tag()
			if err != nil {
				return err
			}
			if err := x.expect(':'); err != nil {
				return err
			}
			x.out = append(x.out, byte(t), byte(uint16(id)>>8), byte(id))
			if err := x.value(t); err != nil {
				return err
			}
			if err := x.expect('}'); err != nil {
				return err
			}
			if c, err = x.peek(); err != nil {
				return err
			}
			x.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				x.pos--
				return x.syntax("want ',' or '}' after a field")
			}
		}
	}
	x.out = append(x.out, byte(STOP))
	x.depth--
	return nil
}

// count reads a container size, bounded by the limits and by the input
// left (every element takes at least two bytes of it, the value and a
// separator), so a hostile count costs nothing before it fails.
func (x *j2b) count() (int, error) {
	at := x.pos
	n, err := x.int(64)
	if err != nil {
		return 0, err
	}
	switch {
	case n < 0:
		return 0, decodeErr(ErrNegativeSize, at, "")
	case n > int64(x.lim.MaxContainerSize) || n > math.MaxInt32:
		return 0, decodeErr(ErrSizeLimit, at, "container size")
	case n > int64(len(x.in)-x.pos)/2:
		return 0, decodeErr(ErrTruncated, at, "container larger than input")
	}
	return int(n), nil
}

// container reads a list or set, ["tag",n,v1,...], or a map,
// ["ktag","vtag",n,{k1:v1,...}].
func (x *j2b) container(isMap bool) error {
	if err := x.enter(); err != nil {
		return err
	}
	if err := x.expect('['); err != nil {
		return err
	}
	var tags [2]Type
	for i := range 1 + btoi(isMap) {
		t, err := x.tag()
		if err != nil {
			return err
		}
		if err := x.expect(','); err != nil {
			return err
		}
		x.out = append(x.out, byte(t))
		tags[i] = t
	}
	n, err := x.count()
	if err != nil {
		return err
	}
	x.out = binary.BigEndian.AppendUint32(x.out, uint32(n))
	if isMap {
		if err := x.expect(','); err != nil {
			return err
		}
		if err := x.expect('{'); err != nil {
			return err
		}
	}
	for i := range n {
		if i > 0 || !isMap {
			if err := x.expect(','); err != nil {
				return err
			}
		}
		if err := x.value(tags[0]); err != nil {
			return err
		}
		if !isMap {
			continue
		}
		if err := x.expect(':'); err != nil {
			return err
		}
		if err := x.value(tags[1]); err != nil {
			return err
		}
	}
	if isMap {
		if err := x.expect('}'); err != nil {
			return err
		}
	}
	x.depth--
	return x.expect(']')
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// jsonMaxString bounds a JSON string's text: a string or a binary value's
// base64, whose decoded bytes MaxStringLength bounds (the reader checks
// each against its own bound once it knows which it is).
func jsonMaxString(lim *Limits) int {
	return base64.StdEncoding.EncodedLen(min(lim.MaxStringLength, math.MaxInt32/2))
}

// decodeBase64 decodes a binary value's text as Apache's reader does:
// standard alphabet, padding optional.
func decodeBase64(src []byte, pos int) ([]byte, error) {
	for i := 0; i < 2 && len(src) > 0 && src[len(src)-1] == '='; i++ {
		src = src[:len(src)-1]
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(len(src)))
	n, err := base64.RawStdEncoding.Decode(out, src)
	if err != nil {
		return nil, decodeErr(ErrJSONSyntax, pos, "bad base64")
	}
	return out[:n], nil
}
