package proto

import (
	"encoding/binary"
)

// Scanner finds the end of one unframed message in a growing buffer without
// decoding values. It is resumable: when the buffer ends mid-message Scan
// returns ErrTruncated plus the minimal total length known to be needed, and
// the next Scan (on the same buffer, extended) continues where it stopped,
// so scanning a message costs O(len) however it arrives.
type Scanner struct {
	p      Protocol
	lim    *Limits
	pos    int
	inBody bool
	stack  []scanFrame
}

type scanKind uint8

const (
	scanNone scanKind = iota // a primitive: nothing to push
	scanStruct
	scanList
	scanMap
)

type scanFrame struct {
	kind    scanKind
	a, b    Type // list: a elem; map: a key, b val
	valNext bool // map: next item is a value
	n       int  // list/map: items (map: pairs) left
	pending Type // value type whose bytes are still to be consumed
}

// NewScanner returns a scanner for protocol p; nil lim means DefaultLimits.
func NewScanner(p Protocol, lim *Limits) *Scanner {
	s := &Scanner{}
	s.Reset(p, lim)
	return s
}

// Reset prepares the scanner for a new message.
func (s *Scanner) Reset(p Protocol, lim *Limits) {
	s.p, s.lim, s.pos, s.inBody = p, limitsOrDefault(lim), 0, false
	s.stack = s.stack[:0]
}

// errNeed reports a truncation and the minimal total length required.
func (s *Scanner) errNeed(need, have int) (int, int, error) {
	if need <= have {
		need = have + 1
	}
	if need > s.lim.MaxMessageSize {
		return 0, need, decodeErr(ErrSizeLimit, s.pos, "message size")
	}
	return 0, need, decodeErr(ErrTruncated, have, "")
}

// Scan looks for the end of the message in buf (which must start with the
// bytes passed to earlier calls since Reset). It returns the message length,
// or need (> len(buf)) with an error matching ErrTruncated.
func (s *Scanner) Scan(buf []byte) (n int, need int, err error) {
	if s.p != Binary && s.p != Compact {
		return 0, 0, ErrBadProtocol
	}
	if len(buf) > s.lim.MaxMessageSize {
		buf = buf[:s.lim.MaxMessageSize]
	}
	if !s.inBody {
		var pos int
		var err error
		if s.p == Binary {
			r := BinaryReader{buf: buf, lim: s.lim}
			_, _, _, err = r.ReadMessageBegin()
			pos = r.pos
		} else {
			r := CompactReader{buf: buf, lim: s.lim}
			_, _, _, err = r.ReadMessageBegin()
			pos = r.pos
		}
		if err != nil {
			if isTruncated(err) {
				return s.errNeed(s.headerNeed(buf), len(buf))
			}
			return 0, 0, err
		}
		s.pos, s.inBody = pos, true
		s.stack = append(s.stack[:0], scanFrame{kind: scanStruct})
	}
	for len(s.stack) > 0 {
		top := len(s.stack) - 1
		f := &s.stack[top]
		t := f.pending
		if t == STOP {
			switch f.kind {
			case scanStruct:
				ft, np, err := s.fieldHeader(buf)
				if err != nil {
					return s.fail(err, np, len(buf))
				}
				s.pos = np
				if ft == STOP {
					s.stack = s.stack[:top]
					continue
				}
				if s.p == Compact && ft == BOOL {
					continue // value lives in the header
				}
				t = ft
			case scanList:
				if f.n == 0 {
					s.stack = s.stack[:top]
					continue
				}
				if sz := s.fixedSize(f.a); sz > 0 {
					// n*sz fits: checkCount bounded it by MaxMessageSize.
					if end := s.pos + f.n*sz; end <= len(buf) {
						s.pos, f.n = end, 0
					} else {
						return s.errNeed(end, len(buf))
					}
					continue
				}
				f.n--
				t = f.a
			case scanMap:
				if f.n == 0 {
					s.stack = s.stack[:top]
					continue
				}
				if f.valNext {
					t, f.valNext = f.b, false
					f.n--
				} else {
					t, f.valNext = f.a, true
				}
			}
			if end := s.quickSkip(buf, t); end > 0 {
				s.pos = end
				continue
			}
			f.pending = t
		}
		np, child, err := s.value(buf, t)
		if err != nil {
			return s.fail(err, np, len(buf))
		}
		s.pos = np
		s.stack[top].pending = STOP
		if child.kind == scanStruct || child.kind != scanNone && child.n > 0 {
			if len(s.stack) >= s.lim.MaxDepth {
				return 0, 0, decodeErr(ErrDepthLimit, s.pos, "")
			}
			s.stack = append(s.stack, child)
		}
	}
	return s.pos, 0, nil
}

