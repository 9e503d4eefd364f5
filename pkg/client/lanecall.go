//go:build cgo && linux

package client

// A call on a lane: a lane of the function's pool is taken (or FLOCK,
// when qp_sharing lets the callers outnumber the lanes), the request frame
// encoded (a large one straight into the engine's request buffer), the
// call made and its reply frame decoded; a call the lanes cannot take goes
// on over TCP or FLOCK with the bytes encoded here. The pools and their
// lanes (getting, opening, closing) are lanes.go's.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// call runs one call on a lane of the pool (the route of a function with
// lanes); a call the lanes cannot take goes on over TCP with the bytes
// encoded here.
func (p *lanePool) call(ctx context.Context, req request, result proto.Struct) error {
	// qp_sharing=auto also shares once the callers outnumber the lanes
	// kept for callers of their own (p.dedicated), rather than queueing
	// for a lane or opening one more.
	if p.canShare && !req.fromFLOCK && p.saturated() && p.lastReq.Load() <= p.flockMax {
		return flockRoute{p}.call(ctx, req, result)
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return errDeadlineNotSent
		}
	}
	c := p.ls.c
	var l *clane
	b := req.frame
	if b == nil && p.batch == nil {
		// Mostly a lane is idle: it is taken before encoding, and its own
		// codec and buffer serve the call (no pool round trips per call).
		l = p.tryIdle()
	}
	// One deferred release for all the call holds: with one defer and
	// these few returns the compiler open-codes it, where three defers
	// went through the runtime's defer chain on every call (~20 ns).
	var held callHeld
	defer held.release(p)
	var codec *wire.Codec
	if l != nil {
		codec = l.codec
	} else {
		codec = wire.GetCodec()
		held.codec = codec
	}
	if b != nil {
		setTimeout(b, timeout) // encoded for FLOCK a moment ago
	} else {
		// Large requests are encoded straight into the lane's registered
		// staging buffer (a lease), which the engine then sends without a
		// copy; one that outgrows the lease falls back to Go memory.
		var dst []byte
		if guess := int(max(p.maxReq.Load(), int64(p.set.PayloadSize))); p.batch == nil && guess >= leaseMin {
			if l == nil {
				var err error
				if l, err = p.get(ctx, guess, getWait); err != nil {
					if err == errNoLane {
						return tcpRoute{c}.call(ctx, req, result) // nothing encoded yet
					}
					return err
				}
			}
			if lease := l.ep.RequestBuffer(guess + guess/4 + 4<<10); lease != nil {
				dst = lease[:wire.HeaderSize]
			}
		}
		var bp *[]byte
		own := false // encoded into l.buf
		switch {
		case dst != nil:
		case l != nil:
			dst, own = l.buf[:wire.HeaderSize], true
		default:
			bp = wire.GetBuf()
			held.bp = bp
			dst = (*bp)[:wire.HeaderSize]
		}
		var err error
		var memo *plainMemo
		if l != nil {
			memo = &l.plain
		}
		b, err = p.appendFrame(ctx, codec, dst, &req, memo, timeout)
		if err != nil {
			if l != nil {
				p.put(l)
			}
			return err
		}
		switch {
		case bp != nil:
			*bp = b // a grown pool buffer goes back to the pool
		case own && cap(b) > cap(l.buf) && cap(b) <= leaseMin:
			l.buf = b[:0] // grown; a large one is not kept per lane
		}
	}
	if p.batch != nil {
		// The batcher copied b: with lanes off (a setup refused), the
		// call goes over TCP with it, as an unbatched call does.
		err := p.batchCall(ctx, b, req.oneway, result, req.use)
		if err == errNoLane {
			req.frame = b
			return tcpRoute{c}.call(ctx, req, result)
		}
		return err
	}
	p.noteReq(len(b))
	if l == nil {
		var err error
		mode := getWait
		if p.canShare && !req.fromFLOCK && held.bp != nil && int64(len(b)) <= p.flockMax {
			mode = getShareable
		}
		if l, err = p.get(ctx, len(b), mode); err != nil {
			switch err {
			case errNoLane:
				req.frame = b
				return tcpRoute{c}.call(ctx, req, result)
			case errShare:
				req.frame = b
				return flockRoute{p}.callFrame(ctx, req, held.bp, codec, result)
			}
			return err
		}
	} else {
		p.growReq(len(b))
	}
	pr := p.side.Protocol(len(b))                     // counted by the endpoint (requests)
	resp, err := l.ep.CallWithin(ctx, pr, b, timeout) // the deadline read above: no second clock read
	if err != nil {
		// An interrupted exchange leaves the endpoint broken: the lane
		// goes, and a later call opens a new one.
		l.broken.Store(true)
		p.put(l)
		return callFailed(ctx, "lane", err)
	}
	held.l = l
	if req.oneway {
		return nil
	}
	p.growResp(len(resp))
	// Decoding copies what it keeps, the response being the engine's
	// lease, valid only until the lane's next call; a borrower reads it in
	// place while the lane is still ours (put is deferred).
	err = l.decodeReply(ctx, codec, resp, result, req.binaries())
	if err == nil && req.use != nil {
		return req.use()
	}
	if err != nil && errors.As(err, new(*ConnError)) {
		l.broken.Store(true) // out of step with its peer
	}
	return err
}

