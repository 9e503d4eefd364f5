package lmdb

/*
#include "hatlmdb.h"
*/
import "C"

// CursorOp selects the cursor movement of Cursor.Get.
type CursorOp int

// Cursor operations (see MDB_cursor_op). Set positions at key exactly and
// returns it (MDB_SET_KEY); SetRange positions at the first key >= key.
const (
	First      CursorOp = C.MDB_FIRST
	Last       CursorOp = C.MDB_LAST
	Next       CursorOp = C.MDB_NEXT
	Prev       CursorOp = C.MDB_PREV
	GetCurrent CursorOp = C.MDB_GET_CURRENT
	Set        CursorOp = C.MDB_SET_KEY
	SetRange   CursorOp = C.MDB_SET_RANGE
)

// Cursor iterates over a database inside one transaction. It is closed
// automatically when its transaction ends.
type Cursor struct {
	txn *Txn
	dbi DBI
	cur *C.MDB_cursor
	k   C.MDB_val
	v   C.MDB_val
}

// OpenCursor opens a cursor on dbi.
func (t *Txn) OpenCursor(dbi DBI) (*Cursor, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var cur *C.MDB_cursor
	if t.readOnly {
		if cur = t.env.getCursor(dbi); cur != nil && C.mdb_cursor_renew(t.txn, cur) != 0 {
			C.mdb_cursor_close(cur)
			cur = nil
		}
	}
	if cur == nil {
		if rc := C.mdb_cursor_open(t.txn, C.MDB_dbi(dbi), &cur); rc != 0 {
			return nil, statusError("mdb_cursor_open", rc)
		}
	}
	c := &Cursor{txn: t, dbi: dbi, cur: cur}
	t.cursors = append(t.cursors, c)
	return c, nil
}

// Get moves the cursor and returns the key and value at the new position
// as views into the memory map, with the same validity as Txn.GetView.
// key is only read by Set and SetRange. End of data yields ErrNotFound.
func (c *Cursor) Get(key []byte, op CursorOp) (k, v []byte, err error) {
	if c.cur == nil || c.txn.done {
		return nil, nil, ErrTxnDone
	}
	rc := C.hat_cursor_get(c.cur, bytesPtr(key), C.size_t(len(key)), &c.k, &c.v, C.int(op))
	if rc != 0 {
		return nil, nil, statusError("mdb_cursor_get", rc)
	}
	if c.k.mv_data == nil {
		k = key
	} else {
		k = view(&c.k)
	}
	return k, view(&c.v), nil
}

// Del deletes the key/value pair at the cursor position.
func (c *Cursor) Del() error {
	if c.cur == nil || c.txn.done {
		return ErrTxnDone
	}
	if c.txn.readOnly {
		return ErrReadOnly
	}
	return statusError("mdb_cursor_del", C.mdb_cursor_del(c.cur, 0))
}

// release frees the C cursor, or keeps a read-only one for reuse.
func (c *Cursor) release() {
	if c.txn.readOnly {
		c.txn.env.putCursor(c.dbi, c.cur)
	} else {
		C.mdb_cursor_close(c.cur)
	}
	c.cur = nil
}

// Close releases the cursor before its transaction ends.
func (c *Cursor) Close() {
	if c.cur == nil {
		return
	}
	c.release()
	cs := c.txn.cursors
	for i, o := range cs {
		if o == c {
			c.txn.cursors = append(cs[:i], cs[i+1:]...)
			break
		}
	}
}

// ScanAhead is the most entries a Scanner fetches in one run.
const ScanAhead = 64

// Scanner reads forward from a cursor's position in runs of entries, one
// crossing into C per run rather than one per entry (the crossing was
// the largest single cost of a streamed scan's server). The entries are
// views valid as Cursor.Get's; the cursor itself runs ahead of the last
// entry returned, so it must not be moved or used while the Scanner is.
type Scanner struct {
	c     *Cursor
	ahead C.int
	n, i  int
	rc    C.int // the status that ended the last run
	kv    [2 * ScanAhead]C.MDB_val
}

// Scanner returns a Scanner fetching up to ahead entries a run (1 to
// ScanAhead): a caller that will stop after a few entries asks for few,
// since every entry fetched costs a step through the tree.
func (c *Cursor) Scanner(ahead int) *Scanner {
	return &Scanner{c: c, ahead: C.int(min(max(ahead, 1), ScanAhead))}
}

// Next returns the entry after the one returned last (the first call:
// after the cursor's position). End of data yields ErrNotFound.
func (s *Scanner) Next() (k, v []byte, err error) {
	if s.c.cur == nil || s.c.txn.done {
		return nil, nil, ErrTxnDone // the views fetched are gone with it
	}
	if s.i == s.n {
		if err := s.fill(); err != nil {
			return nil, nil, err
		}
	}
	e := s.kv[2*s.i : 2*s.i+2]
	s.i++
	return view(&e[0]), view(&e[1]), nil
}

func (s *Scanner) fill() error {
	if s.rc != 0 {
		return statusError("mdb_cursor_get", s.rc)
	}
	var got C.int
	s.rc = C.hat_cursor_next_n(s.c.cur, &s.kv[0], s.ahead, &got)
	s.n, s.i = int(got), 0
	if s.n == 0 {
		return statusError("mdb_cursor_get", s.rc)
	}
	return nil
}
