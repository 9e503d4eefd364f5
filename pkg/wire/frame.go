// Package wire holds the byte-level framing shared by pkg/server and
// pkg/client: the HatRPC frame header and its header block, the capability
// handshake structs, the plain-Thrift stream detector and reader (framed or
// unframed, binary or compact), Apache's THeader transport (frames, info
// headers, zlib), the write coalescer (Writer), the codecs and buffer
// pools a call encodes with (Codec, GetBuf, SizeHint), and the socket
// reader that spins briefly before parking (SpinReader). The layout is
// documented in docs/design/wire.md.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// HeaderSize is the fixed size of a HatRPC frame header, length field included.
const HeaderSize = 20

// lenFieldSize is the part of the header not counted by the length field.
const lenFieldSize = 4

// Kind is the first header byte after the length: what the frame carries.
type Kind uint8

// Frame kinds. Call..Oneway mirror Thrift message types so the payload's own
// message type and the frame kind agree; Cancel and GoAway carry no payload.
const (
	KindCall      Kind = 1
	KindReply     Kind = 2
	KindException Kind = 3
	KindOneway    Kind = 4
	KindCancel    Kind = 5 // client gave up on seqid; server cancels its context
	KindGoAway    Kind = 6 // server drains: no new calls on this connection
	// KindBatch carries whole frames back to back (lanes only): calls one
	// way, their replies in the same order the other (a oneway call's
	// place holds an empty reply).
	KindBatch Kind = 7
)

// Flag bits.
const (
	FlagCompact uint8 = 1 << 0 // payload is Thrift compact (else binary)
	// FlagHeaders: the payload starts with a header block (key/value
	// headers, see AppendHeaderBlock) before the Thrift message. Sent
	// only on connections that negotiated CapHeaders.
	FlagHeaders uint8 = 1 << 1
)

// Header is a decoded HatRPC frame header.
type Header struct {
	Length  uint32 // bytes after the length field: header rest + payload
	Kind    Kind
	Flags   uint8
	Seqid   int32
	Timeout time.Duration // remaining client deadline; 0 = none
}

// PayloadLen is the size of the Thrift message following the header.
func (h *Header) PayloadLen() int { return int(h.Length) - (HeaderSize - lenFieldSize) }

// Protocol is the payload encoding the flags announce.
func (h *Header) Protocol() proto.Protocol {
	if h.Flags&FlagCompact != 0 {
		return proto.Compact
	}
	return proto.Binary
}

// ErrBadFrame matches every header decode failure; it wraps proto.ErrInvalidData
// so callers treat it like any other malformed input.
var ErrBadFrame = fmt.Errorf("wire: bad frame: %w", proto.ErrInvalidData)

// ErrFrameTooLarge is returned when a frame or message exceeds the size limit.
var ErrFrameTooLarge = fmt.Errorf("wire: frame too large: %w", proto.ErrSizeLimit)

// PutHeader writes h into b[:HeaderSize]. Length is taken from h.
func PutHeader(b []byte, h *Header) {
	_ = b[HeaderSize-1]
	binary.BigEndian.PutUint32(b[0:], h.Length)
	b[4] = byte(h.Kind)
	b[5] = h.Flags
	b[6], b[7] = 0, 0
	binary.BigEndian.PutUint32(b[8:], uint32(h.Seqid))
	binary.BigEndian.PutUint64(b[12:], uint64(h.Timeout))
}

// SealFrame fills the header reserved at the start of frame (len(frame) >=
// HeaderSize) now that the payload size is known.
func SealFrame(frame []byte, kind Kind, flags uint8, seqid int32, timeout time.Duration) {
	PutHeader(frame, &Header{Length: uint32(len(frame) - lenFieldSize), Kind: kind, Flags: flags, Seqid: seqid, Timeout: timeout})
}

// SealFrameRefs is SealFrame for a frame whose payload continues in refs
// (Codec.AppendMessageRefs).
func SealFrameRefs(frame []byte, refs []proto.Ref, kind Kind, flags uint8, seqid int32, timeout time.Duration) {
	PutHeader(frame, &Header{Length: uint32(len(frame) + proto.RefsLen(refs) - lenFieldSize), Kind: kind, Flags: flags, Seqid: seqid, Timeout: timeout})
}

// DecodeHeader parses a header and checks it against maxPayload.
func DecodeHeader(b []byte, maxPayload int) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: short header (%d bytes)", ErrBadFrame, len(b))
	}
	h.Length = binary.BigEndian.Uint32(b[0:])
	h.Kind = Kind(b[4])
	h.Flags = b[5]
	h.Seqid = int32(binary.BigEndian.Uint32(b[8:]))
	h.Timeout = time.Duration(binary.BigEndian.Uint64(b[12:]))
	switch {
	case h.Kind < KindCall || h.Kind > KindStreamJoin:
		return h, fmt.Errorf("%w: unknown kind %d", ErrBadFrame, h.Kind)
	case h.Flags&^(FlagCompact|FlagHeaders|FlagWindow) != 0 || h.Flags&FlagWindow != 0 && h.Kind != KindStreamOpen || b[6] != 0 || b[7] != 0:
		return h, fmt.Errorf("%w: reserved bits set", ErrBadFrame)
	case h.Length < HeaderSize-lenFieldSize:
		return h, fmt.Errorf("%w: length %d shorter than header", ErrBadFrame, h.Length)
	case h.Timeout < 0:
		return h, fmt.Errorf("%w: negative timeout", ErrBadFrame)
	}
	if n := h.PayloadLen(); n > maxPayload {
		return h, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, maxPayload)
	}
	if (h.Kind == KindCancel || h.Kind == KindGoAway) && h.PayloadLen() != 0 {
		return h, fmt.Errorf("%w: control frame with payload", ErrBadFrame)
	}
	return h, nil
}

// IsTooLarge reports whether err is a size-limit violation (as opposed to garbage).
func IsTooLarge(err error) bool { return errors.Is(err, proto.ErrSizeLimit) }

// SplitFrames cuts a batch payload into its frames, each checked like a
// single frame (nested batches are refused).
func SplitFrames(b []byte, maxPayload int) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		h, err := DecodeHeader(b, maxPayload)
		if err != nil {
			return nil, err
		}
		n := HeaderSize + h.PayloadLen()
		if h.Kind == KindBatch || n > len(b) {
			return nil, fmt.Errorf("%w: batch entry of kind %d, %d of %d bytes", ErrBadFrame, h.Kind, len(b), n)
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out, nil
}
