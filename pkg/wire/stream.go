package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Format is the plain-Thrift encoding of one connection.
type Format struct {
	Proto  proto.Protocol
	Framed bool
	// Header: Apache's THeader transport (framed; Proto is the protocol
	// of the last message read, each frame names its own).
	Header bool
	// Outer (with Header): each THeader frame travels inside one more
	// 4-byte frame, as Apache's THeaderProtocol over TFramedTransport
	// writes it: `LL+4 | LL | 0F FF ...`.
	Outer bool
}

func (f Format) String() string {
	if f.Header && f.Outer {
		return "framed-theader"
	}
	if f.Header {
		return "theader"
	}
	if f.Framed {
		return "framed-" + f.Proto.String()
	}
	return "unframed-" + f.Proto.String()
}

const (
	binaryMagic  = 0x80
	compactMagic = 0x82
)

// ErrGarbage is returned when the first bytes of a stream are no Thrift.
var ErrGarbage = fmt.Errorf("wire: not a thrift stream: %w", proto.ErrInvalidData)

// Detect peeks at the first bytes of a fresh stream and tells its format:
// strict binary starts 0x80 0x01, compact 0x82, TJSONProtocol '[', and
// framed streams start with a 4-byte length followed by one of those,
// THeader frames with a length followed by the magic 0x0FFF. Nothing is
// consumed.
func Detect(br *bufio.Reader) (Format, error) {
	b, err := br.Peek(1)
	if err != nil {
		return Format{}, err
	}
	switch b[0] {
	case binaryMagic:
		if b, err = br.Peek(2); err != nil {
			return Format{}, err
		}
		if b[1] != 0x01 {
			return Format{}, ErrGarbage
		}
		return Format{Proto: proto.Binary}, nil
	case compactMagic:
		return Format{Proto: proto.Compact}, nil
	case jsonStart: // as a frame length: over 1.5 GB, never sent
		return Format{Proto: proto.JSON}, nil
	}
	if b, err = br.Peek(5); err != nil {
		return Format{}, err
	}
	if b[4] == 0 {
		return detectFramedTHeader(br)
	}
	switch b[4] {
	case binaryMagic:
		return Format{Proto: proto.Binary, Framed: true}, nil
	case compactMagic:
		return Format{Proto: proto.Compact, Framed: true}, nil
	case jsonStart:
		return Format{Proto: proto.JSON, Framed: true}, nil
	case THeaderMagic >> 8:
		if b, err = br.Peek(6); err != nil {
			return Format{}, err
		}
		if IsTHeader(b[4:]) {
			return Format{Proto: proto.Binary, Framed: true, Header: true}, nil
		}
	}
	return Format{}, ErrGarbage
}

// detectFramedTHeader tells a THeader frame inside a frame (the outer
// length four more than the inner one, then the THeader magic) from
// garbage; the stream's fifth byte, the inner length's first, was 0.
func detectFramedTHeader(br *bufio.Reader) (Format, error) {
	// The lengths first: a stream whose first eight bytes cannot open a
	// THeader frame in a frame (eight zeros, say) is garbage at once,
	// not a connection held open waiting for the magic.
	b, err := br.Peek(8)
	if err != nil {
		return Format{}, err
	}
	outer, inner := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	if outer != inner+4 || inner < theaderMetaLen {
		return Format{}, ErrGarbage
	}
	if b, err = br.Peek(10); err != nil {
		return Format{}, err
	}
	if !IsTHeader(b[8:]) {
		return Format{}, ErrGarbage
	}
	return Format{Proto: proto.Binary, Framed: true, Header: true, Outer: true}, nil
}

// PlainFrameHead is the number of length bytes a framed plain message of
// format f starts with (0 unframed, 8 for a THeader frame in a frame);
// SealPlainFrame fills them in.
func PlainFrameHead(f Format) int {
	switch {
	case f.Outer:
		return 8
	case f.Framed:
		return 4
	}
	return 0
}

// SealPlainFrame writes the frame lengths at the start of b, a framed
// plain message of format f followed by extra bytes sent apart (large
// values sent by reference).
func SealPlainFrame(f Format, b []byte, extra int) {
	n := uint32(len(b) + extra)
	switch {
	case f.Outer:
		binary.BigEndian.PutUint32(b, n-4)
		binary.BigEndian.PutUint32(b[4:], n-8)
	case f.Framed:
		binary.BigEndian.PutUint32(b, n-4)
	}
}

