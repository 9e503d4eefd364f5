package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// THeader is Apache Thrift's header transport (doc/specs/HeaderFormat.md
// in Apache Thrift): a frame whose payload starts with the 16-bit magic
// 0x0FFF, 16 bits of flags, a 32-bit sequence id and a 16-bit header
// length in 4-byte words, then that header (protocol id, transforms, info
// key/value headers, zero padding), then the Thrift message.
const (
	THeaderMagic   = 0x0fff
	theaderMetaLen = 10 // magic, flags, seqid, header words
	// THeader protocol ids.
	theaderBinary  = 0
	theaderCompact = 2
	// TransformZlib is the only transform Apache's Go library (and this
	// one) supports; HMAC (2) and snappy (3) are refused.
	TransformZlib = 1
	infoKeyValue  = 1
)

// ErrTHeader matches every THeader decode failure (it wraps
// proto.ErrInvalidData).
var ErrTHeader = fmt.Errorf("wire: bad THeader: %w", proto.ErrInvalidData)

// ErrTHeaderTransform is the error for a transform this build does not
// implement; the peer gets it as an application exception.
var ErrTHeaderTransform = errors.New("wire: unsupported THeader transform")

// THeaderInfo is the decoded header of one THeader frame.
type THeaderInfo struct {
	Flags uint16
	Seqid int32
	Proto proto.Protocol
	Zlib  bool // the payload is zlib-compressed
	Info  metadata.MD
}

// IsTHeader tells whether a frame payload (after the 4-byte length) starts
// with the THeader magic.
func IsTHeader(b []byte) bool {
	return len(b) >= 2 && b[0] == THeaderMagic>>8 && b[1] == THeaderMagic&0xff
}

// ParseTHeaderHead decodes the header of a THeader frame b (the bytes
// after the 4-byte frame length) and returns it with the offset of the
// payload. Every count and length is checked against the bytes present,
// so a hostile header allocates no more than b's size. On error the
// returned info holds what was decoded (the seqid, to answer with).
func ParseTHeaderHead(b []byte) (THeaderInfo, int, error) {
	var h THeaderInfo
	if len(b) < theaderMetaLen {
		return h, 0, fmt.Errorf("%w: %d bytes, shorter than its fixed part", ErrTHeader, len(b))
	}
	if !IsTHeader(b) {
		return h, 0, fmt.Errorf("%w: magic %02x%02x", ErrTHeader, b[0], b[1])
	}
	h.Flags = binary.BigEndian.Uint16(b[2:])
	h.Seqid = int32(binary.BigEndian.Uint32(b[4:]))
	n := int(binary.BigEndian.Uint16(b[8:])) * 4
	if n > len(b)-theaderMetaLen {
		return h, 0, fmt.Errorf("%w: header of %d bytes in a frame of %d", ErrTHeader, n, len(b))
	}
	end := theaderMetaLen + n
	r := kvReader{b: b[theaderMetaLen:end]}
	pid, err := r.uvarint()
	if err != nil {
		return h, 0, err
	}
	switch pid {
	case theaderBinary:
		h.Proto = proto.Binary
	case theaderCompact:
		h.Proto = proto.Compact
	default:
		return h, 0, fmt.Errorf("%w: protocol id %d", ErrTHeader, pid)
	}
	nt, err := r.uvarint()
	if err != nil {
		return h, 0, err
	}
	if nt > uint64(len(r.b)) {
		return h, 0, fmt.Errorf("%w: %d transforms in %d bytes", ErrTHeader, nt, len(r.b))
	}
	for range nt {
		id, err := r.uvarint()
		if err != nil {
			return h, 0, err
		}
		if id != TransformZlib {
			return h, 0, fmt.Errorf("%w %d (only zlib, 1, is)", ErrTHeaderTransform, id)
		}
		h.Zlib = true
	}
	for len(r.b) > 0 {
		typ, err := r.uvarint()
		if err != nil {
			return h, 0, err
		}
		if typ != infoKeyValue {
			break // padding (0) or an info type Apache skips too
		}
		if h.Info, err = r.kv(h.Info); err != nil {
			return h, 0, err
		}
	}
	return h, end, nil
}

