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
