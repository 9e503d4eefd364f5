//go:build cgo && linux

package server

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Lane reply memory.
//
// A dedicated lane answers one call at a time, but a reply is as large
// as its handler makes it, and a KindBatch answers many calls in one
// frame: 200 Scans batched on one shm lane grew hatkv by +647 MB against
// its 256 MiB budget (issue 43, D9), the batch's frame and the handlers'
// results charged nowhere. So a lane's replies are charged to its
// connection's share of the memory budget (WithMemoryBudget) as a TCP
// connection's are (replygate.go), from the moment they are built until
// the engine took them (afterReply):
//
//   - While the handler runs, ReserveReply works as on TCP: the call's
//     reservation (laneRoom.rq, which the call's context points to) grows
//     within the share, and within the lane's reply maximum, or in a
//     batch within what the batch's frame has left (laneRoom.rq.replyMax):
//     hatkv's Scan is then cut to fit, before it is built.
//   - A single call's built reply of laneChargeMin bytes or more is
//     admitted by its size in exchange for that reservation, waiting while
//     it does not fit (as a TCP reply does: at most WithWriteTimeout, then
//     the connection closes). Smaller ones are not charged: one at a time
//     per lane, they are bounded by the lane count, as small requests are
//     by the connections (budget.go), and the hot path takes no lock.
//   - A batch holds its frame so far: each call's reply is charged as it
//     is appended, and one that does not fit the share gets an exception
//     saying so in its place (batchFit does the same for the lane's
//     maximum), without waiting: the batch itself holds the room.
//   - A reply larger than the share is refused (encodeReply), as on TCP.
//
// A FLOCK call's request lives on the heap (callPooled): ReserveReply
// charges it as a TCP call's, within the session's share and maximum,
// until the call ends (its reply is then in FLOCK's own storage).

// laneChargeMin is the single reply size from which a lane charges it.
const laneChargeMin = wire.ChargeMin

// laneRoom is what a dedicated lane's replies hold of the memory budget.
type laneRoom struct {
	// rq stands for the call in hand where ReserveReply looks (its
	// context's rq): conn, the reply limit (replyMax) and what the
	// handler reserved (mem). The lane's real request lives on a stack.
	rq request
	// held is what the reply built and not yet sent holds (a batch's:
	// its frame so far).
	held int64
}

// openRoom points the call context cc at the lane's room, with the
// reply limit lim (a body size).
func (ls *laneSession) openRoom(cc *callCtx, lim int) {
	rq := &ls.room.rq
	rq.conn, rq.replyMax = ls.c, max(lim, 1)
	cc.rq = rq
}

// room is the reply body limit of a batch's next call: the room its
// frame has left once rest more calls have a place for an exception.
func (f *batchFit) room(out []byte, rest int) int {
	return f.max - len(out) - rest*batchExcMax - wire.HeaderSize
}

// admitLaneReply charges a single call's reply of n bytes in exchange for
// what its handler reserved, waiting while it does not fit (admitReply);
// false when it waited WithWriteTimeout (the connection is closed then)
// or the connection ended.
func (ls *laneSession) admitLaneReply(n int) bool {
	rq := &ls.room.rq
	if n < laneChargeMin || ls.c.s.budget.total <= 0 {
		ls.releaseRoom() // what the handler reserved; the reply is not charged
		return true
	}
	to := replyTo{hat: true, mem: rq.mem}
	rq.mem = 0
	if !ls.c.admitReply(&to, int64(n)) {
		return false
	}
	ls.room.held = int64(n)
	return true
}

// chargeBatch makes the batch's charge n bytes (its frame with the reply
// in hand), in exchange for what the call in hand reserved; false, and
// the reservation given back, when that does not fit the connection's
// share. With must it charges even past the share: an exception's few
// bytes, which the batch must carry.
func (ls *laneSession) chargeBatch(n int64, must bool) bool {
	c, rm := ls.c, &ls.room
	b := &c.s.budget
	if b.total <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	d := n - rm.held - rm.rq.mem
	if d > 0 && !must && !b.fits(c, d) {
		b.freeLocked(c, rm.rq.mem)
		rm.rq.mem = 0
		return false
	}
	b.used += d
	c.memHeld += d
	rm.held, rm.rq.mem = n, 0
	if d < 0 {
		b.wakeLocked()
	}
	return true
}

// releaseRoom gives back what the lane's last reply held, once it is
// sent (or the lane ended).
func (ls *laneSession) releaseRoom() {
	rm := &ls.room
	if n := rm.held + rm.rq.mem; n != 0 {
		rm.held, rm.rq.mem = 0, 0
		ls.c.s.budget.release(ls.c, n)
	}
}

// refuseShare is the exception frame for call frame f of a batch whose
// reply of size bytes does not fit the connection's memory share.
func (f *batchFit) refuseShare(ls *laneSession, call []byte, size int) []byte {
	b := &ls.c.s.budget
	b.mu.Lock()
	free := max(min(b.perConn-ls.c.memHeld, b.total-b.used), 0)
	b.mu.Unlock()
	return f.refuse(ls, call, fmt.Sprintf(
		"hatrpc: reply of %d bytes does not fit in the batch's reply: %d bytes of the connection's memory share are free (WithMemoryBudget)",
		size, free))
}

// refuse is an exception frame saying msg, in place of the reply to call
// frame f.
func (f *batchFit) refuse(ls *laneSession, call []byte, msg string) []byte {
	h, _ := wire.DecodeHeader(call, ls.c.s.opts.limits.MaxMessageSize)
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	ls.c.s.met.rejected.WithLabelValues("reply_too_large").Inc()
	exc := proto.NewApplicationException(proto.ExcInternalError, msg)
	b, _ := codec.AppendMessage(make([]byte, wire.HeaderSize, batchExcMax), h.Protocol(), "", proto.Exception, h.Seqid, exc)
	sealReplyRefs(b, nil, h.Protocol(), h.Seqid, proto.Exception, 0)
	return b
}

// appendBounded appends rep to out, growing it to at most limit bytes
// when rep fits in that (a batch frame never exceeds the lane's
// maximum, and append's doubling would allocate up to twice that).
func appendBounded(out, rep []byte, limit int) []byte {
	if need := len(out) + len(rep); need > cap(out) {
		grown := make([]byte, len(out), max(min(2*cap(out), limit), need))
		copy(grown, out)
		out = grown
	}
	return append(out, rep...)
}
