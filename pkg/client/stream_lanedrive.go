//go:build cgo && linux

package client

import (
	"sync/atomic"

	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
)

// A server stream whose messages are read in place in the lane's reply
// (laneRunner.loan) hands its reply from the runner to the caller and,
// once the caller gave back the last message, the lane's next exchange
// from the caller back to the runner: two hand-offs between goroutines
// an exchange, each a thread woken on a host whose cores are taken (a
// 64 KiB stream on shm: 4.6 context switches a 512 KiB exchange on the
// client, docs/performance/history.md "Bulk server streams on shm
// lanes"). So after such a reply the runner offers the next exchange to
// the caller and parks; the caller's RecvMsg that gives back the last
// lent message with nothing else queued runs it (the queued credit and
// the poll, the exchange, filing the reply) in its own goroutine and
// then finds the reply's messages queued. The runner takes its turn back
// when the caller's exchange ended the stream, when there was nothing to
// send, and when the stream's context ended (the cancel handshake and
// drain are the runner's).

const (
	driveRunner  = iota // the runner's goroutine drives the lane
	driveOffered        // the runner parked, offering the next exchange
	driveCaller         // the caller runs it
)

type callerDrive struct {
	drive    atomic.Int32
	kick     chan struct{} // the caller gives the turn back
	finished atomic.Bool   // the caller's exchange ended the stream
	creq     []byte        // the caller's request buffer
}

// offer offers the lane's next exchange to the caller after a reply it
// still reads in place, and waits until the turn is back; false: not
// offered (no message out, or none left to return and none queued, so
// no RecvMsg would take it: the runner goes on itself).
func (r *laneRunner) offer() bool {
	if r.kick == nil || r.loan.Out() == 0 {
		return false
	}
	r.loan.Hush(true)
	// A wake or kick signalled before (a return that emptied the loan
	// earlier, a turn given back while this runner was not waiting) would
	// end the wait at once: the checks below see what they told.
	select {
	case <-r.loan.Wake():
	default:
	}
	select {
	case <-r.kick:
	default:
	}
	r.drive.Store(driveOffered)
	// Re-read after the offer: a caller that gave back the last message
	// before it saw the offer does not take it.
	if r.loan.Out() == 0 && r.cs.st.Queued() == 0 && r.drive.CompareAndSwap(driveOffered, driveRunner) {
		r.loan.Hush(false)
		return false
	}
	ctxDone := r.cs.ctx.Done()
	for {
		select {
		case <-r.kick:
		case <-ctxDone:
			ctxDone = nil // the caller may hold the turn: wait for its kick
		case <-r.loan.Wake(): // Abandon: the stream is unreachable
		}
		if r.drive.CompareAndSwap(driveOffered, driveRunner) || r.drive.Load() == driveRunner {
			break
		}
	}
	r.loan.Hush(false)
	return true
}

// driveHere gives back held, the caller's last message, and runs the
// lane's next exchange when the runner offers it and this was the last
// message out of its reply.
func (r *laneRunner) driveHere(held *streamcore.Msg) {
	releaseStreamMsg(held)
	if r.drive.Load() != driveOffered || r.loan.Out() > 0 || r.cs.st.Queued() > 0 ||
		!r.drive.CompareAndSwap(driveOffered, driveCaller) {
		return
	}
	cs := r.cs
	if cs.ctx.Err() == nil {
		req := r.out.Take(r.creq[:0], laneStreamBatch)
		if len(req) > 0 || (r.spoke && r.serverMaySend() && !cs.peerDone.Load()) {
			r.cs.s.c.lanes.streamRoutes.driven.Add(1)
			if r.step(req) {
				r.finished.Store(true)
			}
		}
		// Else nothing to send and no poll to make: the runner waits for
		// the outbox, as it would have.
		r.creq = req[:0]
		if !r.finished.Load() && r.loan.Out() > 0 {
			// Lent again: the caller takes the next turn too. A context
			// that ended meanwhile hands the turn to the runner, which
			// saw it end and waits for this kick.
			r.drive.Store(driveOffered)
			if cs.ctx.Err() != nil {
				r.kickRunner()
			}
			return
		}
	}
	r.drive.Store(driveRunner)
	r.kickRunner()
}

func (r *laneRunner) kickRunner() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}