// callHeld is what a lane call gives back when it returns: its lane once
// the exchange succeeded (the reply is read in place until then), and a
// pooled codec and buffer when no idle lane lent its own.
type callHeld struct {
	l     *clane
	bp    *[]byte
	codec *wire.Codec
}

func (h *callHeld) release(p *lanePool) {
	if h.l != nil {
		p.put(h.l)
	}
	if h.bp != nil {
		wire.PutBuf(h.bp)
	}
	if h.codec != nil {
		wire.PutCodec(h.codec)
	}
}

// setTimeout sets the timeout in a sealed frame's header.
func setTimeout(frame []byte, timeout time.Duration) {
	h, err := wire.DecodeHeader(frame, len(frame))
	if err == nil {
		h.Timeout = timeout
		wire.PutHeader(frame, &h)
	}
}

// appendFrame appends req, a call of p's function, as a sealed HatRPC
// frame (lanes and FLOCK carry the same frames as TCP; the frame's seqid
// is fixed: one call at a time per lane, and FLOCK matches responses to
// callers itself). memo, when not nil, is the lane's: a context it names
// carries no headers.
func (p *lanePool) appendFrame(ctx context.Context, codec *wire.Codec, dst []byte, req *request, memo *plainMemo, timeout time.Duration) ([]byte, error) {
	const seq = 1
	c := p.ls.c
	kind, typ := wire.KindCall, proto.Call
	if req.oneway {
		kind, typ = wire.KindOneway, proto.Oneway
	}
	var flags uint8
	if memo == nil || !memo.holds(ctx) {
		var plain bool
		dst, flags, plain = c.appendLaneHeaders(ctx, dst)
		if plain && memo != nil {
			memo.set(ctx)
		}
	}
	b, err := codec.AppendMessage(dst, c.o.proto, p.name, typ, seq, req.args)
	if err != nil {
		return b, err
	}
	if c.o.proto == proto.Compact {
		flags |= wire.FlagCompact
	}
	wire.SealFrame(b, kind, flags, seq, timeout)
	return b, nil
}

// decodeFrame checks a reply frame from a lane or FLOCK (a reply or an
// exception whose payload is exactly the rest; otherwise a *ConnError of
// op: the peer sent garbage) and decodes its Thrift reply into result.
// aliasBinaries decodes binary values in place, as slices of resp (for
// a borrower, CallBorrowed, whose use runs while resp is still valid).
func (c *Conn) decodeFrame(ctx context.Context, op string, codec *wire.Codec, resp []byte, result proto.Struct, bin binaries) error {
	h, err := wire.DecodeHeader(resp, c.o.limits.MaxMessageSize)
	if err == nil && (h.PayloadLen() != len(resp)-wire.HeaderSize || (h.Kind != wire.KindReply && h.Kind != wire.KindException)) {
		err = fmt.Errorf("%w: %s reply kind %d, %d of %d payload bytes", wire.ErrBadFrame, op, h.Kind, len(resp)-wire.HeaderSize, h.PayloadLen())
	}
	off := wire.HeaderSize
	if err == nil && h.Flags&wire.FlagHeaders != 0 {
		off, err = captureLaneReply(ctx, resp)
	}
	if err != nil {
		return &ConnError{Op: op, Err: err}
	}
	err = withLaneStatus(decodeReply(codec, h.Protocol(), resp[off:], &c.o.limits, result, bin), resp, h.Flags)
	return ownDeadline(ctx, err)
}
