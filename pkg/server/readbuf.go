package server

import (
	"bufio"
	"io"
)

// readBufSize holds a few hundred pipelined small calls per read syscall
// while keeping an idle connection's footprint small; bigReadBufSize is
// what a HatRPC connection that pipelines calls of a few KiB grows to.
// Four KiB echoes from 64 callers (16 in flight on each of a client's
// four connections, 64 KiB) took 0.78 reads and 0.62 writes per call
// with 16 KiB, 0.55 and 0.45 with 64 KiB (the replies of a burst leave
// together), and 27 % less CPU per call (docs/performance/history.md,
// 2026-12-03).
const (
	readBufSize    = 16 << 10
	bigReadBufSize = 64 << 10
)

// growRead swaps the read buffer for one of bigReadBufSize the first time
// a HatRPC connection has half of the small one still buffered after a
// frame: calls pipelined deeper than half the buffer. Calls of a few KiB
// get there at a few in flight; 512 B calls can at 16 in flight (fifteen
// ~590 B frames buffered behind the one read are over 8 KiB); a
// connection without such bursts keeps the small buffer. Only the read
// role holder calls it (c.br is its own).
func (c *conn) growRead() {
	if c.grown || !c.hat || c.br.Buffered() < readBufSize/2 {
		return
	}
	c.grown = true
	rest, _ := c.br.Peek(c.br.Buffered()) // buffered: cannot fail
	c.br = bufio.NewReaderSize(&prefixReader{pre: append([]byte(nil), rest...), r: c.raw}, bigReadBufSize)
}

// prefixReader reads pre, then r. The bytes of pre (less than
// readBufSize) all move into the new buffer on its first fill, before
// anything reads c.raw directly (wire.ReadFrameCharged peeks a frame's
// header through the buffer first), so the byte order is kept.
type prefixReader struct {
	pre []byte
	r   io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		if len(p.pre) == 0 {
			p.pre = nil // let the copy go
		}
		return n, nil
	}
	return p.r.Read(b)
}
