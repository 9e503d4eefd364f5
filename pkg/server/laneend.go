//go:build cgo && linux

package server

import (
	"context"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// laneEnd is what a lane's call leaves for afterReply.
type laneEnd struct {
	m    *method // nil: nothing left
	call any     // the call value to reset for the next call of m
	// A lane meter's call, whose context and slot are still held:
	metered    bool
	st         *methodStats
	at         time.Duration
	rep, frame int
	pr         rdma.Protocol
	ctx        *callCtx
	res        proto.Struct
	err        error
}

// afterReply ends the lane's last call: its context ends and its slot is
// given back, the meter files its latency (from arrival until now: the
// reply is handed to the engine, or on its way), its outcome and its
// reply, and its call value is reset for the next call of the method,
// holding no reference till then; what the reply held of the memory
// budget is given back. ServeCalls runs it once per reply
// (rdma.AfterReply).
func (ls *laneSession) afterReply() {
	if !ls.inBatch && ls.room.held|ls.room.rq.mem != 0 {
		ls.releaseRoom() // the reply is sent (a batch's calls' with the batch)
	}
	e := &ls.end
	m := e.m
	if m == nil {
		return
	}
	if e.metered {
		if e.ctx != nil {
			e.ctx.release()
			if m.bctx {
				ls.keepCtx(e.ctx)
			}
		}
		ls.c.s.slots.release()
		// A failed call's outcome (rare, and labelled) goes to the
		// method's children; the meter counts an ok one.
		o := serverOutcome(e.res, e.err, false)
		ok := o == proto.OutcomeOK
		if !ok {
			e.st.outcome(o)
		}
		ls.l.meter.end(m, time.Since(epoch)-e.at, ok, e.rep, e.frame, int(e.pr))
	}
	if e.call != nil {
		args, call := m.m.NewCall(e.call)
		ls.next.m, ls.next.args, ls.next.call = m, args, call
	}
	*e = laneEnd{}
}

// borrowedCtx is the context of a dedicated lane's call of a borrow_ctx
// method: the one its last such call ended with, reset, else a fresh
// one. The hint promises that nothing keeps a call's context past the
// call, so a lane running a 64 B echo allocates nothing a call: at 72
// bytes a call the server collected every ~60,000 calls, and each
// collection stalled a train of calls for 0.1-0.7 ms (the lanes' tail).
func (ls *laneSession) borrowedCtx(parent context.Context, dl time.Duration) *callCtx {
	c := ls.spareCtx
	ls.spareCtx = nil
	if c == nil || c.w.Load() != nil {
		// None kept, or someone asked the ended one for Done after all
		// (a handler that broke the promise): its channel is closed, and
		// a later call must not inherit it.
		return ls.ctxs.next(parent, dl)
	}
	c.parent, c.dl, c.rq, c.hasRID = parent, dl, nil, false
	c.sc.Store(nil)
	c.state.Store(ctxLive)
	return c
}

// keepCtx keeps the ended context of a borrow_ctx call for the lane's
// next one (borrowedCtx), unless its handler asked for the Done channel:
// the deadline's timer or the parent's watch it set up may still be
// about to end it, and would end the next call instead.
func (ls *laneSession) keepCtx(c *callCtx) {
	if c.w.Load() == nil {
		ls.spareCtx = c
	}
}
