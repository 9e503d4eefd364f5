//go:build cgo && linux

package server

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// maxReplyBody is the largest reply frame body the lane carries: the
// server's message limit, or less when the lane's engine carries less
// (a frame larger than the engine's maximum cannot be sent at all).
func (ls *laneSession) maxReplyBody() int {
	limit := ls.c.s.opts.limits.MaxMessageSize
	if m := ls.l.side.Config.MaxMessage - wire.HeaderSize; m > 0 && m < limit {
		limit = m
	}
	return limit
}

// A dedicated lane's batch reply is one frame, so it must fit the lane's
// maximum: 200 Scans in one batch made a 6 GB reply the engine could not
// send, and the client waited for its own timeout. batchFit keeps the
// frame within the maximum: a call whose reply does not fit in what is
// left (after a place for an exception for each call still to run) gets
// an exception saying so instead. The server then holds at most the
// batch frame (bounded by the lane's maximum) and one call's reply.
type batchFit struct {
	max int // the batch frame's limit, header included
}

// batchExcMax bounds the frame of the exception that stands for a reply
// that does not fit (its text names two sizes and nothing the peer chose).
const batchExcMax = 256

// newBatchFit returns nil when n calls' exceptions alone would not fit.
func (ls *laneSession) newBatchFit(n int) *batchFit {
	f := &batchFit{max: ls.maxReplyBody() + wire.HeaderSize}
	if wire.HeaderSize+n*batchExcMax > f.max {
		return nil
	}
	return f
}

// batchTooMany is the exception for a batch whose calls could not all be
// answered within the lane's maximum even as exceptions.
func batchTooMany(ls *laneSession, n int) *proto.ApplicationException {
	return proto.NewApplicationException(proto.ExcProtocolError,
		fmt.Sprintf("batch: %d calls cannot be answered within the lane's message limit of %d bytes", n, ls.maxReplyBody()))
}

// admit returns rep, the reply frame to call frame f, or, when it does
// not fit in out with rest calls still to answer, an exception frame in
// its place.
func (f *batchFit) admit(ls *laneSession, out, rep, call []byte, rest int) []byte {
	room := f.max - len(out) - rest*batchExcMax
	if len(rep) <= room {
		return rep
	}
	return f.refuse(ls, call, fmt.Sprintf(
		"hatrpc: reply of %d bytes does not fit in the batch's reply: %d bytes left of the lane's message limit of %d bytes",
		len(rep)-wire.HeaderSize, max(room-wire.HeaderSize, 0), f.max-wire.HeaderSize))
}
