//go:build cgo && linux

package server

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
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
//   - A batch holds its frame so far, by its capacity (growBatch): each
//     call's reply is charged as it is appended, and one that does not
//     fit the share gets an exception saying so in its place (batchFit
//     does the same for the lane's maximum), without waiting: the batch
//     itself holds the room.
//   - A reply larger than the share is refused (encodeReply), as on TCP.
//   - The fast path's connections together hold at most a quarter of
//     the budget (fastPathShare, budget.go), so lanes cannot take the
//     room TCP clients wait for.
//
// A FLOCK call's request lives on the heap (callPooled): ReserveReply
// charges it as a TCP call's, within the session's share and maximum,
// until the call ends (its reply is then in FLOCK's own storage).

// batch runs the calls of an RF-RPC batch one after the other and
// answers with their replies in one frame, in order; a oneway call's place
// holds an empty reply.
func (ls *laneSession) batch(req []byte) ([]byte, rdma.Protocol) {
	c, l := ls.c, ls.l
	lim := &c.s.opts.limits
	h, err := wire.DecodeHeader(req, lim.MaxMessageSize)
	var frames [][]byte
	if err == nil {
		frames, err = wire.SplitFrames(req[wire.HeaderSize:], lim.MaxMessageSize)
	}
	if err != nil {
		return ls.reply(&replyTo{proto: h.Protocol(), seqid: h.Seqid}, proto.Exception,
			proto.NewApplicationException(proto.ExcProtocolError, "batch: "+err.Error()), nil, 0, nil)
	}
	fit := ls.newBatchFit(len(frames))
	if fit == nil {
		return ls.reply(&replyTo{proto: h.Protocol(), seqid: h.Seqid}, proto.Exception, batchTooMany(ls, len(frames)), nil, 0, nil)
	}
	out := make([]byte, wire.HeaderSize, min(64<<10, fit.max))
	ls.inBatch = true
	defer func() { ls.inBatch = false }()
	for i, f := range frames {
		rest := len(frames) - 1 - i
		ls.batchLim = fit.room(out, rest)
		rep, _ := ls.call(f)
		if rep == nil {
			var empty [wire.HeaderSize]byte
			wire.SealFrame(empty[:], wire.KindReply, 0, 0, 0)
			rep = empty[:]
		}
		rep = fit.admit(ls, out, rep, f, rest)
		grown, ok := ls.growBatch(out, rep, fit.max, false)
		if !ok {
			rep = fit.refuseShare(ls, f, len(rep)-wire.HeaderSize)
			grown, _ = ls.growBatch(out, rep, fit.max, true)
		}
		out = append(grown, rep...) // rep lives in ls.buf, reused by the next call
	}
	wire.SealFrame(out, wire.KindBatch, 0, h.Seqid, 0)
	return out, l.side.Protocol(len(out))
}

// laneChargeMin is the single reply size from which a lane charges it.
const laneChargeMin = wire.ChargeMin

// laneRoom is what a dedicated lane's replies hold of the memory budget.
type laneRoom struct {
	// rq stands for the call in hand where ReserveReply looks (its
	// context's rq): conn, the reply limit (replyMax) and what the
	// handler reserved (mem). The lane's real request lives on a stack.
	rq request
	// held is what the reply built and not yet sent holds (a batch's:
	// its frame so far, by its capacity).
	held int64
	// large: the lane charged a reply over giveBackMin; its end gives
	// memory back to the OS (endRoom).
	large bool
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
	ls.room.large = ls.room.large || n > giveBackMin
	return true
}

// endRoom gives back what the lane held when it ends, and memory to the
// OS if it ever held a large reply: the give-back its last release kicked
// may have run while the lane still held its buffers, and no later
// release comes to kick another (200 Scans batched on lanes left +237 MB
// of RssAnon 10 s after the client left).
func (ls *laneSession) endRoom() {
	ls.releaseRoom()
	if ls.room.large {
		ls.c.s.budget.giveBackAgain()
	}
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
	b.take(c, d)
	rm.held, rm.rq.mem = n, 0
	rm.large = rm.large || n > giveBackMin
	if d < 0 {
		b.wakeLocked()
	}
	return true
}

// growBatch makes room in the batch's frame out for rep, charging the
// frame by its capacity (the memory it takes): doubled up to the lane's
// maximum (fit.max) when that fits the share, else just large enough.
// It reports false when not even that fits (rep is then refused); an
// exception (must) is always given room.
func (ls *laneSession) growBatch(out []byte, rep []byte, limit int, must bool) ([]byte, bool) {
	need := len(out) + len(rep)
	if need <= cap(out) {
		return out, ls.chargeBatch(int64(max(cap(out), need)), must)
	}
	if grown := max(min(2*cap(out), limit), need); grown > need && ls.chargeBatch(int64(grown), false) {
		return growTo(out, grown), true
	}
	if !ls.chargeBatch(int64(need), must) {
		return out, false
	}
	return growTo(out, need), true
}

// growTo is out in a buffer of capacity n.
func growTo(out []byte, n int) []byte {
	b := make([]byte, len(out), n)
	copy(b, out)
	return b
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
	free := max(b.roomLocked(ls.c), 0)
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
