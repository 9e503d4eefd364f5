package flock

import (
	"encoding/binary"
	"fmt"
)

// Message layout (little endian), the same for requests and responses:
//
//	header  u32 total | u16 count | u8 flags | u8 version | u64 canary |
//	        u64 ack | u64 credit | u64 ctl
//	count × (meta: u32 size | u32 caller | u32 seq | u16 handler | u16 status,
//	         data padded to 8 bytes)
//	trailer u64 canary
//
// total covers header to trailer inclusive and is a multiple of 8. The
// trailer is written by a separate scatter entry after the body, so a
// receiver that sees the trailer equal to the header's canary has the whole
// message (RC writes land in order; shm copies entry by entry).
//
// ack is the sender's consumption position in the ring that flows the other
// way (the piggybacked Head). credit/ctl are only meaningful from the
// server: total credits granted on this QP, and ctlInactive | answered
// renewals << 32.
const (
	headerLen   = 40
	metaLen     = 16
	trailerLen  = 8
	msgVersion  = 1
	msgAlign    = 64 // ring positions are 64-byte aligned
	minMsgLen   = headerLen + trailerLen
	maxMsgCount = 1 << 12

	// SingleOverhead is what a message of one request or response adds
	// to it: header, entry metadata and trailer. The largest payload a
	// WithMaxMessage(n) handle carries in one message is n less this,
	// rounded down to 8 bytes.
	SingleOverhead = headerLen + metaLen + trailerLen

	flagSkip = 1 // padding to the ring's end; no entries
	flagCtl  = 2 // control only (credit grant/decline); no entries

	ctlInactive = 1
)

// Entry status values in responses.
const (
	statusOK uint16 = iota
	statusHandlerErr
	statusNoHandler
	statusAborted // local only: Conn.Abort failed the call
	// statusMore: one part of a response too large for one message; the
	// parts follow each other on the same QP and the last carries the
	// response's own status.
	statusMore
)

// header is the decoded fixed part of a message.
type header struct {
	total  uint32
	count  uint16
	flags  uint8
	canary uint64
	ack    uint64
	credit uint64
	ctl    uint64
}

// entry is one request or response inside a message. Data aliases the
// buffer it was decoded from.
type entry struct {
	caller  uint32
	seq     uint32
	handler uint16
	status  uint16
	data    []byte
}

func pad8(n int) int { return (n + 7) &^ 7 }

// entriesLen is the body size of entries (metadata plus padded data).
func entriesLen(es []entry) int {
	n := 0
	for i := range es {
		n += metaLen + pad8(len(es[i].data))
	}
	return n
}

// messageLen is the total length of a message holding es.
func messageLen(es []entry) int { return headerLen + entriesLen(es) + trailerLen }

// encodeBody writes header and entries into b (which must hold
// messageLen(es) - trailerLen bytes) and returns the body length; the
// caller writes the trailer (putTrailer) separately.
func encodeBody(b []byte, h header, es []entry) int {
	total := messageLen(es)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(total))
	le.PutUint16(b[4:], uint16(len(es)))
	b[6] = h.flags
	b[7] = msgVersion
	le.PutUint64(b[8:], h.canary)
	le.PutUint64(b[16:], h.ack)
	le.PutUint64(b[24:], h.credit)
	le.PutUint64(b[32:], h.ctl)
	p := headerLen
	for i := range es {
		e := &es[i]
		le.PutUint32(b[p:], uint32(len(e.data)))
		le.PutUint32(b[p+4:], e.caller)
		le.PutUint32(b[p+8:], e.seq)
		le.PutUint16(b[p+12:], e.handler)
		le.PutUint16(b[p+14:], e.status)
		p += metaLen
		n := copy(b[p:], e.data)
		clear(b[p+n : p+pad8(n)])
		p += pad8(n)
	}
	return p
}

// encodeMessage is encodeBody plus the trailer, for tests and fuzzing.
func encodeMessage(h header, es []entry) []byte {
	b := make([]byte, messageLen(es))
	n := encodeBody(b, h, es)
	binary.LittleEndian.PutUint64(b[n:], h.canary)
	return b
}

// peekHeader decodes the fixed header without checking the trailer; the
// ring poller uses it to find where the trailer must be.
func peekHeader(b []byte) (header, error) {
	if len(b) < headerLen {
		return header{}, fmt.Errorf("%w: %d bytes", ErrBadMessage, len(b))
	}
	le := binary.LittleEndian
	h := header{
		total: le.Uint32(b[0:]), count: le.Uint16(b[4:]), flags: b[6],
		canary: le.Uint64(b[8:]), ack: le.Uint64(b[16:]), credit: le.Uint64(b[24:]), ctl: le.Uint64(b[32:]),
	}
	if b[7] != msgVersion {
		return header{}, fmt.Errorf("%w: version %d", ErrBadMessage, b[7])
	}
	if h.total < minMsgLen || h.total%8 != 0 || int(h.total) > len(b) {
		return header{}, fmt.Errorf("%w: length %d", ErrBadMessage, h.total)
	}
	if h.count > maxMsgCount {
		return header{}, fmt.Errorf("%w: count %d", ErrBadMessage, h.count)
	}
	return h, nil
}

// decodeMessage decodes a complete message at the start of b, appending its
// entries to es. A message is accepted only when the trailing canary equals
// the header's; anything else is ErrTornMessage (not yet fully written) or
// ErrBadMessage (malformed).
func decodeMessage(b []byte, es []entry) (header, []entry, error) {
	h, err := peekHeader(b)
	if err != nil {
		return header{}, es, err
	}
	le := binary.LittleEndian
	if le.Uint64(b[h.total-trailerLen:]) != h.canary {
		return header{}, es, ErrTornMessage
	}
	if h.flags&^(flagSkip|flagCtl) != 0 {
		return header{}, es, fmt.Errorf("%w: flags %#x", ErrBadMessage, h.flags)
	}
	if h.flags&(flagSkip|flagCtl) != 0 && h.count != 0 {
		return header{}, es, fmt.Errorf("%w: entries in a control message", ErrBadMessage)
	}
	end := int(h.total) - trailerLen
	p := headerLen
	for i := 0; i < int(h.count); i++ {
		if end-p < metaLen {
			return header{}, es, fmt.Errorf("%w: entry %d metadata truncated", ErrBadMessage, i)
		}
		n := int(le.Uint32(b[p:]))
		e := entry{caller: le.Uint32(b[p+4:]), seq: le.Uint32(b[p+8:]),
			handler: le.Uint16(b[p+12:]), status: le.Uint16(b[p+14:])}
		p += metaLen
		if n > end-p || pad8(n) > end-p {
			return header{}, es, fmt.Errorf("%w: entry %d data truncated", ErrBadMessage, i)
		}
		e.data = b[p : p+n : p+n]
		for _, z := range b[p+n : p+pad8(n)] {
			if z != 0 {
				return header{}, es, fmt.Errorf("%w: entry %d padding", ErrBadMessage, i)
			}
		}
		p += pad8(n)
		es = append(es, e)
	}
	if p != end && h.flags&flagSkip == 0 {
		return header{}, es, fmt.Errorf("%w: %d trailing bytes", ErrBadMessage, end-p)
	}
	return h, es, nil
}
