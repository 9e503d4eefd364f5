package lmdb

/*
#include "hatlmdb.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
)

// Errno is an LMDB-specific status code (the MDB_* error range). System
// errors reported by LMDB are surfaced as syscall.Errno instead, so callers
// can use errors.Is(err, fs.ErrNotExist) and friends.
type Errno int

// The LMDB status codes. They are the only place LMDB's numeric codes enter
// Go; every call site goes through statusError below.
const (
	ErrKeyExist        Errno = C.MDB_KEYEXIST
	ErrNotFound        Errno = C.MDB_NOTFOUND
	ErrPageNotFound    Errno = C.MDB_PAGE_NOTFOUND
	ErrCorrupted       Errno = C.MDB_CORRUPTED
	ErrPanic           Errno = C.MDB_PANIC
	ErrVersionMismatch Errno = C.MDB_VERSION_MISMATCH
	ErrInvalid         Errno = C.MDB_INVALID
	ErrMapFull         Errno = C.MDB_MAP_FULL
	ErrDBsFull         Errno = C.MDB_DBS_FULL
	ErrReadersFull     Errno = C.MDB_READERS_FULL
	ErrTLSFull         Errno = C.MDB_TLS_FULL
	ErrTxnFull         Errno = C.MDB_TXN_FULL
	ErrCursorFull      Errno = C.MDB_CURSOR_FULL
	ErrPageFull        Errno = C.MDB_PAGE_FULL
	ErrMapResized      Errno = C.MDB_MAP_RESIZED
	ErrIncompatible    Errno = C.MDB_INCOMPATIBLE
	ErrBadRSlot        Errno = C.MDB_BAD_RSLOT
	ErrBadTxn          Errno = C.MDB_BAD_TXN
	ErrBadValSize      Errno = C.MDB_BAD_VALSIZE
	ErrBadDBI          Errno = C.MDB_BAD_DBI
)

// Errors raised by the binding itself rather than by liblmdb.
var (
	// ErrClosed is returned when the environment has been closed.
	ErrClosed = errors.New("lmdb: environment closed")
	// ErrTxnDone is returned when a transaction or cursor is used after
	// its transaction ended (outside the View/Update callback).
	ErrTxnDone = errors.New("lmdb: transaction already finished")
	// ErrReadOnly is returned for a write attempted inside View.
	ErrReadOnly = errors.New("lmdb: write in a read-only transaction")
)

func (e Errno) Error() string {
	return "lmdb: " + C.GoString(C.mdb_strerror(C.int(e)))
}

// OpError records which LMDB call failed and, for environment operations,
// on which path.
type OpError struct {
	Op   string
	Path string
	Err  error
}

func (e *OpError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Path, e.Err)
	}
	return e.Op + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }

// statusError is the single translation point from an LMDB return code to
// a Go error.
func statusError(op string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &OpError{Op: op, Err: codeError(int(rc))}
}

func codeError(rc int) error {
	if rc >= int(C.MDB_KEYEXIST) && rc <= int(C.MDB_LAST_ERRCODE) {
		return Errno(rc)
	}
	return syscall.Errno(rc)
}

func pathError(op, path string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &OpError{Op: op, Path: path, Err: codeError(int(rc))}
}
