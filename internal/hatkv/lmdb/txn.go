package lmdb

/*
#include "hatlmdb.h"
*/
import "C"

import (
	"context"
	"unsafe"
)

// DBI is a database handle. Handles opened in a committed write
// transaction stay valid for the environment's lifetime.
type DBI uint32

// DBIFlag is a flag for OpenDBI.
type DBIFlag uint

// Database flags (see mdb_dbi_open).
const (
	ReverseKey DBIFlag = C.MDB_REVERSEKEY
	DupSort    DBIFlag = C.MDB_DUPSORT
	IntegerKey DBIFlag = C.MDB_INTEGERKEY
	Create     DBIFlag = C.MDB_CREATE
)

// PutFlag is a flag for Txn.Put.
type PutFlag uint

// Put flags (see mdb_put).
const (
	NoOverwrite PutFlag = C.MDB_NOOVERWRITE
	NoDupData   PutFlag = C.MDB_NODUPDATA
	Append      PutFlag = C.MDB_APPEND
)

// Txn is a transaction handed to View/Update callbacks. It must not be
// used by more than one goroutine at a time nor after the callback returns.
type Txn struct {
	env      *Env
	txn      *C.MDB_txn
	readOnly bool
	done     bool
	cursors  []*Cursor
	// Scratch output slot: a field of a Go struct may be passed to C as
	// long as it holds no Go pointers, which saves an allocation per Get.
	val C.MDB_val
}

func (t *Txn) finish() {
	for _, c := range t.cursors {
		if c.cur != nil {
			c.release()
		}
	}
	t.cursors = nil
	t.done = true
}

func (t *Txn) check(write bool) error {
	if t.done {
		return ErrTxnDone
	}
	if write && t.readOnly {
		return ErrReadOnly
	}
	return nil
}

// ReadOnly reports whether t is a read transaction.
func (t *Txn) ReadOnly() bool { return t.readOnly }

// ID returns the transaction ID.
func (t *Txn) ID() uint64 {
	if t.done {
		return 0
	}
	return uint64(C.mdb_txn_id(t.txn))
}

// OpenDBI opens a named database ("" is the main database). In a read
// transaction a missing database yields ErrNotFound.
func (t *Txn) OpenDBI(name string, flags DBIFlag) (DBI, error) {
	if err := t.check(flags&Create != 0); err != nil {
		return 0, err
	}
	var cname *C.char
	if name != "" {
		cname = C.CString(name)
		defer C.free(unsafe.Pointer(cname))
	}
	var dbi C.MDB_dbi
	if rc := C.mdb_dbi_open(t.txn, cname, C.uint(flags), &dbi); rc != 0 {
		return 0, statusError("mdb_dbi_open", rc)
	}
	return DBI(dbi), nil
}

// Stat returns statistics for dbi.
func (t *Txn) Stat(dbi DBI) (Stat, error) {
	if err := t.check(false); err != nil {
		return Stat{}, err
	}
	var s C.MDB_stat
	if rc := C.mdb_stat(t.txn, C.MDB_dbi(dbi), &s); rc != 0 {
		return Stat{}, statusError("mdb_stat", rc)
	}
	return statFrom(&s), nil
}

// Drop empties dbi; with del it also deletes the database handle.
func (t *Txn) Drop(dbi DBI, del bool) error {
	if err := t.check(true); err != nil {
		return err
	}
	d := C.int(0)
	if del {
		d = 1
	}
	return statusError("mdb_drop", C.mdb_drop(t.txn, C.MDB_dbi(dbi), d))
}

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// view exposes LMDB-owned memory without copying.
func view(v *C.MDB_val) []byte {
	if v.mv_size == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(v.mv_data), int(v.mv_size))
}

// GetView returns the value stored under key as a slice pointing into the
// memory map. It is valid only until the transaction ends (or, in a write
// transaction, until the next write) and must never be modified.
func (t *Txn) GetView(dbi DBI, key []byte) ([]byte, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	rc := C.hat_get(t.txn, C.MDB_dbi(dbi), bytesPtr(key), C.size_t(len(key)), &t.val)
	if rc != 0 {
		return nil, statusError("mdb_get", rc)
	}
	return view(&t.val), nil
}

// Get returns a copy of the value stored under key, safe to keep after
// the transaction ends.
func (t *Txn) Get(dbi DBI, key []byte) ([]byte, error) {
	v, err := t.GetView(dbi, key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(v))
	copy(out, v)
	return out, nil
}

// Put stores val under key. LMDB copies both, so the slices are only
// borrowed for the duration of the call.
func (t *Txn) Put(dbi DBI, key, val []byte, flags PutFlag) error {
	if err := t.check(true); err != nil {
		return err
	}
	rc := C.hat_put(t.txn, C.MDB_dbi(dbi), bytesPtr(key), C.size_t(len(key)),
		bytesPtr(val), C.size_t(len(val)), C.uint(flags))
	return statusError("mdb_put", rc)
}

// Del deletes key; a missing key yields ErrNotFound.
func (t *Txn) Del(dbi DBI, key []byte) error {
	if err := t.check(true); err != nil {
		return err
	}
	rc := C.hat_del(t.txn, C.MDB_dbi(dbi), bytesPtr(key), C.size_t(len(key)))
	return statusError("mdb_del", rc)
}

// OpenDBI opens an existing named database in a read transaction that is
// committed, which keeps the handle for the environment's lifetime (a
// handle opened in View is closed when View ends). It is how a ReadOnly
// environment, which cannot begin write transactions, gets its handles.
func (e *Env) OpenDBI(ctx context.Context, name string) (DBI, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, ErrClosed
	}
	var ct *C.MDB_txn
	if rc := C.mdb_txn_begin(e.env, nil, C.MDB_RDONLY, &ct); rc != 0 {
		return 0, statusError("mdb_txn_begin", rc)
	}
	var cname *C.char
	if name != "" {
		cname = C.CString(name)
		defer C.free(unsafe.Pointer(cname))
	}
	var dbi C.MDB_dbi
	if rc := C.mdb_dbi_open(ct, cname, 0, &dbi); rc != 0 {
		C.mdb_txn_abort(ct)
		return 0, statusError("mdb_dbi_open", rc)
	}
	return DBI(dbi), statusError("mdb_txn_commit", C.mdb_txn_commit(ct))
}
