package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// handshake offers the HatRPC upgrade as a plain Thrift call. Any
// exception reply (UNKNOWN_METHOD from an Apache server) means plain Thrift.
func (s *session) handshake(ctx context.Context, caps uint64) error {
	if caps == 0 {
		caps = wire.CapFraming | s.c.laneOffer()
	}
	caps |= wire.CapHeaders | wire.CapStreams | wire.CapStreamWindows
	hello := wire.Hello{Version: wire.Version, Caps: caps,
		MaxFrame: int32(min(s.c.o.limits.MaxMessageSize, 1<<31-1)),
		Windows:  streamcore.WithDefaults(s.c.o.streams.windows)}
	if hello.Caps&transport.SameHostCaps() != 0 {
		hello.Host = fastpath.HostID()
		hello.Plans = s.c.planChecks()
	}
	rep, exc, err := s.c.helloExchange(ctx, s.nc, s.br, s.format, &hello)
	if err != nil || exc != nil {
		return err // an exception: plain Thrift peer
	}
	if rep.Conflict != "" {
		return &fastpath.PlanError{Function: rep.ConflictFunction, Reason: rep.Conflict}
	}
	s.hat = rep.Version >= 1 && rep.Caps&wire.CapFraming != 0
	if s.hat {
		s.caps = rep.Caps
		if rep.Caps&wire.CapStreams != 0 {
			s.st = streamcore.NewConn(s.w.Write, releaseStreamMsg, rep.Windows, hello.Windows, streamcore.BulkBound()) // stream.go
			if rep.Caps&wire.CapStreamWindows != 0 {
				s.fnWin = make(map[string]wire.StreamWindows, len(rep.FnWindows))
				for _, w := range rep.FnWindows {
					s.fnWin[w.Function] = wire.StreamWindows{Messages: w.Messages, Bytes: w.Bytes}
				}
			}
			// A batched stream frame's write failed: the session is broken.
			s.w.OnAsyncError(s.fail)
		}
	}
	return nil
}

// helloExchange sends hello as a plain Thrift call on nc and reads the
// answer: a reply, or the exception the server answered with. An answer
// that is not Thrift at all is a *NotThriftError.
func (c *Conn) helloExchange(ctx context.Context, nc net.Conn, br *bufio.Reader, format wire.Format, hello *wire.Hello) (*wire.HelloReply, *proto.ApplicationException, error) {
	return c.helloExchangeTrailer(ctx, nc, br, format, hello, nil)
}

// helloExchangeTrailer is helloExchange sending trailer after the hello
// (see probeTrailer).
func (c *Conn) helloExchangeTrailer(ctx context.Context, nc net.Conn, br *bufio.Reader, format wire.Format, hello *wire.Hello, trailer []byte) (*wire.HelloReply, *proto.ApplicationException, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
		defer nc.SetDeadline(time.Time{})
	}
	if ctx.Done() != nil {
		// Cancelling ctx (a Dial given up, Close stopping a background
		// dial) must end a handshake the server never answers now, not
		// at its deadline.
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			_ = nc.SetDeadline(time.Unix(1, 0))
			close(fired)
		})
		defer func() {
			if !stop() {
				<-fired // the deadline reset above must come after it
			}
		}()
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	bp := wire.GetBuf()
	defer wire.PutBuf(bp)
	b := (*bp)[:0]
	if format.Framed {
		b = b[:4]
	}
	b, _ = codec.AppendMessage(b, format.Proto, wire.HelloMethod, proto.Call, 0, hello)
	if format.Framed {
		putLen(b, len(b)-4)
	}
	b = append(b, trailer...)
	*bp = b
	if _, err := nc.Write(b); err != nil {
		return nil, nil, &ConnError{Op: "handshake", Err: ctxCause(ctx, err)}
	}
	head := peekHead(br)
	fail := func(err error) error {
		if nt := notThrift(c.addr, head, err); nt != nil {
			return nt
		}
		return &ConnError{Op: "handshake", Err: ctxCause(ctx, err)}
	}
	if bytes.HasPrefix(head, []byte("HTTP/")) {
		return nil, nil, fail(nil) // before a framed read takes "HTTP" for a 1.2 GB frame
	}
	// The reply may list more than fits a small message limit (the
	// server's per-function stream windows): it has a bound of its own.
	hl := wire.HelloLimits(&c.o.limits)
	msg, err := wire.ReadMessage(br, format, b[:0], &hl)
	*bp = msg
	if err != nil {
		return nil, nil, fail(err)
	}
	mh, err := wire.ParseMsgHeader(format.Proto, msg)
	if err != nil {
		return nil, nil, fail(err)
	}
	if mh.Type != proto.Reply {
		var ae proto.ApplicationException
		if mh.Type != proto.Exception || codec.Decode(format.Proto, msg[mh.Body:], &hl, &ae) != nil {
			ae = *proto.NewApplicationException(proto.ExcUnknown, "handshake answered with message type "+mh.Type.String())
		}
		return nil, &ae, nil
	}
	var rep wire.HelloReply
	if err := codec.Decode(format.Proto, msg[mh.Body:], &hl, &rep); err != nil {
		return nil, nil, fail(err)
	}
	return &rep, nil, nil
}

// ctxCause is err, matching ctx's error too when ctx ended: the socket
// deadline or the cancel set from ctx failed the read or write, and a
// caller checks errors.Is(err, context.DeadlineExceeded) as it would for
// any call (a stream whose deadline passed while its lane was set up got
// a bare "i/o timeout").
func ctxCause(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && cerr == nil && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded // the socket's deadline fired before ctx's timer
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}
