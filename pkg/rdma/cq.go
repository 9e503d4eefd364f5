package rdma

/*
#include "hr.h"
*/
import "C"

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"
)

// CQ is a completion queue, optionally with its own completion channel for
// event mode.
type CQ struct {
	dev    *Device
	p      *C.hr_cq
	ch     *C.hr_chan
	closed atomic.Bool
}

type cqConfig struct{ events bool }

// CQOption configures CreateCQ.
type CQOption func(*cqConfig)

// WithEvents gives the CQ a completion channel so Wait and FD work.
func WithEvents() CQOption { return func(c *cqConfig) { c.events = true } }

// CreateCQ creates a completion queue holding at least depth completions.
func (d *Device) CreateCQ(depth int, opts ...CQOption) (*CQ, error) {
	var c cqConfig
	for _, o := range opts {
		o(&c)
	}
	cq := &CQ{dev: d}
	if c.events {
		if err := statusErr("create channel", C.hr_create_chan(d.p, &cq.ch)); err != nil {
			return nil, err
		}
	}
	if err := statusErr("create cq", C.hr_create_cq(d.p, C.uint32_t(depth), cq.ch, &cq.p)); err != nil {
		if cq.ch != nil {
			C.hr_destroy_chan(cq.ch)
		}
		return nil, err
	}
	return cq, nil
}

func wcPtr(wcs []Completion) *C.hr_wc { return (*C.hr_wc)(unsafe.Pointer(&wcs[0])) }

func pollResult(n C.int) (int, error) {
	if n < 0 {
		return 0, statusErr("poll cq", n)
	}
	return int(n), nil
}

// Poll returns the completions available now: one cgo crossing for the
// whole batch.
func (cq *CQ) Poll(wcs []Completion) (int, error) {
	if cq.closed.Load() {
		return 0, &Error{Op: "poll cq", Status: StatusClosed}
	}
	if len(wcs) == 0 {
		return 0, nil
	}
	return pollResult(C.hr_poll_cq(cq.p, C.int(len(wcs)), wcPtr(wcs)))
}

// PollSpin busy-polls in C for up to spin until at least one completion
// arrives; it returns 0 completions if none did.
func (cq *CQ) PollSpin(wcs []Completion, spin time.Duration) (int, error) {
	if cq.closed.Load() {
		return 0, &Error{Op: "poll cq", Status: StatusClosed}
	}
	if len(wcs) == 0 {
		return 0, nil
	}
	return pollResult(C.hr_poll_spin(cq.p, C.int(len(wcs)), wcPtr(wcs), C.uint64_t(spin)))
}

// maxWaitSlice bounds one blocking crossing so cancellation is noticed.
const maxWaitSlice = 50 * time.Millisecond

// Wait blocks (in C, off any Go P) until completions arrive or ctx ends.
func (cq *CQ) Wait(ctx context.Context, wcs []Completion) (int, error) {
	if cq.ch == nil || len(wcs) == 0 {
		return 0, &Error{Op: "wait cq", Status: StatusInvalid}
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		slice := maxWaitSlice
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < slice {
				slice = left
			}
		}
		ms := int(slice / time.Millisecond)
		if ms < 1 {
			ms = 1
		}
		n := C.hr_wait_cq(cq.p, cq.ch, C.int(len(wcs)), wcPtr(wcs), C.int(ms))
		if n != 0 {
			return pollResult(n)
		}
	}
}

// FD is the completion channel's file descriptor (readable when an event is
// pending after Arm); -1 without WithEvents.
func (cq *CQ) FD() (int, error) {
	if cq.ch == nil {
		return -1, &Error{Op: "cq fd", Status: StatusInvalid}
	}
	fd := C.hr_chan_fd(cq.ch)
	if fd < 0 {
		return -1, statusErr("cq fd", fd)
	}
	return int(fd), nil
}

// Arm requests an event for the next completion (or next solicited one).
func (cq *CQ) Arm(solicitedOnly bool) error {
	so := C.int(0)
	if solicitedOnly {
		so = 1
	}
	return statusErr("arm cq", C.hr_arm_cq(cq.p, so))
}

// WaitEvent blocks until an armed event fires (or timeout) and acks it.
func (cq *CQ) WaitEvent(ctx context.Context) error {
	if cq.ch == nil {
		return &Error{Op: "wait event", Status: StatusInvalid}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var ev *C.hr_cq
		st := C.hr_get_cq_event(cq.ch, C.int(maxWaitSlice/time.Millisecond), &ev)
		if st == C.HR_ETIMEDOUT {
			continue
		}
		if err := statusErr("get cq event", st); err != nil {
			return err
		}
		C.hr_ack_cq_events(ev, 1)
		return nil
	}
}

// Depth is how many completions the CQ holds (at least the requested depth).
func (cq *CQ) Depth() int { return int(C.hr_cq_depth(cq.p)) }

// Close destroys the CQ (its QPs must be closed first).
func (cq *CQ) Close() error {
	if cq.closed.Swap(true) {
		return &Error{Op: "destroy cq", Status: StatusClosed}
	}
	if err := statusErr("destroy cq", C.hr_destroy_cq(cq.p)); err != nil {
		cq.closed.Store(false) // still in use by a QP: may be closed later
		return err
	}
	if cq.ch != nil {
		return statusErr("destroy channel", C.hr_destroy_chan(cq.ch))
	}
	return nil
}