// ParseTHeader decodes a whole THeader frame b and returns its header and
// its Thrift message, inflated if it was compressed (never to more than
// maxSize bytes: a zlib bomb is refused, not expanded).
func ParseTHeader(b []byte, maxSize int) (THeaderInfo, []byte, error) {
	return ParseTHeaderCharged(b, maxSize, nil)
}

// ParseTHeaderCharged is ParseTHeader asking charge (if not nil) for the
// memory an inflated message takes beyond ChargeMin, once, before it is
// allocated (a small compressed frame may inflate to maxSize: the memory
// budget must see that, not the frame's size). The payload is inflated
// twice for that: once to learn its size, once into a buffer of exactly
// that size, so what was charged is all it takes. A refusal is a
// *ChargeError. On a refusal or an oversized payload the first bytes of
// the message are returned with the error: its header names whom to
// answer.
func ParseTHeaderCharged(b []byte, maxSize int, charge Charge) (THeaderInfo, []byte, error) {
	h, off, err := ParseTHeaderHead(b)
	if err != nil {
		return h, nil, err
	}
	if !h.Zlib {
		return h, b[off:], nil
	}
	zr, err := zlib.NewReader(bytes.NewReader(b[off:]))
	if err != nil {
		return h, nil, fmt.Errorf("%w: zlib: %v", ErrTHeader, err)
	}
	size := sizer{max: maxSize}
	_, err = io.Copy(&size, zr)
	if err == nil {
		err = zr.Close()
	}
	switch {
	case errors.Is(err, ErrFrameTooLarge):
		return h, size.head, err
	case err != nil:
		return h, nil, fmt.Errorf("%w: zlib: %v", ErrTHeader, err)
	}
	if charge != nil && size.n > ChargeMin {
		if err := charge(size.n - ChargeMin); err != nil {
			return h, size.head, &ChargeError{Err: err, Size: size.n - ChargeMin}
		}
	}
	if err := zr.(zlib.Resetter).Reset(bytes.NewReader(b[off:]), nil); err != nil {
		return h, nil, fmt.Errorf("%w: zlib: %v", ErrTHeader, err)
	}
	out := make([]byte, size.n)
	if _, err := io.ReadFull(zr, out); err != nil {
		return h, nil, fmt.Errorf("%w: zlib: %v", ErrTHeader, err)
	}
	return h, out, nil
}

// sizer counts an inflated payload, keeping its first bytes.
type sizer struct {
	n, max int
	head   []byte
}

const sizerHead = 512

func (w *sizer) Write(p []byte) (int, error) {
	if k := min(len(p), sizerHead-len(w.head)); k > 0 {
		w.head = append(w.head, p[:k]...)
	}
	w.n += len(p)
	if w.n > w.max {
		return 0, fmt.Errorf("%w: inflated THeader payload over %d bytes", ErrFrameTooLarge, w.max)
	}
	return len(p), nil
}

// AppendTHeaderHead appends the fixed part and header of a THeader frame
// (without the 4-byte frame length) for a payload in h.Proto; the payload
// follows. h.Zlib is not written: CompressTHeader adds it.
func AppendTHeaderHead(dst []byte, h *THeaderInfo, zlibbed bool) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, THeaderMagic)
	dst = binary.BigEndian.AppendUint16(dst, h.Flags)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Seqid))
	dst = append(dst, 0, 0) // header words, below
	hs := len(dst)
	pid := uint64(theaderBinary)
	if h.Proto == proto.Compact {
		pid = theaderCompact
	}
	dst = binary.AppendUvarint(dst, pid)
	if zlibbed {
		dst = append(dst, 1, TransformZlib)
	} else {
		dst = append(dst, 0)
	}
	if len(h.Info) > 0 {
		dst = append(dst, infoKeyValue)
		dst = AppendKV(dst, h.Info)
	}
	for (len(dst)-hs)%4 != 0 {
		dst = append(dst, 0)
	}
	binary.BigEndian.PutUint16(dst[start+8:], uint16((len(dst)-hs)/4))
	return dst
}

