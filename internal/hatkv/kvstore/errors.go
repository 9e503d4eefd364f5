package kvstore

import (
	"errors"
	"fmt"
)

// Sentinel errors; test with errors.Is.
var (
	ErrNotFound      = errors.New("kvstore: key not found")
	ErrEmptyKey      = errors.New("kvstore: empty key")
	ErrKeyTooLong    = errors.New("kvstore: key too long")
	ErrValueTooLarge = errors.New("kvstore: record too large")
	ErrTooManyFields = errors.New("kvstore: too many fields")
	ErrInvalidField  = errors.New("kvstore: invalid field name")
	ErrScanTooLong   = errors.New("kvstore: scan count out of range")
	ErrBatchTooLarge = errors.New("kvstore: batch too large")
	// ErrBadRange: a streamed scan's range or sizes make no sense.
	ErrBadRange = errors.New("kvstore: bad scan range")
	// ErrStoreFull means the LMDB map is full (MDB_MAP_FULL). Reads keep
	// working; deletes free space for later writes.
	ErrStoreFull = errors.New("kvstore: store is full")
	// ErrDiskFull means a write failed because the file system holding the
	// store is out of space (it is an ErrStoreFull too). Reads keep
	// working; writes, deletes among them (LMDB copies pages on write),
	// work again once space is freed.
	ErrDiskFull = fmt.Errorf("%w: disk full", ErrStoreFull)
	ErrClosed   = errors.New("kvstore: store closed")
	// ErrCorruptRecord means a stored value failed to decode.
	ErrCorruptRecord = errors.New("kvstore: corrupt record")
	// ErrForeignData means the data path holds something that is not a
	// hatkv store: a file, or a valid LMDB environment of another program.
	ErrForeignData = errors.New("kvstore: not a hatkv data directory")
	// ErrCorruptData means the data file is not a readable LMDB file.
	ErrCorruptData = errors.New("kvstore: data file is corrupt or not an LMDB file")
	// ErrUnsupportedVersion means the store was written by a newer format.
	ErrUnsupportedVersion = errors.New("kvstore: unsupported store format version")
)

// LimitError reports which limit a request exceeded.
type LimitError struct {
	Err  error // one of the sentinels above
	What string
	Got  int
	Max  int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%v: %s is %d, limit %d", e.Err, e.What, e.Got, e.Max)
}

func (e *LimitError) Unwrap() error { return e.Err }

func limitErr(sentinel error, what string, got, max int) error {
	return &LimitError{Err: sentinel, What: what, Got: got, Max: max}
}

// OpenError is returned by Open when the data path cannot be used. It
// matches both its category (ErrForeignData, ErrCorruptData, ...) and the
// underlying cause with errors.Is.
type OpenError struct {
	Path   string
	Err    error
	Cause  error
	Detail string
}

func (e *OpenError) Error() string {
	msg := fmt.Sprintf("kvstore: open %s: %v", e.Path, e.Err)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *OpenError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// RecordError reports a record that failed to decode.
type RecordError struct {
	Key    string
	Reason string
}

func (e *RecordError) Error() string {
	if e.Key == "" {
		return "kvstore: corrupt record: " + e.Reason
	}
	return fmt.Sprintf("kvstore: corrupt record %q: %s", e.Key, e.Reason)
}

func (e *RecordError) Unwrap() error { return ErrCorruptRecord }
