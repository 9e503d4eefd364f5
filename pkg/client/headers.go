package client

import (
	"context"
	"maps"
	"unsafe"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// WithTHeader speaks Apache Thrift's THeader transport (framed, in the
// protocol WithProtocol chose, binary by default) and nothing else: no
// probing and no HatRPC handshake. Outgoing headers (pkg/metadata) and a
// request id travel as THeader info headers, and the server's reply
// headers can be captured (metadata.CaptureReply). A HatRPC server reads
// THeader too; on it, calls stay on this connection, with no lanes.
func WithTHeader() Option {
	return func(o *options) {
		o.theader, o.framed, o.formatSet, o.noUpgrade = true, true, true, true
	}
}

// WithFramedTHeader is WithTHeader with each THeader frame sent inside
// one more 4-byte frame, as Apache's THeaderProtocol over
// TFramedTransport speaks it (`--protocol=header --transport=framed` in
// Apache's test suite), and replies read the same way. A HatRPC server
// detects it and answers in kind.
func WithFramedTHeader() Option {
	return func(o *options) {
		WithTHeader()(o)
		o.outerFrame = true
	}
}

// WithoutRequestIDs stops the Conn from adding a generated request id
// (metadata.RequestIDKey) to calls whose context sets none.
func WithoutRequestIDs() Option { return func(o *options) { o.noRequestIDs = true } }

// carriesHeaders tells whether calls on s can carry headers: THeader, or
// HatRPC framing with a server that granted CapHeaders.
func (s *session) carriesHeaders() bool {
	return s.format.Header || s.hat && s.caps&wire.CapHeaders != 0
}

// outgoing returns the headers a call sends and whether to add a request
// id to them (md has none and ids are on).
func (c *Conn) outgoing(ctx context.Context) (metadata.MD, bool) {
	md, _ := metadata.FromOutgoingContext(ctx)
	if c.o.noRequestIDs {
		return md, false
	}
	_, ok := md[metadata.RequestIDKey]
	return md, !ok
}

// appendRequestHead starts a request after its reserved frame header in
// b: the header block (HatRPC, returning FlagHeaders) or the THeader
// header of a call with sequence id seq.
func (s *session) appendRequestHead(ctx context.Context, b []byte, seq int32) ([]byte, uint8) {
	md, rid := s.c.outgoing(ctx)
	if s.format.Header {
		h := wire.THeaderInfo{Seqid: seq, Proto: s.format.Proto, Info: md}
		if rid {
			h.Info = maps.Clone(md)
			if h.Info == nil {
				h.Info = metadata.MD{}
			}
			h.Info[metadata.RequestIDKey] = metadata.NewRequestID()
		}
		if !wire.THeaderHeadFits(h.Info) {
			h.Info = nil
		}
		return wire.AppendTHeaderHead(b, &h, false), 0
	}
	switch {
	case rid:
		return wire.AppendHeaderBlockRID(b, md), wire.FlagHeaders
	case len(md) > 0:
		return wire.AppendHeaderBlock(b, md), wire.FlagHeaders
	}
	return b, 0
}

// appendLaneHeaders adds the header block to a lane or FLOCK request
// after its reserved frame header in dst, for a call whose context sets
// headers (a generated request id joins them), when the server reads
// them. A call without headers sends none: no request id is generated on
// the fast path, which it would cost two allocations a call at the server.
func (c *Conn) appendLaneHeaders(ctx context.Context, dst []byte) (_ []byte, flags uint8, plain bool) {
	md, rid := c.outgoing(ctx)
	if len(md) == 0 {
		return dst, 0, true
	}
	if !c.serverReadsHeaders() {
		return dst, 0, false
	}
	if rid {
		return wire.AppendHeaderBlockRID(dst, md), wire.FlagHeaders, false
	}
	return wire.AppendHeaderBlock(dst, md), wire.FlagHeaders, false
}

// plainMemo remembers a context that carries no outgoing headers, so a
// lane whose calls keep coming under one context (a caller's loop, a
// worker's long-lived context) looks its headers up once instead of
// walking the context chain on every call (~25 ns of a 64 B lane call in
// place). It may: the context contract makes successive Value calls with
// one key return the same result. The memo compares the interface's two
// words, so a context value of an uncomparable type cannot make it panic,
// and it holds the context, so the address cannot be reused by another
// one: it keeps that context reachable until the lane's next call under
// another context, or until the lane itself is gone. Only the caller
// holding the lane uses it.
type plainMemo struct{ ctx context.Context }

func (m *plainMemo) holds(ctx context.Context) bool {
	// Word by word, in place: comparing the two-word arrays whole
	// spilled them and read them back 16 bytes at a time, each read
	// waiting on a stalled store forward (~15 ns of perf samples; paired
	// runs could not resolve the gain).
	a := (*[2]unsafe.Pointer)(unsafe.Pointer(&ctx))
	b := (*[2]unsafe.Pointer)(unsafe.Pointer(&m.ctx))
	return b[0] != nil && a[1] == b[1] && a[0] == b[0]
}

func (m *plainMemo) set(ctx context.Context) { m.ctx = ctx }

// serverReadsHeaders tells whether the server granted CapHeaders on the
// current connection (lanes go to the same server).
func (c *Conn) serverReadsHeaders() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess != nil && c.sess.caps&wire.CapHeaders != 0
}

// captureReply hands the reply headers in the head of a reply (the bytes
// before its Thrift message) to a caller that asked for them.
func (s *session) captureReply(ctx context.Context, head []byte) {
	if !s.format.Header && len(head) <= wire.HeaderSize {
		return // no header block: nothing to look up
	}
	dst := metadata.ReplyCapture(ctx)
	if dst == nil {
		return
	}
	*dst = nil
	if s.format.Header {
		if h, _, err := wire.ParseTHeaderHead(head); err == nil {
			*dst = h.Info
		}
		return
	}
	if md, _, err := wire.ParseHeaderBlock(head[wire.HeaderSize:]); err == nil {
		*dst = md
	}
}

// captureLaneReply hands the reply headers of a lane or FLOCK reply
// frame to a caller that asked for them and returns the offset of the
// Thrift message.
func captureLaneReply(ctx context.Context, resp []byte) (int, error) {
	md, n, err := wire.ParseHeaderBlock(resp[wire.HeaderSize:])
	if err != nil {
		return 0, err
	}
	if dst := metadata.ReplyCapture(ctx); dst != nil {
		*dst = md
	}
	return wire.HeaderSize + n, nil
}

// readTHeader unwraps the THeader reply frame in *bp (read as a framed
// message): a compressed payload is inflated behind the header so the
// reply's head stays where captureReply looks. It returns the message's
// offset.
func (s *session) readTHeader(bp *[]byte) (int, error) {
	lim := &s.c.o.limits
	h, off, err := wire.ParseTHeaderHead(*bp)
	if err != nil {
		return 0, err
	}
	if h.Zlib {
		_, msg, err := wire.ParseTHeader(*bp, lim.MaxMessageSize)
		if err != nil {
			return 0, err
		}
		*bp = append((*bp)[:off], msg...)
	}
	if h.Proto != s.format.Proto {
		return 0, &proto.ApplicationException{Type: proto.ExcInvalidProtocol,
			Message: "THeader reply in " + h.Proto.String() + ", request in " + s.format.Proto.String()}
	}
	return off, nil
}