// THeaderHeadFits reports whether the header AppendTHeaderHead writes for
// md fits the 16-bit word count (256 KiB).
func THeaderHeadFits(md metadata.MD) bool {
	n := 16
	for k, v := range md {
		n += len(k) + len(v) + 20
	}
	return n <= 0xffff*4
}

// CompressTHeader zlib-compresses the payload of a THeader frame in b from
// off (what a request that came compressed is answered with).
func CompressTHeader(b []byte, off int) []byte {
	var out bytes.Buffer
	zw := zlib.NewWriter(&out)
	_, _ = zw.Write(b[off:])
	_ = zw.Close()
	return append(b[:off], out.Bytes()...)
}

// AppendKV appends headers as THeader info key/values: a varint count,
// then each key and value as a varint length and bytes. Keys go in sorted
// order so equal headers encode equally.
func AppendKV(dst []byte, md metadata.MD) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(md)))
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dst = appendStr(dst, k)
		dst = appendStr(dst, md[k])
	}
	return dst
}

// AppendKVExtra is AppendKV of md plus the pair k, v (k not in md), in no
// particular order: the client's per-call form, which allocates nothing.
func AppendKVExtra(dst []byte, md metadata.MD, k, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(md)+1))
	dst = appendStr(dst, k)
	dst = appendStr(dst, v)
	for mk, mv := range md {
		dst = appendStr(dst, mk)
		dst = appendStr(dst, mv)
	}
	return dst
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// ParseKV decodes what AppendKV wrote, all of b.
func ParseKV(b []byte) (metadata.MD, error) {
	r := kvReader{b: b}
	md, err := r.kv(nil)
	if err == nil && len(r.b) != 0 {
		err = fmt.Errorf("%w: %d bytes after the headers", ErrBadFrame, len(r.b))
	}
	return md, err
}

// MaxHeaders bounds the key/value pairs of one message's headers (a
// THeader frame's info lists together, or a HatRPC header block). Each
// pair becomes a map entry, tens of bytes however short it is on the wire,
// so the count is bounded apart from the frame's size.
const MaxHeaders = 1024

type kvReader struct {
	b     []byte
	pairs int // read so far, over all of a message's lists
}

