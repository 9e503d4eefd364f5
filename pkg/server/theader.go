package server

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// thCall is what a THeader reply needs of its request: the header to echo
// (flags, sequence id, compression) and the call's headers.
type thCall struct {
	info wire.THeaderInfo
	sc   *metadata.ServerCall // nil when the request never reached a handler
}

// errSkipped: readTHeader answered the message itself; the connection
// goes on.
var errSkipped = errors.New("server: THeader message answered busy")

// readTHeader unwraps a THeader frame read on a plain connection: the
// reader notes whom its reply goes to (c.thCur, taken with the reply's
// order) and returns the Thrift message and its protocol. A frame that
// does not decode is answered with a PROTOCOL_ERROR exception (in
// THeader, uncompressed) before the connection closes; one whose
// inflation the memory budget cannot hold now is answered "server busy"
// (errSkipped).
func (c *conn) readTHeader(frame []byte) ([]byte, proto.Protocol, error) {
	// Inflation is charged to the request memory budget (like the frame),
	// and held to what the connection's cap leaves beside the frame: more
	// would wait for memory this very message holds.
	max := c.s.opts.limits.MaxMessageSize
	if b := &c.s.budget; b.total > 0 {
		max = int(min(int64(max), b.perConn-c.charging, b.total-c.charging))
	}
	h, msg, err := wire.ParseTHeaderCharged(frame, max, c.chargeInflated)
	if err != nil {
		h.Zlib, h.Info = false, nil
		c.thCur = &thCall{info: h}
		// What was inflated before a refusal names the call.
		name, seqid := "", h.Seqid
		if mh, herr := wire.ParseMsgHeader(h.Proto, msg); herr == nil {
			name, seqid = string(mh.Name), mh.Seqid
		}
		if errors.Is(err, errBudgetWait) {
			c.s.met.rejected.WithLabelValues("memory_budget").Inc()
			c.releaseCharge()
			c.replyNow(&replyTo{proto: h.Proto, name: name, seqid: seqid}, proto.Exception,
				proto.NewApplicationException(proto.ExcInternalError, errBudgetWait.Error()), nil)
			return nil, 0, errSkipped
		}
		if len(frame) >= 10 && wire.IsTHeader(frame) {
			c.fatalReply(&replyTo{proto: h.Proto, name: name, seqid: seqid}, err)
		}
		return nil, 0, err
	}
	c.thCur = &thCall{info: h, sc: metadata.NewServerCall(h.Info)}
	return msg, h.Proto, nil
}

// chargeInflated admits the inflated size of a compressed THeader
// message. One whose frame holds nothing of the budget waits like any
// framed message (charge); one whose frame was charged waits a moment at
// most: messages holding memory while they wait for more could hold the
// whole budget between them forever.
func (c *conn) chargeInflated(n int) error {
	if c.charging == 0 {
		return c.charge(n)
	}
	if err := c.s.budget.acquire(c, int64(n), time.Millisecond); err != nil {
		return err
	}
	c.charging += int64(n)
	return nil
}

// plainMsgHeader parses the message header at the start of a framed plain
// message's buffered bytes (the frame length already consumed), looking
// through a THeader when the connection speaks it.
func (c *conn) plainMsgHeader(p proto.Protocol, head []byte) (wire.MsgHeader, proto.Protocol, error) {
	if !c.format.Header {
		mh, err := wire.ParseMsgHeader(p, head)
		return mh, p, err
	}
	h, off, err := wire.ParseTHeaderHead(head)
	if err != nil {
		return wire.MsgHeader{}, p, err
	}
	c.thCur = &thCall{info: wire.THeaderInfo{Flags: h.Flags, Seqid: h.Seqid, Proto: h.Proto}}
	if h.Zlib {
		return wire.MsgHeader{}, h.Proto, fmt.Errorf("%w: compressed message header", proto.ErrInvalidData)
	}
	mh, err := wire.ParseMsgHeader(h.Proto, head[off:])
	return mh, h.Proto, err
}

// noteTHeaderOrder ties the THeader of the message just read to its reply
// position; called by the reader with each plain order it takes.
func (c *conn) noteTHeaderOrder(order uint64) {
	th := c.thCur
	if th == nil {
		th = &thCall{info: wire.THeaderInfo{Proto: c.format.Proto}}
	}
	c.mu.Lock()
	if c.th == nil {
		c.th = map[uint64]*thCall{}
	}
	c.th[order] = th
	c.mu.Unlock()
}

// wrapTHeader turns the plain message in *bp into the THeader frame
// answering the request at order, with the handler's reply headers.
func (c *conn) wrapTHeader(order uint64, bp *[]byte) {
	c.mu.Lock()
	th := c.th[order]
	delete(c.th, order)
	c.mu.Unlock()
	info := wire.THeaderInfo{Proto: c.format.Proto}
	if th != nil {
		info = th.info
		info.Info = nil
		if th.sc != nil {
			info.Info = th.sc.Reply()
		}
	}
	if !wire.THeaderHeadFits(info.Info) {
		info.Info = nil // an answer without headers beats none at all
	}
	msg := *bp
	out := wire.GetBuf()
	head := wire.PlainFrameHead(c.format)
	b := append((*out)[:0], make([]byte, head)...)
	b = wire.AppendTHeaderHead(b, &info, info.Zlib)
	off := len(b)
	b = append(b, msg...)
	if info.Zlib {
		b = wire.CompressTHeader(b, off)
	}
	wire.SealPlainFrame(c.format, b, 0)
	*out, *bp = msg[:0], b
	wire.PutBuf(out)
}

// laneHeaders takes the header block of a lane or FLOCK request frame
// (req is the engine's lease: the bytes are copied) and returns the
// offset of its Thrift message.
func laneHeaders(req []byte) (*metadata.ServerCall, int, error) {
	n, err := wire.HeaderBlockLen(req[wire.HeaderSize:])
	if err != nil {
		return nil, 0, err
	}
	raw := bytes.Clone(req[wire.HeaderSize+4 : wire.HeaderSize+n])
	return metadata.NewLazyServerCall(raw, wire.ParseKV), wire.HeaderSize + n, nil
}

// replyMD is the reply header set of a call that can send one.
func replyMD(r *request) metadata.MD {
	if r.sc == nil || !r.hat {
		return nil
	}
	return r.sc.Reply()
}

// requestID is the call's request id for log lines ("" if none).
func requestID(r *request) string {
	switch {
	case r.sc != nil:
		return r.sc.Incoming()[metadata.RequestIDKey]
	case r.hasRID:
		return string(r.rid[:])
	}
	return ""
}
