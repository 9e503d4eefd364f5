package proto

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"time"
)

// ErrFrameSize reports a frame whose declared length is negative or over
// the message limit; it also matches ErrInvalidData.
var ErrFrameSize error = &protoError{"proto: bad frame size"}

// Stream carries the state for reading messages from one connection: the
// protocol and framing (see Detect), limits, and a reusable scanner. It is
// not safe for concurrent use.
type Stream struct {
	Protocol Protocol
	Framed   bool
	lim      *Limits
	sc       Scanner
}

// NewStream returns a stream reader state; nil lim means DefaultLimits.
func NewStream(p Protocol, framed bool, lim *Limits) *Stream {
	return &Stream{Protocol: p, Framed: framed, lim: limitsOrDefault(lim)}
}

// ReadMessage reads one whole message from br into buf[:0] (reusing its
// capacity) and returns it without the frame length. Framed messages are
// copied straight into buf; unframed ones are delimited by a resumable
// Scanner so only bytes belonging to the message are consumed from br.
//
// ctx is checked between reads; to interrupt a read blocked inside br the
// caller must also set a deadline on the underlying connection.
func (s *Stream) ReadMessage(ctx context.Context, br *bufio.Reader, buf []byte) ([]byte, error) {
	if s.lim == nil {
		s.lim = &DefaultLimits
	}
	if s.Framed {
		return readFramed(ctx, br, buf, s.lim)
	}
	return s.readUnframed(ctx, br, buf)
}

// ReadMessage is Stream.ReadMessage with a throwaway Stream.
func ReadMessage(ctx context.Context, br *bufio.Reader, p Protocol, framed bool, buf []byte, lim *Limits) ([]byte, error) {
	s := Stream{Protocol: p, Framed: framed, lim: limitsOrDefault(lim)}
	return s.ReadMessage(ctx, br, buf)
}

func readFramed(ctx context.Context, br *bufio.Reader, buf []byte, lim *Limits) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return buf[:0], err
	}
	hdr, err := br.Peek(4)
	if err != nil {
		if len(hdr) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return buf[:0], err
	}
	n := int32(binary.BigEndian.Uint32(hdr))
	if n < 0 || int(n) > lim.MaxMessageSize {
		return buf[:0], decodeErr(ErrFrameSize, 0, "")
	}
	if _, err := br.Discard(4); err != nil {
		return buf[:0], err
	}
	buf = grow(buf[:0], int(n))
	if _, err := io.ReadFull(br, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return buf[:0], err
	}
	return buf, nil
}

// grow returns buf resized to n, reallocating only when capacity is short.
func grow(buf []byte, n int) []byte {
	if cap(buf) >= n {
		return buf[:n]
	}
	nb := make([]byte, n, n+n/4)
	copy(nb, buf)
	return nb
}

func (s *Stream) readUnframed(ctx context.Context, br *bufio.Reader, buf []byte) ([]byte, error) {
	s.sc.Reset(s.Protocol, s.lim)
	buf = buf[:0]
	// rescan is set after a direct read added bytes the scanner has not seen.
	rescan := false
	for {
		if err := ctx.Err(); err != nil {
			return buf[:0], err
		}
		var peek []byte
		if !rescan {
			if br.Buffered() == 0 {
				if _, err := br.Peek(1); err != nil {
					if len(buf) > 0 && errors.Is(err, io.EOF) {
						err = io.ErrUnexpectedEOF
					}
					return buf[:0], err
				}
			}
			peek, _ = br.Peek(br.Buffered())
		}
		rescan = false
		base := len(buf)
		buf = append(buf, peek...)
		n, need, err := s.sc.Scan(buf)
		if err == nil {
			// Bytes before base are already consumed and all belong to the
			// message, so n >= base.
			if _, err := br.Discard(n - base); err != nil {
				return buf[:0], err
			}
			return buf[:n], nil
		}
		if !isTruncated(err) {
			return buf[:0], err
		}
		// The message goes on past everything buffered, so it all belongs
		// to this message.
		if _, err := br.Discard(len(peek)); err != nil {
			return buf[:0], err
		}
		if more := need - len(buf); more > br.Buffered() {
			// A known-long value (string, fixed-size list): read it directly.
			have := len(buf)
			buf = grow(buf, need)
			if _, err := io.ReadFull(br, buf[have:]); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return buf[:0], err
			}
			rescan = true
		}
	}
}

// deadliner is implemented by net.Conn.
type deadliner interface{ SetWriteDeadline(time.Time) error }

// WriteFramed writes a 4-byte big-endian length and msg. When w has
// SetWriteDeadline (a net.Conn), ctx's deadline is applied to the write.
func WriteFramed(ctx context.Context, w io.Writer, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok {
		if dl, ok := w.(deadliner); ok {
			if err := dl.SetWriteDeadline(d); err != nil {
				return err
			}
			defer dl.SetWriteDeadline(time.Time{}) //nolint:errcheck // best effort reset
		}
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(msg)))
	if bw, ok := w.(*bufio.Writer); ok {
		if _, err := bw.Write(hdr[:]); err != nil {
			return err
		}
		_, err := bw.Write(msg)
		return err
	}
	// One write keeps header and payload in one segment on unbuffered conns.
	out := make([]byte, 0, 4+len(msg))
	out = append(append(out, hdr[:]...), msg...)
	_, err := w.Write(out)
	return err
}

// AppendFrame appends msg to buf behind a 4-byte big-endian length.
func AppendFrame(buf, msg []byte) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(msg)))
	return append(buf, msg...)
}
