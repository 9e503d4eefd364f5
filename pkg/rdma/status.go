package rdma

/*
#include "hr.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Status is the C core's status code (hr_status). Each non-OK value is also
// an error, so the exported Err* values below work with errors.Is on every
// error this package returns, and on Completion.Err.
type Status uint32

// The one status enum, mirrored from hr.h (checked by TestStatusMirror).
const (
	StatusOK           Status = 0
	StatusNoDevice     Status = 1
	StatusNoMem        Status = 2
	StatusInvalid      Status = 3
	StatusNoResources  Status = 4
	StatusRemoteAccess Status = 5
	StatusRNRRetry     Status = 6
	StatusRetryExc     Status = 7
	StatusFlushed      Status = 8
	StatusClosed       Status = 9
	StatusLocalProt    Status = 10
	StatusLocalLen     Status = 11
	StatusRemoteInval  Status = 12
	StatusRemoteOp     Status = 13
	StatusCQOverflow   Status = 14
	StatusTimedOut     Status = 15
	StatusBadState     Status = 16
	StatusNotSupported Status = 17
	StatusIO           Status = 18
	StatusBadPeer      Status = 19
	StatusLocalOp      Status = 20
	statusMax          Status = 21
)

// Sentinel errors, matched with errors.Is.
var (
	ErrNoDevice      error = StatusNoDevice
	ErrNoMem         error = StatusNoMem
	ErrInvalid       error = StatusInvalid
	ErrNoResources   error = StatusNoResources
	ErrRemoteAccess  error = StatusRemoteAccess
	ErrRNRRetry      error = StatusRNRRetry
	ErrRetryExceeded error = StatusRetryExc
	ErrFlushed       error = StatusFlushed
	ErrClosed        error = StatusClosed
	ErrLocalProt     error = StatusLocalProt
	ErrLocalLen      error = StatusLocalLen
	ErrRemoteInvalid error = StatusRemoteInval
	ErrRemoteOp      error = StatusRemoteOp
	ErrCQOverflow    error = StatusCQOverflow
	ErrTimedOut      error = StatusTimedOut
	ErrBadState      error = StatusBadState
	ErrNotSupported  error = StatusNotSupported
	ErrIO            error = StatusIO
	ErrBadPeer       error = StatusBadPeer
	// ErrLocalOp is a local QP operation error: a work request the device
	// could not execute locally. Some devices (rxe) report a bad lkey so,
	// where the IB spec has a local protection error.
	ErrLocalOp error = StatusLocalOp
)

func (s Status) Error() string {
	if s >= statusMax {
		return fmt.Sprintf("rdma: status %d", uint32(s))
	}
	return "rdma: " + C.GoString(C.hr_status_str(C.int(s)))
}

// Error is an operation failure carrying the C status.
type Error struct {
	Op     string
	Status Status
}

func (e *Error) Error() string { return e.Op + ": " + e.Status.Error() }
func (e *Error) Unwrap() error { return e.Status }

// PostError reports which work request of a chain was refused; the ones
// before Index were posted.
type PostError struct {
	Op     string
	Index  int
	Status Status
}

func (e *PostError) Error() string {
	return fmt.Sprintf("%s: work request %d: %v", e.Op, e.Index, e.Status)
}
func (e *PostError) Unwrap() error { return e.Status }

// The single place C statuses become Go errors.
func statusErr(op string, st C.int) error {
	if st < 0 {
		st = -st
	}
	if st == C.HR_OK {
		return nil
	}
	return &Error{Op: op, Status: Status(st)}
}

// IsStatus reports whether err carries status s.
func IsStatus(err error, s Status) bool { return errors.Is(err, s) }