// quickSkip returns the end of a primitive value of type t at s.pos when it
// lies wholly in buf and is valid, else 0 so the general path (which knows
// how to report needs and errors) takes over.
func (s *Scanner) quickSkip(buf []byte, t Type) int {
	p := s.pos
	if s.p == Binary {
		if sz := binaryFixedSize(t); sz > 0 {
			if p+sz <= len(buf) {
				return p + sz
			}
			return 0
		}
		if t == STRING && p+4 <= len(buf) {
			n := int32(binary.BigEndian.Uint32(buf[p:]))
			if n >= 0 && int(n) <= s.lim.MaxStringLength && p+4+int(n) <= len(buf) {
				return p + 4 + int(n)
			}
		}
		return 0
	}
	switch t {
	case I8, BOOL:
		if p < len(buf) {
			return p + 1
		}
	case DOUBLE:
		if p+8 <= len(buf) {
			return p + 8
		}
	case UUID:
		if p+16 <= len(buf) {
			return p + 16
		}
	case I16, I32, I64:
		if _, n := binary.Uvarint(buf[p:]); n > 0 {
			return p + n
		}
	case STRING:
		if u, n := binary.Uvarint(buf[p:]); n > 0 {
			l := int32(uint32(u))
			if l >= 0 && int(l) <= s.lim.MaxStringLength && p+n+int(l) <= len(buf) {
				return p + n + int(l)
			}
		}
	}
	return 0
}

func isTruncated(err error) bool {
	de, ok := err.(*DecodeError)
	return ok && de.Err == ErrTruncated
}

// fail turns a truncation into (need, ErrTruncated); np carries the need.
func (s *Scanner) fail(err error, np, have int) (int, int, error) {
	if isTruncated(err) {
		return s.errNeed(np, have)
	}
	return 0, 0, err
}

// headerNeed estimates the bytes a truncated message header needs.
func (s *Scanner) headerNeed(buf []byte) int {
	if s.p == Binary && len(buf) >= 8 {
		v := int32(binary.BigEndian.Uint32(buf))
		if v < 0 {
			return 12 + int(int32(binary.BigEndian.Uint32(buf[4:])))
		}
		return 9 + int(v)
	}
	return len(buf) + 1
}

func (s *Scanner) fixedSize(t Type) int {
	if s.p == Binary {
		return binaryFixedSize(t)
	}
	switch t {
	case BOOL, I8:
		return 1
	case DOUBLE:
		return 8
	case UUID:
		return 16
	}
	return 0
}

// fieldHeader reads one field header at s.pos; on truncation the returned
// position is the need.
func (s *Scanner) fieldHeader(buf []byte) (Type, int, error) {
	p := s.pos
	if p >= len(buf) {
		return 0, p + 1, decodeErr(ErrTruncated, p, "")
	}
	if s.p == Binary {
		t := Type(buf[p])
		if t == STOP {
			return STOP, p + 1, nil
		}
		if !t.Valid() {
			return 0, 0, decodeErr(ErrBadType, p, t.String())
		}
		if p+3 > len(buf) {
			return 0, p + 3, decodeErr(ErrTruncated, p, "")
		}
		return t, p + 3, nil
	}
	b := buf[p]
	if b&0x0f == 0 {
		return STOP, p + 1, nil
	}
	t := fromCompact[b&0x0f]
	if t == 0xff {
		return 0, 0, decodeErr(ErrBadType, p, "")
	}
	if b>>4 != 0 {
		return t, p + 1, nil
	}
	_, n := binary.Uvarint(buf[p+1:])
	if n == 0 {
		return 0, len(buf) + 1, decodeErr(ErrTruncated, p, "")
	}
	if n < 0 {
		return 0, 0, decodeErr(ErrInvalidVarint, p, "")
	}
	return t, p + 1 + n, nil
}

// value consumes one value of type t at s.pos: primitives whole, containers
// and structs by their header, returning the frame to push.
func (s *Scanner) value(buf []byte, t Type) (int, scanFrame, error) {
	p := s.pos
	if s.p == Binary {
		return s.binaryValue(buf, p, t)
	}
	return s.compactValue(buf, p, t)
}

func (s *Scanner) countOK(at int, n int64, minElem int) error {
	if n < 0 {
		return decodeErr(ErrNegativeSize, at, "")
	}
	if n > int64(s.lim.MaxContainerSize) {
		return decodeErr(ErrSizeLimit, at, "container size")
	}
	if n*int64(minElem) > int64(s.lim.MaxMessageSize) {
		return decodeErr(ErrSizeLimit, at, "container larger than message limit")
	}
	return nil
}

