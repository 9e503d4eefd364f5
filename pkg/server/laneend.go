//go:build cgo && linux

package server

import (
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
