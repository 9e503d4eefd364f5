package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// ErrNotThrift is matched (errors.Is) by a Dial or call error when the
// server answered the handshake with bytes that are no Thrift message in
// the framing and protocol the client spoke: something else listens on
// the port. The error is a *NotThriftError.
var ErrNotThrift = errors.New("client: not a Thrift server")

// ErrHTTPServer is matched by the *NotThriftError of a port where an HTTP
// server answered.
var ErrHTTPServer = errors.New("client: HTTP server on the port")

// ErrTLSServer is matched by the *NotThriftError of a port where a server
// answered with a TLS record: it wants a TLS client (client.WithTLS).
var ErrTLSServer = errors.New("client: TLS server on the port")

// NotThriftError says what answered instead of a Thrift server.
type NotThriftError struct {
	Addr string
	HTTP bool   // the answer began with "HTTP/"
	TLS  bool   // the answer was a TLS record (alert or handshake)
	Head []byte // the first bytes of the answer (at most 32)
}

func (e *NotThriftError) Error() string {
	if e.HTTP {
		line, _, _ := bytes.Cut(e.Head, []byte("\r\n"))
		return fmt.Sprintf("client: HTTP server on the port %s, not Thrift (it answered %q); for Thrift over HTTP: dial http://%s/<path>", e.Addr, line, e.Addr)
	}
	if e.TLS {
		return fmt.Sprintf("client: %s answered with TLS: the server expects a TLS client (client.WithTLS)", e.Addr)
	}
	return fmt.Sprintf("client: %s is not a Thrift server: its answer begins %q", e.Addr, e.Head)
}

// Is makes errors.Is match ErrNotThrift, ErrHTTPServer for HTTP and
// ErrTLSServer for TLS.
func (e *NotThriftError) Is(target error) bool {
	return target == ErrNotThrift || e.HTTP && target == ErrHTTPServer || e.TLS && target == ErrTLSServer
}

// tlsRecord reports a TLS record header: content type alert (21) or
// handshake (22), then protocol major version 3.
func tlsRecord(head []byte) bool {
	return len(head) >= 3 && (head[0] == 21 || head[0] == 22) && head[1] == 3
}

// headSize is how much of an unreadable answer a NotThriftError keeps.
const headSize = 32

// peekHead returns up to headSize bytes of the answer without consuming
// them, once the first has arrived; nil if none did.
func peekHead(br *bufio.Reader) []byte {
	if _, err := br.Peek(1); err != nil {
		return nil
	}
	h, _ := br.Peek(min(br.Buffered(), headSize))
	return bytes.Clone(h)
}

// notThrift turns a handshake read failure into a *NotThriftError when the
// peer did send bytes and they were not the message the format expects;
// transport failures (EOF, reset, timeout) stay what they are.
func notThrift(addr string, head []byte, err error) error {
	if len(head) == 0 {
		return nil
	}
	if bytes.HasPrefix(head, []byte("HTTP/")) {
		return &NotThriftError{Addr: addr, HTTP: true, Head: head}
	}
	if tlsRecord(head) {
		return &NotThriftError{Addr: addr, TLS: true, Head: head}
	}
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return &NotThriftError{Addr: addr, Head: head}
}

// formats are the plain-Thrift stacks a default client tries, in order.
// Unframed first: a framed server rejects an unframed message's first
// four bytes (0x80 or 0x82 first, a negative frame size) and hangs up at
// once, while an unframed binary server reading a framed message takes
// the frame length for an old-style name length and waits for more.
// TJSONProtocol comes last: the rarest, and its servers hang up on every
// other stack at their first byte.
var formats = []wire.Format{
	{Proto: proto.Binary}, {Proto: proto.Binary, Framed: true},
	{Proto: proto.Compact}, {Proto: proto.Compact, Framed: true},
	{Proto: proto.JSON}, {Proto: proto.JSON, Framed: true},
}

// probeTrailer follows a framed probe so that an unframed binary server
// reading it the old way (frame length = name length, the whole frame =
// the name) gets the type, sequence id and empty arguments it then waits
// for, answers or hangs up, instead of stalling the probe until its
// timeout. A framed server answers the probe first and reads the trailer
// as its next frame; the probe connection is closed after the answer.
var probeTrailer = []byte{byte(proto.Call), 0, 0, 0, 0, byte(proto.STOP)}

