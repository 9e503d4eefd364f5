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

// replyRoom is the most the reply body of the lane's call in hand may
// take (reply.go): the lane's maximum or the connection's share, and in
// a batch what the batch's frame has left, within the lane's maximum
// (batchLim) and the share's free room (batch replies do not wait for
// room: the batch holds what it has).
func (ls *laneSession) replyRoom() int {
	c := ls.c
	room := c.replyRoom(ls.maxReplyBody())
	if !ls.inBatch {
		return room
	}
	room = min(room, ls.batchLim)
	if b := &c.s.budget; b.total > 0 {
		rm := &ls.room
		b.mu.Lock()
		free := b.roomLocked(c) + rm.held + rm.rq.mem - int64(ls.batchLen) - wire.HeaderSize
		b.mu.Unlock()
		room = int(max(min(int64(room), free), 0))
	}
	return room
}

// refusal is conn.refusal for the lane's call in hand, whose reply body
// of size bytes had room bytes (replyRoom): in a batch, a reply within
// the lane's maximum and the share that does not fit what the batch has
// left gets an exception saying which room it lacks.
func (ls *laneSession) refusal(size, room int) *proto.ApplicationException {
	if exc := ls.c.refusal(size, ls.maxReplyBody(), false); exc != nil || !ls.inBatch || size <= room {
		return exc
	}
	ls.c.s.met.rejected.WithLabelValues("reply_too_large").Inc()
	if size > ls.batchLim {
		return proto.NewApplicationException(proto.ExcInternalError, batchNoRoom(size, ls.batchLim, ls.maxReplyBody()))
	}
	return proto.NewApplicationException(proto.ExcInternalError, batchNoShare(size, ls.c))
}

// batchNoRoom says that a batch call's reply of size bytes does not fit
// the left bytes the batch's frame has left of the lane's maximum max.
func batchNoRoom(size, left, max int) string {
	return fmt.Sprintf("hatrpc: reply of %d bytes does not fit in the batch's reply: %d bytes left of the lane's message limit of %d bytes",
		size, left, max)
}

// batchNoShare says that a batch call's reply of size bytes does not fit
// the free room of c's memory share.
func batchNoShare(size int, c *conn) string {
	b := &c.s.budget
	b.mu.Lock()
	free := max(b.roomLocked(c), 0)
	b.mu.Unlock()
	return fmt.Sprintf("hatrpc: reply of %d bytes does not fit in the batch's reply: %d bytes of the connection's memory share are free (WithMemoryBudget)",
		size, free)
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
	return f.refuse(ls, call, batchNoRoom(len(rep)-wire.HeaderSize, max(room-wire.HeaderSize, 0), f.max-wire.HeaderSize))
}