// Charge admits n more bytes of the message being read before its buffer
// grows to hold them (a server's request memory budget); an error stops
// the read. It is asked for messages of ChargeMin bytes or more only:
// once for a frame whose length is known, the whole frame, before the
// payload is read; for an unframed message in steps of chargeStep as the
// scan passes ChargeMin (its buffer grows by doubling, so it may hold up
// to twice what was charged).
type Charge func(n int) error

// ChargeMin is the message size from which a Charge is asked.
const ChargeMin = 64 << 10

const chargeStep = ChargeMin

// ChargeError is a Charge's refusal; the frame it was asked for (Size
// bytes, length field and header included) is still unread, so a reader
// may skip it (Discard) and go on.
type ChargeError struct {
	Err  error
	Size int
}

func (e *ChargeError) Error() string { return e.Err.Error() }
func (e *ChargeError) Unwrap() error { return e.Err }

// ReadMessage reads one whole plain-Thrift message of format f from br,
// appending its bytes (without the frame length) to dst[:0].
func ReadMessage(br *bufio.Reader, f Format, dst []byte, lim *proto.Limits) ([]byte, error) {
	return ReadMessageCharged(br, f, dst, lim, nil)
}

// ReadMessageCharged is ReadMessage asking charge (if not nil) before
// buffering large messages. A framed message charge refused is left
// unread but for its 4-byte length (ChargeError.Size then counts the
// payload only).
func ReadMessageCharged(br *bufio.Reader, f Format, dst []byte, lim *proto.Limits, charge Charge) ([]byte, error) {
	if lim == nil {
		lim = &proto.DefaultLimits
	}
	if f.Framed {
		var lb [4]byte
		if _, err := io.ReadFull(br, lb[:]); err != nil {
			return dst[:0], err
		}
		n := binary.BigEndian.Uint32(lb[:])
		if int64(n) > int64(lim.MaxMessageSize) {
			return dst[:0], fmt.Errorf("%w: frame of %d bytes", ErrFrameTooLarge, n)
		}
		var out []byte
		var err error
		if charge != nil && n >= ChargeMin {
			if err := charge(int(n)); err != nil {
				return dst[:0], &ChargeError{Err: err, Size: int(n)}
			}
			out, err = readFull(br, sized(dst[:0], int(n)), int(n))
		} else {
			out, err = readFull(br, dst[:0], int(n))
		}
		if err == nil && f.Outer {
			out, err = unwrapInner(out)
		}
		return out, err
	}
	if _, err := br.Peek(1); err != nil {
		return dst[:0], err // io.EOF at a message boundary is a clean end
	}
	s := scanner{br: br, out: dst[:0], lim: lim, compact: f.Proto == proto.Compact, charge: charge, charged: ChargeMin}
	var err error
	if f.Proto == proto.JSON {
		err = scanJSON(&s)
	} else {
		err = s.message()
	}
	return s.out, err
}

// unwrapInner takes the inner frame length off a THeader frame that came
// in a frame: the two lengths must agree.
func unwrapInner(b []byte) ([]byte, error) {
	if len(b) < 4 || binary.BigEndian.Uint32(b) != uint32(len(b)-4) {
		return b[:0], fmt.Errorf("%w: inner frame length does not match its outer frame of %d bytes", ErrTHeader, len(b))
	}
	n := copy(b, b[4:])
	return b[:n], nil
}

// Discard skips n bytes of br (a refused frame).
func Discard(br *bufio.Reader, n int) error {
	_, err := br.Discard(n)
	return err
}

// sized makes sure dst (empty) can hold n bytes without growing: the
// memory of a charged message was admitted whole, and growing a buffer
// step by step would leave up to as much again behind as garbage.
func sized(dst []byte, n int) []byte {
	if cap(dst) >= n {
		return dst
	}
	if n <= maxPooledBuf {
		return growInto(dst, n)
	}
	switch c := cap(dst); {
	case c >= largeMin:
		putLarge(dst[:0])
	case c > 0:
		small := dst[:0]
		bufPool.Put(&small)
	}
	return make([]byte, 0, n)
}

