package wire

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Apache's TZlibTransport compresses a connection's whole byte stream
// with zlib (RFC 1950), flushing (a sync flush) after each message; the
// stream inside holds plain Thrift as any connection does (unframed or
// framed, binary or compact, THeader). Apache's Go and Python put it
// straight on the socket; Python over TFramedTransport puts it inside
// frames (each flush one frame): `LL LL LL LL 78 ..`.
//
// Memory: the inflater holds a 32 KiB window and reads through a
// bufio.Reader; the messages read from the inflated stream meet the
// limits and the memory budget of any plain message (max message size,
// depth, string and container sizes), so a small stream that inflates to
// more than a message may hold (a zlib bomb) ends with that limit's
// error, the connection closed, after at most one message's worth of
// memory: the same budget a compressed THeader payload has.

// ErrZlib matches every error of a zlib stream that does not inflate (it
// wraps proto.ErrInvalidData).
var ErrZlib = fmt.Errorf("wire: bad zlib stream: %w", proto.ErrInvalidData)

// IsZlibStart tells whether b starts a zlib stream as Apache's
// TZlibTransport writes one: deflate with a 32 KiB window (0x78) and a
// header whose check bits hold, without a preset dictionary (levels
// 0-1, 2-5, 6 and 7-9 give 78 01, 78 5e, 78 9c, 78 da).
func IsZlibStart(b []byte) bool {
	return len(b) >= 2 && b[0] == 0x78 && b[1]&0x20 == 0 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

// DetectZlib peeks at the first bytes of a fresh stream: zlib tells
// whether it is a TZlibTransport stream, framed whether that comes in
// 4-byte-length frames. Nothing is consumed. Streams starting with a
// binary or compact message are answered at once (Detect's cases);
// others need six bytes.
func DetectZlib(br *bufio.Reader) (zlib, framed bool, err error) {
	b, err := br.Peek(1)
	if err != nil {
		return false, false, err
	}
	switch b[0] {
	case binaryMagic, compactMagic:
		return false, false, nil
	case 0x78:
		if b, err = br.Peek(2); err != nil {
			return false, false, err
		}
		return IsZlibStart(b), false, nil
	}
	if b, err = br.Peek(6); err != nil {
		return false, false, err
	}
	if binary.BigEndian.Uint32(b) >= 2 && IsZlibStart(b[4:]) {
		return true, true, nil
	}
	return false, false, nil
}

// ZlibReader inflates a TZlibTransport stream read from r (in frames of
// at most maxFrame bytes when framed). Nothing is read before the first
// Read.
type ZlibReader struct {
	src io.Reader
	zr  io.ReadCloser
}

// NewZlibReader returns the inflated stream of r.
func NewZlibReader(r io.Reader, framed bool, maxFrame int) *ZlibReader {
	if framed {
		r = bufio.NewReaderSize(&deframer{r: r, max: maxFrame}, 4<<10)
	}
	return &ZlibReader{src: r}
}

func (z *ZlibReader) Read(p []byte) (int, error) {
	if z.zr == nil {
		zr, err := zlib.NewReader(z.src)
		if err != nil {
			return 0, zlibErr(err)
		}
		z.zr = zr
	}
	n, err := z.zr.Read(p)
	return n, zlibErr(err)
}

// zlibErr marks what the inflater found wrong with the stream; the
// source's own errors (a closed socket, a timeout, a bad frame) pass.
func zlibErr(err error) error {
	var corrupt flate.CorruptInputError
	var internal flate.InternalError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &corrupt), errors.As(err, &internal), errors.Is(err, zlib.ErrChecksum),
		errors.Is(err, zlib.ErrHeader), errors.Is(err, zlib.ErrDictionary):
		return fmt.Errorf("%w: %v", ErrZlib, err)
	}
	return err
}

// deframer reads the payloads of a stream of 4-byte-length frames as one
// stream.
type deframer struct {
	r    io.Reader
	left int
	max  int
}

func (d *deframer) Read(p []byte) (int, error) {
	for d.left == 0 {
		var lb [4]byte
		if _, err := io.ReadFull(d.r, lb[:]); err != nil {
			return 0, err
		}
		n := binary.BigEndian.Uint32(lb[:])
		if int64(n) > int64(d.max) {
			return 0, fmt.Errorf("%w: zlib frame of %d bytes", ErrFrameTooLarge, n)
		}
		d.left = int(n)
	}
	n, err := d.r.Read(p[:min(len(p), d.left)])
	d.left -= n
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // within a frame
	}
	return n, err
}

// ZlibWriter compresses what is written to it onto w, flushing after
// each Write (one Write is one message, or a batch of them: what the
// peer's inflater must see at once); framed, each flush goes out as one
// 4-byte-length frame. It passes write deadlines on to w.
type ZlibWriter struct {
	w      io.Writer
	zw     *zlib.Writer
	buf    bytes.Buffer
	framed bool
}

// NewZlibWriter returns a ZlibWriter onto w.
func NewZlibWriter(w io.Writer, framed bool) *ZlibWriter {
	z := &ZlibWriter{w: w, framed: framed}
	z.zw = zlib.NewWriter(&z.buf)
	return z
}

func (z *ZlibWriter) Write(p []byte) (int, error) {
	z.buf.Reset()
	if z.framed {
		z.buf.Write([]byte{0, 0, 0, 0})
	}
	if _, err := z.zw.Write(p); err != nil {
		return 0, err
	}
	if err := z.zw.Flush(); err != nil {
		return 0, err
	}
	b := z.buf.Bytes()
	if z.framed {
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	}
	if _, err := z.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// SetWriteDeadline sets w's, when it has one.
func (z *ZlibWriter) SetWriteDeadline(t time.Time) error {
	if d, ok := z.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return d.SetWriteDeadline(t)
	}
	return nil
}

// ZlibConn is a net.Conn speaking TZlibTransport over nc (straight on
// it: Apache's Go TZlibTransport, Python's over TBufferedTransport):
// what a client writes is compressed and flushed per Write, what it reads
// inflated.
type ZlibConn struct {
	net.Conn
	r *ZlibReader
	w *ZlibWriter
}

// NewZlibConn wraps nc.
func NewZlibConn(nc net.Conn) *ZlibConn {
	return &ZlibConn{Conn: nc, r: NewZlibReader(nc, false, 0), w: NewZlibWriter(nc, false)}
}

func (c *ZlibConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *ZlibConn) Write(p []byte) (int, error) { return c.w.Write(p) }
