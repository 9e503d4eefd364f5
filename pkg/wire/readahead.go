package wire

import (
	"io"
	"os"
	"syscall"
)

// Reading a large frame's tail and the next frame's header together.
//
// A frame too large for the read buffer is read in two syscalls: its
// header and first bytes through the buffer (a fill), the rest straight
// from the socket into its destination (ReadFrameCharged). A stream of
// 64 KiB messages thus cost two reads a message (the client of a 1 GiB
// server stream: 10,235 reads for 5,096 messages). The tail's read can
// take the next frame's header with it when it has already arrived: one
// readv into the frame and a header-sized buffer of the reader's own,
// which the next fill takes before the socket. With the next header
// there, that fill needs no syscall and the next tail is again one
// readv: one read a message. Only a header's worth is read ahead, so a
// large next frame is not copied through the buffer either.

// aheadReader is a socket reader that can read ahead (SpinReader, and
// the server's byte meter over it).
type aheadReader interface {
	ReadAhead(p []byte) (int, error)
}

// ReadAhead reads into p from r as r.Read does; when r is a SpinReader
// (or forwards to one) the same syscall may also take up to HeaderSize
// bytes beyond p, which r's next Read returns first.
func ReadAhead(r io.Reader, p []byte) (int, error) {
	if ar, ok := r.(aheadReader); ok {
		return ar.ReadAhead(p)
	}
	return r.Read(p)
}

// readFullAhead is readFull for the tail of a frame read from the socket:
// the last read may take the next frame's header too (ReadAhead).
func readFullAhead(r io.Reader, dst []byte, n int) ([]byte, error) {
	const step = 1 << 20
	for n > 0 {
		k := min(n, step)
		off := len(dst)
		dst = grow(dst, k)
		for got := 0; got < k; {
			m, err := ReadAhead(r, dst[off+got:off+k])
			got += m
			if err != nil && got < k {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return dst[:off], err
			}
			if m == 0 && err == nil {
				return dst[:off], io.ErrNoProgress
			}
		}
		n -= k
	}
	return dst, nil
}

// ReadAhead implements aheadReader: one readv into p and r's header-sized
// buffer. An armed read polls as Read does, without reading ahead.
func (r *SpinReader) ReadAhead(p []byte) (int, error) {
	if r.aheadLen > 0 || r.armed || len(p) == 0 {
		return r.Read(p)
	}
	n, rerr, err := r.rawReadWith(r.aheadFn, p)
	switch {
	case err != nil:
		return 0, r.opError(err)
	case rerr != nil:
		return 0, r.opError(os.NewSyscallError("readv", rerr))
	case n == 0:
		return 0, io.EOF
	}
	if n > len(p) {
		r.aheadOff, r.aheadLen = 0, n-len(p)
		n = len(p)
	}
	return n, nil
}

// readAhead is ReadAhead's raw read (rc.Read's callback).
func (r *SpinReader) readAhead(fd uintptr) bool {
	for {
		r.n, r.rerr = readv2(int(fd), r.buf, r.ahead[:])
		if r.rerr != syscall.EINTR {
			return r.rerr != syscall.EAGAIN
		}
	}
}

// readAheadBuffered returns bytes a ReadAhead took beyond its p (Read
// serves them before the socket), 0 when there are none.
func (r *SpinReader) readAheadBuffered(p []byte) int {
	if r.aheadLen == 0 {
		return 0
	}
	n := copy(p, r.ahead[r.aheadOff:r.aheadOff+r.aheadLen])
	r.aheadOff += n
	r.aheadLen -= n
	return n
}