// FrameBuffered tells whether br holds the next HatRPC frame whole, by
// its length field alone (the header is not checked): reading it cannot
// wait for the peer.
func FrameBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n < lenFieldSize {
		return false
	}
	b, _ := br.Peek(lenFieldSize) // buffered: cannot fail
	return uint64(n) >= lenFieldSize+uint64(binary.BigEndian.Uint32(b))
}

// ReadFrame reads one HatRPC frame; the returned slice holds the header
// followed by the payload (appended to dst[:0]).
func ReadFrame(br *bufio.Reader, dst []byte, maxPayload int) (Header, []byte, error) {
	return ReadFrameFrom(br, nil, dst, maxPayload)
}

// ReadFrameFrom is ReadFrame for a br that reads from raw: a large frame's
// bytes beyond what br has buffered are read from raw straight into dst.
// Through br the frame's last bytes (less than br's buffer) would be read
// into the buffer and copied again: up to a quarter of a 128 KiB frame,
// 3.8 % of the CPU of 128 KiB echoes at 64 callers.
func ReadFrameFrom(br *bufio.Reader, raw io.Reader, dst []byte, maxPayload int) (Header, []byte, error) {
	return ReadFrameCharged(br, raw, dst, maxPayload, nil)
}

// ReadFrameCharged is ReadFrameFrom asking charge (if not nil) for a
// frame of ChargeMin bytes or more before reading its payload; a refused
// frame is left unread (ChargeError).
func ReadFrameCharged(br *bufio.Reader, raw io.Reader, dst []byte, maxPayload int, charge Charge) (Header, []byte, error) {
	hb, err := br.Peek(HeaderSize)
	if err != nil {
		if err == bufio.ErrBufferFull {
			err = ErrBadFrame
		}
		return Header{}, dst[:0], err
	}
	h, err := DecodeHeader(hb, maxPayload)
	if err != nil {
		return h, dst[:0], err
	}
	n := HeaderSize + h.PayloadLen()
	if n <= br.Buffered() {
		out, err := TakeFrame(br, &h, dst, charge)
		return h, out, err
	}
	buf, err := frameBuf(dst, n, charge)
	if err != nil {
		return h, buf, err
	}
	k := n // bytes read through br
	if raw != nil && n >= largeMin {
		k = min(n, br.Buffered())
	}
	out, err := readFull(br, buf, k)
	if err == nil && k < n {
		out, err = readFullAhead(raw, out, n-k)
	}
	return h, out, err
}

// TakeFrame is ReadFrameCharged for a frame br holds whole, whose header
// h the caller decoded (DecodeHeader, with its limit) from br's next
// bytes: one copy out of br's buffer, not readFull's way through
// io.ReadFull and bufio.Reader.Read (~200 instructions a frame), and no
// second decode. The frame must fit br's buffer (else bufio.ErrBufferFull).
func TakeFrame(br *bufio.Reader, h *Header, dst []byte, charge Charge) ([]byte, error) {
	n := HeaderSize + h.PayloadLen()
	buf, err := frameBuf(dst, n, charge)
	if err != nil {
		return buf, err
	}
	b, err := br.Peek(n)
	if err != nil {
		return buf, err
	}
	buf = append(buf, b...)
	_, _ = br.Discard(n)
	return buf, nil
}

// frameBuf returns dst emptied, with room for a frame of n bytes,
// asking charge (if not nil) for a frame of ChargeMin bytes or more.
func frameBuf(dst []byte, n int, charge Charge) ([]byte, error) {
	if charge != nil && n >= ChargeMin {
		if err := charge(n); err != nil {
			return dst[:0], &ChargeError{Err: err, Size: n}
		}
		return sized(dst[:0], n), nil
	}
	return growInto(dst[:0], n), nil
}

// readFull appends exactly n bytes from br to dst, growing it in steps so a
// lying length cannot make us allocate before the bytes actually arrive.
func readFull(br io.Reader, dst []byte, n int) ([]byte, error) {
	const step = 1 << 20
	for n > 0 {
		k := min(n, step)
		off := len(dst)
		dst = grow(dst, k)
		if _, err := io.ReadFull(br, dst[off:off+k]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return dst[:off], err
		}
		n -= k
	}
	return dst, nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*cap(b)+n)
	copy(nb, b)
	return nb
}

// scanner copies one unframed message from a stream by walking its structure,
// since unframed Thrift carries no length.
type scanner struct {
	br      *bufio.Reader
	out     []byte
	lim     *proto.Limits
	compact bool
	depth   int
	charge  Charge
	charged int // bytes admitted so far (the first ChargeMin need none)
}