func (s *Scanner) binaryValue(buf []byte, p int, t Type) (int, scanFrame, error) {
	trunc := func(need int) (int, scanFrame, error) {
		return need, scanFrame{}, decodeErr(ErrTruncated, p, "")
	}
	if sz := binaryFixedSize(t); sz > 0 {
		if p+sz > len(buf) {
			return trunc(p + sz)
		}
		return p + sz, scanFrame{}, nil
	}
	switch t {
	case STRING:
		if p+4 > len(buf) {
			return trunc(p + 4)
		}
		n := int32(binary.BigEndian.Uint32(buf[p:]))
		if n < 0 {
			return 0, scanFrame{}, decodeErr(ErrNegativeSize, p, "")
		}
		if int(n) > s.lim.MaxStringLength {
			return 0, scanFrame{}, decodeErr(ErrSizeLimit, p, "string length")
		}
		if end := p + 4 + int(n); end > len(buf) {
			return trunc(end)
		}
		return p + 4 + int(n), scanFrame{}, nil
	case STRUCT:
		return p, scanFrame{kind: scanStruct}, nil
	case LIST, SET:
		if p+5 > len(buf) {
			return trunc(p + 5)
		}
		e := Type(buf[p])
		n := int32(binary.BigEndian.Uint32(buf[p+1:]))
		if n != 0 && !e.Valid() {
			return 0, scanFrame{}, decodeErr(ErrBadType, p, "list element")
		}
		if err := s.countOK(p, int64(n), minOf(&binaryMinSize, e)); err != nil {
			return 0, scanFrame{}, err
		}
		return p + 5, scanFrame{kind: scanList, a: e, n: int(n)}, nil
	case MAP:
		if p+6 > len(buf) {
			return trunc(p + 6)
		}
		k, v := Type(buf[p]), Type(buf[p+1])
		n := int32(binary.BigEndian.Uint32(buf[p+2:]))
		if n != 0 && (!k.Valid() || !v.Valid()) {
			return 0, scanFrame{}, decodeErr(ErrBadType, p, "map key/value")
		}
		if err := s.countOK(p, int64(n), minOf(&binaryMinSize, k)+minOf(&binaryMinSize, v)); err != nil {
			return 0, scanFrame{}, err
		}
		return p + 6, scanFrame{kind: scanMap, a: k, b: v, n: int(n)}, nil
	}
	return 0, scanFrame{}, decodeErr(ErrBadType, p, t.String())
}

func (s *Scanner) uvarint(buf []byte, p int) (uint64, int, error) {
	v, n := binary.Uvarint(buf[p:])
	if n == 0 {
		return 0, len(buf) + 1, decodeErr(ErrTruncated, p, "")
	}
	if n < 0 {
		return 0, 0, decodeErr(ErrInvalidVarint, p, "")
	}
	return v, p + n, nil
}

func (s *Scanner) compactValue(buf []byte, p int, t Type) (int, scanFrame, error) {
	if sz := s.fixedSize(t); sz > 0 {
		if p+sz > len(buf) {
			return p + sz, scanFrame{}, decodeErr(ErrTruncated, p, "")
		}
		return p + sz, scanFrame{}, nil
	}
	switch t {
	case I16, I32, I64:
		_, np, err := s.uvarint(buf, p)
		return np, scanFrame{}, err
	case STRING:
		u, np, err := s.uvarint(buf, p)
		if err != nil {
			return np, scanFrame{}, err
		}
		n := int32(uint32(u))
		if n < 0 {
			return 0, scanFrame{}, decodeErr(ErrNegativeSize, p, "")
		}
		if int(n) > s.lim.MaxStringLength {
			return 0, scanFrame{}, decodeErr(ErrSizeLimit, p, "string length")
		}
		if end := np + int(n); end > len(buf) {
			return end, scanFrame{}, decodeErr(ErrTruncated, p, "")
		}
		return np + int(n), scanFrame{}, nil
	case STRUCT:
		return p, scanFrame{kind: scanStruct}, nil
	case LIST, SET:
		if p >= len(buf) {
			return p + 1, scanFrame{}, decodeErr(ErrTruncated, p, "")
		}
		b := buf[p]
		np := p + 1
		u := uint64(b >> 4)
		if u == 15 {
			var err error
			if u, np, err = s.uvarint(buf, np); err != nil {
				return np, scanFrame{}, err
			}
		}
		n := int32(uint32(u))
		e := fromCompact[b&0x0f]
		if n != 0 && (e == 0xff || e == STOP) {
			return 0, scanFrame{}, decodeErr(ErrBadType, p, "list element")
		}
		if err := s.countOK(p, int64(n), minOf(&compactMinSize, e)); err != nil {
			return 0, scanFrame{}, err
		}
		return np, scanFrame{kind: scanList, a: e, n: int(n)}, nil
	case MAP:
		u, np, err := s.uvarint(buf, p)
		if err != nil {
			return np, scanFrame{}, err
		}
		if u == 0 {
			return np, scanFrame{}, nil
		}
		if np >= len(buf) {
			return np + 1, scanFrame{}, decodeErr(ErrTruncated, p, "")
		}
		kv := buf[np]
		k, v := fromCompact[kv>>4], fromCompact[kv&0x0f]
		if k == 0xff || k == STOP || v == 0xff || v == STOP {
			return 0, scanFrame{}, decodeErr(ErrBadType, p, "map key/value")
		}
		n := int32(uint32(u))
		if err := s.countOK(p, int64(n), compactMinSize[k]+compactMinSize[v]); err != nil {
			return 0, scanFrame{}, err
		}
		return np + 1, scanFrame{kind: scanMap, a: k, b: v, n: int(n)}, nil
	}
	return 0, scanFrame{}, decodeErr(ErrBadType, p, t.String())
}

func minOf(tbl *[17]int, t Type) int {
	if int(t) < len(tbl) {
		return tbl[t]
	}
	return 0
}
