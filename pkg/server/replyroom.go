package server

// Replies larger than their method's estimate.
//
// A call reserves the reply its method is expected to send (replygate.go),
// learned from the method's earlier replies. A handler whose reply can
// be far larger than that (a Scan of 10,000 records after one of 1)
// builds it uncharged: after one Scan(1), 64 Thrift-over-HTTP Scans of
// 10,000 records grew hatkv by +399 MB against a 320 MiB budget (issue
// 43). The server cannot tell how large a reply will be before the
// handler built it, and refusing it then is too late: the memory was
// taken. So a handler that builds a large reply piece by piece reserves
// as it goes (ReserveReply) and stops where the room ends: hatkv's Scan
// then cuts its answer and says so. ReserveReply never waits: a handler
// waiting for room would hold what it built so far, and replies queued
// behind it may need the room; cutting the answer returns at once and
// stalls no one.
//
// The call context carries its request (callCtx.rq) so that no map or
// lock is needed to find it (a FLOCK call's too); a dedicated lane's
// call carries the lane's room instead (lanereply.go), whose limit is the
// lane's reply maximum, or in a batch what the batch's frame has left.
// Streams (bounded by their windows) have none: ReserveReply returns nil
// for them.

import (
	"context"
	"errors"
	"fmt"
)

// ErrReplyRoom is matched (errors.Is) by the errors ReserveReply returns.
var ErrReplyRoom = errors.New("no room for the reply")

// ReplyRoomError is what ReserveReply returns when a reply of Size bytes
// cannot be held: Limit is the message limit (MessageLimit true) or the
// free room of the connection's memory share, in bytes.
type ReplyRoomError struct {
	Size, Limit  int64
	MessageLimit bool
}

func (e *ReplyRoomError) Error() string {
	if e.MessageLimit {
		return fmt.Sprintf("hatrpc: reply of %d bytes exceeds the message limit of %d bytes", e.Size, e.Limit)
	}
	return fmt.Sprintf("hatrpc: no room for a reply of %d bytes: %d bytes of the connection's memory share are free (WithMemoryBudget)", e.Size, e.Limit)
}

func (e *ReplyRoomError) Is(target error) bool { return target == ErrReplyRoom }

// replyRoomKey finds the call's context through any context derived
// from it.
type replyRoomKey struct{}

// ReserveReply tells the server that the reply of the call whose handler
// ctx belongs to will take about n bytes (encoded), before the handler
// builds it: the call's memory reservation grows to hold it, or, when n
// exceeds the message limit (on a lane, its reply maximum; in a lane's
// batch, what the batch's reply has left) or the room the connection's
// memory share has left (WithMemoryBudget), a *ReplyRoomError (errors.Is ErrReplyRoom)
// says so and nothing changes. A handler that builds a large reply piece
// by piece calls it as it goes, with the size so far, and stops (cuts its
// answer, or fails) where it gets an error. It never waits. Call it from
// the handler, before it returns; called again, the larger size counts.
// Without a budget it checks the message limit only. In a stream or
// with a context not of a call it returns nil (streams' windows bound
// their replies).
func ReserveReply(ctx context.Context, n int) error {
	cc, _ := ctx.Value(replyRoomKey{}).(*callCtx)
	if cc == nil || n <= 0 {
		return nil
	}
	if cc.state.Load() != ctxLive {
		return ctx.Err()
	}
	r := cc.rq
	c := r.conn
	limit := r.replyLimit()
	if n > limit {
		c.s.met.rejected.WithLabelValues("reply_too_large").Inc()
		return &ReplyRoomError{Size: int64(n), Limit: int64(limit), MessageLimit: true}
	}
	b := &c.s.budget
	if b.total <= 0 {
		return nil
	}
	// The handler's result and the reply encoded from it are alive
	// together, as for the method's estimate (reserveReply); at most
	// the whole share, which a reply of n may take on its own.
	want := min(2*int64(n), b.perConn)
	b.mu.Lock()
	defer b.mu.Unlock()
	d := want - r.mem
	if d <= 0 && !c.overShare(n) {
		return nil
	}
	// Replies waiting for admission come first (reserve); a reply over
	// the share could never be sent.
	if c.rg.waiting == 0 && b.fits(c, d) && !c.overShare(n) {
		b.take(c, d)
		r.mem += d
		return nil
	}
	room := max(b.roomLocked(c)+r.mem, 0) / 2
	return &ReplyRoomError{Size: int64(n), Limit: room}
}

// replyLimit is the message limit of r's reply: the server's, or on a
// lane its reply maximum, in a lane's batch what the batch has left.
func (r *request) replyLimit() int {
	if r.replyMax > 0 {
		return r.replyMax
	}
	return r.conn.s.opts.limits.MaxMessageSize
}

// ReplyRoom is the most the reply of the call whose handler ctx belongs
// to may take now, in bytes of its encoding: the largest n ReserveReply
// would grant at this moment (the message limit, on a lane its reply
// maximum, in a lane's batch what the batch has left, and with a memory
// budget what the connection's share has free). It reserves nothing:
// other calls may take the room meanwhile, so a handler sizing its
// answer with it still reserves what it builds (ReserveReply). ok is
// false outside a call (a stream's windows bound its messages, and a
// context not of a call has no reply).
func ReplyRoom(ctx context.Context) (n int, ok bool) {
	cc, _ := ctx.Value(replyRoomKey{}).(*callCtx)
	if cc == nil {
		return 0, false
	}
	if cc.state.Load() != ctxLive {
		return 0, true
	}
	r := cc.rq
	c := r.conn
	room := int64(r.replyLimit())
	b := &c.s.budget
	if b.total <= 0 {
		return int(room), true
	}
	// ReserveReply grants n when min(2n, perConn) fits in what the call
	// holds and the room the connection may still take (none while
	// replies wait for admission or the budget is being given back).
	b.mu.Lock()
	free := r.mem
	if c.rg.waiting == 0 && !b.gcing {
		free += max(b.roomLocked(c), 0)
	}
	b.mu.Unlock()
	room = min(room, b.shareOf(c))
	if free < b.perConn {
		room = min(room, free/2)
	}
	return int(room), true
}