func (s *scanner) take(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: negative length", proto.ErrNegativeSize)
	}
	if len(s.out)+n > s.lim.MaxMessageSize {
		return nil, fmt.Errorf("%w: message over %d bytes", ErrFrameTooLarge, s.lim.MaxMessageSize)
	}
	if s.charge != nil && len(s.out)+n > s.charged {
		// Admitted ahead in steps, the first one covering the bytes
		// scanned so far too.
		want := min((len(s.out)+n+chargeStep-1)/chargeStep*chargeStep, s.lim.MaxMessageSize)
		from := s.charged
		if from == ChargeMin {
			from = 0
		}
		if err := s.charge(want - from); err != nil {
			return nil, err
		}
		s.charged = want
	}
	off := len(s.out)
	var err error
	s.out, err = readFull(s.br, s.out, n)
	if err != nil {
		return nil, err
	}
	return s.out[off:], nil
}

func (s *scanner) byte() (byte, error) {
	b, err := s.take(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

// varint reads a varint within encoding/binary's limits, which the
// decoders keep: at most 10 bytes, the tenth 0 or 1. A scanner laxer than
// the decoder would frame a message that then fails to decode (a fuzzed
// i32 of 10 bytes, the tenth 0x30, did).
func (s *scanner) varint() (uint64, error) {
	var v uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		b, err := s.byte()
		if err != nil {
			return 0, err
		}
		if b < 0x80 {
			if i == binary.MaxVarintLen64-1 && b > 1 {
				break
			}
			return v | uint64(b)<<(7*i), nil
		}
		v |= uint64(b&0x7f) << (7 * i)
	}
	return 0, fmt.Errorf("%w: varint too long", proto.ErrInvalidData)
}

func (s *scanner) i32() (int32, error) {
	b, err := s.take(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

func (s *scanner) checkLen(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: %d", proto.ErrNegativeSize, n)
	}
	if n > int64(s.lim.MaxStringLength) {
		return fmt.Errorf("%w: string of %d bytes", proto.ErrSizeLimit, n)
	}
	return nil
}

func (s *scanner) checkCount(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: %d", proto.ErrNegativeSize, n)
	}
	if n > int64(s.lim.MaxContainerSize) {
		return fmt.Errorf("%w: container of %d elements", proto.ErrSizeLimit, n)
	}
	return nil
}

func (s *scanner) message() error {
	if s.compact {
		b, err := s.take(2)
		if err != nil {
			return err
		}
		if b[0] != compactMagic || b[1]&0x1f != 1 {
			return fmt.Errorf("%w: compact header %x", proto.ErrBadVersion, b)
		}
		seq, err := s.varint()
		if err != nil {
			return err
		}
		if seq > 0xffffffff {
			return fmt.Errorf("%w: seqid varint", proto.ErrInvalidData)
		}
		n, err := s.varint()
		if err != nil {
			return err
		}
		if err := s.checkLen(int64(n)); err != nil {
			return err
		}
		if _, err := s.take(int(n)); err != nil {
			return err
		}
		return s.skipCompact(12)
	}
	v, err := s.i32()
	if err != nil {
		return err
	}
	if uint32(v)&0xffff0000 != 0x80010000 {
		return fmt.Errorf("%w: binary header %08x", proto.ErrBadVersion, uint32(v))
	}
	n, err := s.i32()
	if err != nil {
		return err
	}
	if err := s.checkLen(int64(n)); err != nil {
		return err
	}
	if _, err := s.take(int(n) + 4); err != nil { // name + seqid
		return err
	}
	return s.skipBinary(proto.STRUCT)
}

func (s *scanner) enter() error {
	s.depth++
	if s.depth > s.lim.MaxDepth {
		return fmt.Errorf("%w: nesting over %d", proto.ErrDepthLimit, s.lim.MaxDepth)
	}
	return nil
}

func (s *scanner) skipBinary(t proto.Type) error {
	switch t {
	case proto.BOOL, proto.I8:
		_, err := s.take(1)
		return err
	case proto.I16:
		_, err := s.take(2)
		return err
	case proto.I32:
		_, err := s.take(4)
		return err
	case proto.I64, proto.DOUBLE:
		_, err := s.take(8)
		return err
	case proto.UUID:
		_, err := s.take(16)
		return err
	case proto.STRING:
		n, err := s.i32()
		if err != nil {
			return err
		}
		if err := s.checkLen(int64(n)); err != nil {
			return err
		}
		_, err = s.take(int(n))
		return err
	case proto.STRUCT:
		if err := s.enter(); err != nil {
			return err
		}
		for {
			ft, err := s.byte()
			if err != nil {
				return err
			}
			if proto.Type(ft) == proto.STOP {
				break
			}
			if _, err := s.take(2); err != nil {
				return err
			}
			if err := s.skipBinary(proto.Type(ft)); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case proto.LIST, proto.SET:
		et, err := s.byte()
		if err != nil {
			return err
		}
		n, err := s.i32()
		if err != nil {
			return err
		}
		return s.elemsBinary(int64(n), proto.Type(et))
	case proto.MAP:
		kv, err := s.take(2)
		if err != nil {
			return err
		}
		kt, vt := proto.Type(kv[0]), proto.Type(kv[1])
		n, err := s.i32()
		if err != nil {
			return err
		}
		if err := s.checkCount(int64(n)); err != nil {
			return err
		}
		if err := s.enter(); err != nil {
			return err
		}
		for i := int32(0); i < n; i++ {
			if err := s.skipBinary(kt); err != nil {
				return err
			}
			if err := s.skipBinary(vt); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	}
	return fmt.Errorf("%w: %d", proto.ErrBadType, t)
}

func (s *scanner) elemsBinary(n int64, et proto.Type) error {
	if err := s.checkCount(n); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := int64(0); i < n; i++ {
		if err := s.skipBinary(et); err != nil {
			return err
		}
	}
	s.depth--
	return nil
}

// Compact type ids (they differ from the binary ones).
const (
	ctTrue, ctFalse, ctI8, ctI16, ctI32, ctI64, ctDouble, ctBinary, ctList, ctSet, ctMap, ctStruct, ctUUID = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
)

// skipCompact skips one value of compact type ct; inList marks bools that
// are stored as a byte (inside containers) rather than in the field header.
func (s *scanner) skipCompact(ct byte) error {
	switch ct {
	case ctTrue, ctFalse, ctI8:
		_, err := s.take(1)
		return err
	case ctI16, ctI32, ctI64:
		_, err := s.varint()
		return err
	case ctDouble:
		_, err := s.take(8)
		return err
	case ctUUID:
		_, err := s.take(16)
		return err
	case ctBinary:
		n, err := s.varint()
		if err != nil {
			return err
		}
		if n > 1<<31 {
			return fmt.Errorf("%w: string of %d bytes", proto.ErrSizeLimit, n)
		}
		if err := s.checkLen(int64(n)); err != nil {
			return err
		}
		_, err = s.take(int(n))
		return err
	case ctStruct:
		if err := s.enter(); err != nil {
			return err
		}
		for {
			h, err := s.byte()
			if err != nil {
				return err
			}
			if h == 0 {
				break
			}
			if h>>4 == 0 { // long form: explicit zigzag i16 field id
				if _, err := s.varint(); err != nil {
					return err
				}
			}
			ft := h & 0x0f
			if ft == ctTrue || ft == ctFalse {
				continue // value folded into the header
			}
			if err := s.skipCompact(ft); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case ctList, ctSet:
		h, err := s.byte()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = s.varint(); err != nil {
				return err
			}
		}
		return s.elemsCompact(n, h&0x0f, 0, false)
	case ctMap:
		n, err := s.varint()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		kv, err := s.byte()
		if err != nil {
			return err
		}
		return s.elemsCompact(n, kv>>4, kv&0x0f, true)
	}
	return fmt.Errorf("%w: compact type %d", proto.ErrBadType, ct)
}

func (s *scanner) elemsCompact(n uint64, kt, vt byte, isMap bool) error {
	if n > 1<<31 {
		return fmt.Errorf("%w: container of %d elements", proto.ErrSizeLimit, n)
	}
	if err := s.checkCount(int64(n)); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := uint64(0); i < n; i++ {
		if err := s.skipCompact(kt); err != nil {
			return err
		}
		if isMap {
			if err := s.skipCompact(vt); err != nil {
				return err
			}
		}
	}
	s.depth--
	return nil
}