func (r *kvReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, fmt.Errorf("%w: varint", ErrTHeader)
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *kvReader) str() (string, error) {
	n, err := r.uvarint()
	if err != nil {
		return "", err
	}
	if n > uint64(len(r.b)) {
		return "", fmt.Errorf("%w: string of %d bytes, %d left", ErrTHeader, n, len(r.b))
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s, nil
}

// kv reads one count-prefixed key/value list into md (made if nil). The
// count is checked against the bytes left (two length bytes a pair at
// least) before the map is sized.
func (r *kvReader) kv(md metadata.MD) (metadata.MD, error) {
	n, err := r.uvarint()
	if err != nil {
		return md, err
	}
	if n > uint64(len(r.b)/2) {
		return md, fmt.Errorf("%w: %d headers in %d bytes", ErrTHeader, n, len(r.b))
	}
	if n > MaxHeaders || uint64(r.pairs)+n > MaxHeaders {
		return md, fmt.Errorf("%w: %d headers, more than the %d one message may carry", ErrTHeader, uint64(r.pairs)+n, MaxHeaders)
	}
	r.pairs += int(n)
	if md == nil {
		// Sized by what arrives, not by the sender's count: a map slot
		// costs tens of bytes where an empty pair costs two on the wire.
		md = make(metadata.MD, min(n, 16))
	}
	for range n {
		k, err := r.str()
		if err != nil {
			return md, err
		}
		v, err := r.str()
		if err != nil {
			return md, err
		}
		md[k] = v
	}
	return md, nil
}

// HatRPC frames with FlagHeaders carry a header block before the Thrift
// message: a 4-byte big-endian length, then that many bytes of AppendKV.

// AppendHeaderBlock appends md as a header block.
func AppendHeaderBlock(dst []byte, md metadata.MD) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = AppendKV(dst, md)
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// HeaderBlockSize is the size of md's header block (AppendHeaderBlock),
// counted without building it: a block is refused by its size before the
// memory for it is taken.
func HeaderBlockSize(md metadata.MD) int {
	n := 4 + uvarintLen(uint64(len(md)))
	for k, v := range md {
		n += uvarintLen(uint64(len(k))) + len(k) + uvarintLen(uint64(len(v))) + len(v)
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// AppendHeaderBlockExtra is AppendHeaderBlock of md plus the pair k, v
// (AppendKVExtra).
func AppendHeaderBlockExtra(dst []byte, md metadata.MD, k, v string) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = AppendKVExtra(dst, md, k, v)
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// AppendHeaderBlockRID is AppendHeaderBlock of md plus a fresh request id
// (metadata.RequestIDKey, not in md), written in place: no allocation.
func AppendHeaderBlockRID(dst []byte, md metadata.MD) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(len(md)+1))
	dst = appendStr(dst, metadata.RequestIDKey)
	dst = append(dst, 16)
	dst = metadata.AppendRequestID(dst)
	if len(md) > 0 { // a range over no map still starts an iterator: 2 % of a client's CPU
		for mk, mv := range md {
			dst = appendStr(dst, mk)
			dst = appendStr(dst, mv)
		}
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// ridBlock is the start of a header block (after its length) that holds
// nothing but a request id of RequestIDSize bytes, as AppendHeaderBlockRID
// writes it for a call with no other headers: one pair, the key, the
// value's length (lengths under 128 are one-byte varints).
const ridBlock = "\x01" + string(rune(len(metadata.RequestIDKey))) + metadata.RequestIDKey + string(rune(RequestIDSize))

// RequestIDSize is the length of the request ids this package's clients
// generate (metadata.AppendRequestID).
const RequestIDSize = 16

// RequestIDOnly returns the request id of a header block (its bytes after
// the length, as HeaderBlockLen delimits them) whose one pair is a
// request id of RequestIDSize bytes, and false for any other block: for
// such a block ParseKV gives metadata.MD{metadata.RequestIDKey: id}, so a
// server can keep the id's 16 bytes instead of the block and its
// decoder.
func RequestIDOnly(block []byte) (id []byte, ok bool) {
	if len(block) != len(ridBlock)+RequestIDSize || string(block[:len(ridBlock)]) != ridBlock {
		return nil, false
	}
	return block[len(ridBlock):], true
}

// HeaderBlockLen returns the size of the header block at the start of a
// FlagHeaders payload, length field included, checked against the payload.
func HeaderBlockLen(payload []byte) (int, error) {
	if len(payload) < 4 {
		return 0, fmt.Errorf("%w: header block of a %d-byte payload", ErrBadFrame, len(payload))
	}
	n := binary.BigEndian.Uint32(payload)
	if uint64(n) > uint64(len(payload)-4) {
		return 0, fmt.Errorf("%w: header block of %d bytes in a %d-byte payload", ErrBadFrame, n, len(payload))
	}
	return 4 + int(n), nil
}

// ParseHeaderBlock decodes the header block at the start of payload and
// returns it with the block's size.
func ParseHeaderBlock(payload []byte) (metadata.MD, int, error) {
	n, err := HeaderBlockLen(payload)
	if err != nil {
		return nil, 0, err
	}
	md, err := ParseKV(payload[4:n])
	return md, n, err
}