// wireFormat is the format the next connection starts with: the one
// detected earlier, else the configured one.
func (c *Conn) wireFormat() wire.Format {
	if f := c.detected.Load(); f != nil {
		return *f
	}
	return wire.Format{Proto: c.o.proto, Framed: c.o.framed, Header: c.o.theader, Outer: c.o.outerFrame}
}

// connect dials and, when upgrade is set, handshakes. A server that hangs
// up on the handshake is either a plain Thrift server with another framing
// or protocol (unless WithFramed, WithUnframed or WithProtocol fixed it,
// the other stacks are probed, each on a connection of its own) or one
// that drops unknown names (e.g. a multiplexed processor without a default
// service): then the connection is retried as plain Thrift. This is
// decided afresh on every reconnect: a HatRPC server that turned us away
// once (e.g. at its connection limit) may upgrade later.
func (c *Conn) connect(ctx context.Context, hello offer) (*session, error) {
	f := c.wireFormat()
	s, err := c.dialSessionFormat(ctx, hello, 0, f)
	if err == nil && hello == offerHello {
		c.upgradeErr.Store(nil)
	}
	var ce *ConnError
	if hello == offerNothing || err == nil || !errors.As(err, &ce) || ce.Op != "handshake" || !peerHungUp(ce.Err) {
		return s, err
	}
	if c.laneOffer() != 0 {
		// Remembered for FastPathErr: without it, a HatRPC server at its
		// connection limit looks like one that grants no lanes.
		cause := error(fmt.Errorf("the server closed the connection during the HatRPC handshake (at its connection limit?): %w", ce.Err))
		c.upgradeErr.Store(&cause)
	}
	if !c.o.formatSet {
		found, ans, err := c.probe(ctx, f)
		switch {
		case err != nil:
			return nil, err
		case ans == answeredHat:
			// A HatRPC server, which reads every stack: it turned the
			// first connection away and took this one.
			s, err := c.dialSessionFormat(ctx, offerHello, 0, f)
			if err == nil {
				c.upgradeErr.Store(nil)
			}
			return s, err
		case ans == answeredPlain:
			c.detected.Store(&found)
			return c.dialSessionFormat(ctx, offerNothing, 0, found)
		}
	}
	return c.dialSessionFormat(ctx, offerNothing, 0, f)
}

// answer is how a server met a probe.
type answer int

const (
	hungUp        answer = iota
	answeredPlain        // an exception: plain Thrift
	answeredHat          // a handshake reply: HatRPC
)

// probe offers the handshake in every stack but tried, each on a fresh
// connection closed right after (a single-threaded server such as
// Python's TSimpleServer serves one connection at a time), and returns
// the first stack the server answered in, or hungUp when it hung up on
// all of them.
func (c *Conn) probe(ctx context.Context, tried wire.Format) (wire.Format, answer, error) {
	for _, f := range formats {
		if f == tried {
			continue
		}
		ans, err := c.probeOne(ctx, f)
		if err != nil || ans != hungUp {
			return f, ans, err
		}
	}
	return tried, hungUp, nil
}

// probeOne offers the handshake in f; an error ends probing (dial
// failure, timeout, not Thrift).
func (c *Conn) probeOne(ctx context.Context, f wire.Format) (answer, error) {
	dctx, cancel := context.WithTimeout(ctx, c.o.dialTimeout)
	defer cancel()
	nc, err := c.dialRaw(dctx)
	if err != nil {
		return hungUp, err
	}
	defer nc.Close()
	hctx, hcancel := context.WithTimeout(dctx, c.o.handshakeTimeout)
	defer hcancel()
	var trailer []byte
	if f.Framed {
		trailer = probeTrailer
	}
	hello := wire.Hello{Version: wire.Version, Caps: wire.CapFraming,
		MaxFrame: int32(min(c.o.limits.MaxMessageSize, 1<<31-1))}
	br := bufio.NewReaderSize(nc, 4<<10)
	rep, _, err := c.helloExchangeTrailer(hctx, nc, br, f, &hello, trailer)
	var ce *ConnError
	switch {
	case err == nil && rep != nil:
		return answeredHat, nil
	case err == nil:
		return answeredPlain, nil
	case errors.As(err, &ce) && peerHungUp(ce.Err):
		return hungUp, nil
	}
	return hungUp, err
}
