//go:build cgo && linux

package client

import (
	"context"
	"encoding/binary"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A lane carries one function's calls, one at a time, under a fixed
// seqid, so its replies start with the same bytes every time: the frame
// header after the length field (kind, flags, seqid, timeout) and the
// Thrift message header (type, name, seqid). Checking the frame header
// and parsing the message header of every reply cost ~35 ns of a 64 B
// call's ~80 ns decode (BenchmarkLaneReply); comparing the head with the
// last plain reply's bytes costs a few. A reply whose bytes differ (an
// exception, reply headers, another protocol) takes the full path,
// which checks everything.

// decodeReply is Conn.decodeFrame for a reply on lane l: what it
// accepts, rejects and decodes is the same.
func (l *clane) decodeReply(ctx context.Context, codec *wire.Codec, resp []byte, result proto.Struct, bin binaries) error {
	c := l.p.ls.c
	if body, p, ok := l.replyBody(resp, c.o.limits.MaxMessageSize); ok {
		return ownDeadline(ctx, decodeResult(codec, p, body, &c.o.limits, result, bin))
	}
	err := c.decodeFrame(ctx, "lane", codec, resp, result, bin)
	if err == nil && l.head == nil {
		l.learn(resp)
	}
	return err
}

// replyBody returns the body of resp, and its protocol, when resp has the
// head of the lane's plain replies and a consistent length: the frame
// header and message header decodeFrame would accept as a reply.
func (l *clane) replyBody(resp []byte, maxPayload int) ([]byte, proto.Protocol, bool) {
	n := len(l.head)
	if n == 0 || len(resp) < 4+n || len(resp)-wire.HeaderSize > maxPayload ||
		int64(binary.BigEndian.Uint32(resp)) != int64(len(resp)-4) || string(resp[4:4+n]) != string(l.head) {
		return nil, 0, false
	}
	p := proto.Binary
	if resp[5]&wire.FlagCompact != 0 {
		p = proto.Compact
	}
	return resp[4+n:], p, true
}

// learn keeps the head of resp, a reply that decoded, when it is a plain
// one: a reply (not an exception) without reply headers.
func (l *clane) learn(resp []byte) {
	h, err := wire.DecodeHeader(resp, len(resp))
	if err != nil || h.Kind != wire.KindReply || h.Flags&wire.FlagHeaders != 0 {
		return
	}
	mh, err := wire.ParseMsgHeader(h.Protocol(), resp[wire.HeaderSize:])
	if err != nil || mh.Type != proto.Reply {
		return
	}
	l.head = append([]byte(nil), resp[4:wire.HeaderSize+mh.Body]...)
}
