package lmdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
)

// The on-disk layout of liblmdb 0.9 (MDB_DATA_VERSION 1) on a 64-bit
// little-endian host, read here in Go so that a damaged file is judged
// before LMDB maps it: LMDB trusts every page it reaches, so a truncated
// file faults (SIGBUS) and a garbage page asserts or faults inside C,
// which no Go code can recover from.
const (
	pageHeaderSize = 16 // pgno(8) pad(2) flags(2) lower(2) upper(2)
	nodeHeaderSize = 8  // lo(2) hi(2) flags(2) ksize(2)
	dbSize         = 48 // MDB_db
	metaSize       = 136

	metaMagic   = 0xBEEFC0DE
	dataVersion = 1
	lockMagic   = 0xBEEFC0DE

	invalidPgno = ^uint64(0)
	numMetas    = 2
	maxDepth    = 32 // LMDB's CURSOR_STACK
	minPageSize = 512
	maxPageSize = 1 << 16

	pBranch   = 0x01
	pLeaf     = 0x02
	pOverflow = 0x04
	pMeta     = 0x08
	pLeaf2    = 0x20

	fBigData = 0x01
	fSubData = 0x02
	fDupData = 0x04

	dbIntegerKey = 0x08
	dbDupSort    = 0x04
)

// ErrDamaged is matched (errors.Is) by every *FileError: the file is not a
// consistent LMDB environment.
var ErrDamaged = errors.New("lmdb: data file is damaged or not an LMDB file")

// FileError says what is wrong with a data file, found before LMDB maps it.
// It matches ErrDamaged and the code LMDB gives the same condition when it
// notices it: ErrInvalid (not an LMDB file), ErrVersionMismatch or
// ErrCorrupted (truncated, or a damaged page).
type FileError struct {
	Path   string
	Reason string
	Code   Errno
}

func (e *FileError) Error() string { return e.Path + ": " + e.Reason }

func (e *FileError) Unwrap() []error { return []error{ErrDamaged, e.Code} }

// DBInfo is a B-tree's root record (MDB_db) as stored in a meta page or in
// the main database's entry for a named database.
type DBInfo struct {
	Flags         uint16
	Depth         uint16
	BranchPages   uint64
	LeafPages     uint64
	OverflowPages uint64
	Entries       uint64
	Root          uint64 // ^0 when the tree is empty
}

func parseDB(b []byte) DBInfo {
	le := binary.LittleEndian
	return DBInfo{
		Flags:         le.Uint16(b[4:]),
		Depth:         le.Uint16(b[6:]),
		BranchPages:   le.Uint64(b[8:]),
		LeafPages:     le.Uint64(b[16:]),
		OverflowPages: le.Uint64(b[24:]),
		Entries:       le.Uint64(b[32:]),
		Root:          le.Uint64(b[40:]),
	}
}

// Meta is the current meta page of a data file: the one of the two with
// the higher transaction id, as LMDB picks it.
type Meta struct {
	PageSize uint32
	MapSize  uint64
	LastPage uint64
	TxnID    uint64
	Free     DBInfo
	Main     DBInfo
	FileSize int64
}

// UsedBytes is the file size the meta page needs: every page up to
// LastPage.
func (m Meta) UsedBytes() int64 { return int64(m.LastPage+1) * int64(m.PageSize) }

// DataFile returns the data file of the environment at path (a directory
// unless NoSubdir was used, which this package's callers do not).
func DataFile(dir string) string { return filepath.Join(dir, "data.mdb") }

// LockFile returns the lock file of the environment at dir.
func LockFile(dir string) string { return filepath.Join(dir, "lock.mdb") }

// ReadMeta reads and checks both meta pages of the data file at path and
// returns the current one: magic, version, page size, that the file holds
// every page the meta page references, and that the roots lie inside it.
// A damaged file yields a *FileError; I/O failures are returned as they are.
func ReadMeta(path string) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	return readMeta(f, path)
}

func readMeta(f *os.File, path string) (Meta, error) {
	fi, err := f.Stat()
	if err != nil {
		return Meta{}, err
	}
	code := ErrInvalid
	bad := func(format string, args ...any) (Meta, error) {
		return Meta{}, &FileError{Path: path, Reason: fmt.Sprintf(format, args...), Code: code}
	}
	size := fi.Size()
	if size == 0 {
		return bad("file is empty (0 bytes)")
	}
	if size < pageHeaderSize+metaSize {
		return bad("file is %d bytes, too short for an LMDB meta page", size)
	}
	// The first meta page tells the page size; read its header and meta.
	var buf [pageHeaderSize + metaSize]byte
	metas := [numMetas]Meta{}
	var psize int64
	for i := range numMetas {
		off := int64(i) * psize
		if i > 0 && off+int64(len(buf)) > size {
			return bad("file is %d bytes, too short for the second meta page (page size %d)", size, psize)
		}
		if _, err := f.ReadAt(buf[:], off); err != nil {
			return Meta{}, fmt.Errorf("%s: reading meta page %d: %w", path, i, err)
		}
		m, reason := parseMeta(buf[:], uint64(i))
		if strings.Contains(reason, "version") {
			code = ErrVersionMismatch
		}
		if reason != "" {
			return bad("meta page %d: %s", i, reason)
		}
		if i == 0 {
			psize = int64(m.PageSize)
		} else if int64(m.PageSize) != psize {
			return bad("meta pages disagree on the page size (%d and %d)", psize, m.PageSize)
		}
		metas[i] = m
	}
	m := metas[0]
	if metas[1].TxnID > m.TxnID {
		m = metas[1]
	}
	m.FileSize = size
	code = ErrCorrupted
	if m.LastPage < numMetas-1 {
		return bad("meta page (txn %d) says the last page is %d, below the meta pages", m.TxnID, m.LastPage)
	}
	if m.UsedBytes() > size || m.UsedBytes() <= 0 {
		return bad("file is truncated: the meta page (txn %d) references pages 0..%d (%d bytes of %d-byte pages) but the file has %d bytes",
			m.TxnID, m.LastPage, m.UsedBytes(), m.PageSize, size)
	}
	for _, db := range []struct {
		name string
		db   DBInfo
	}{{"free-page", m.Free}, {"main", m.Main}} {
		if db.db.Root != invalidPgno && (db.db.Root < numMetas || db.db.Root > m.LastPage) {
			return bad("meta page (txn %d): %s tree root page %d outside pages 2..%d", m.TxnID, db.name, db.db.Root, m.LastPage)
		}
	}
	return m, nil
}

// parseMeta checks one meta page (header + MDB_meta) and returns it, or
// the reason it is not one.
func parseMeta(b []byte, pgno uint64) (Meta, string) {
	le := binary.LittleEndian
	if le.Uint16(b[10:])&pMeta == 0 {
		return Meta{}, fmt.Sprintf("not a meta page (page flags %#x)", le.Uint16(b[10:]))
	}
	if got := le.Uint64(b[0:]); got != pgno {
		return Meta{}, fmt.Sprintf("page header says page %d", got)
	}
	m := b[pageHeaderSize:]
	if magic := le.Uint32(m[0:]); magic != metaMagic {
		return Meta{}, fmt.Sprintf("bad magic %#x (want %#x): not an LMDB file", magic, uint32(metaMagic))
	}
	if v := le.Uint32(m[4:]); v != dataVersion {
		return Meta{}, fmt.Sprintf("data format version %d, this build of LMDB reads version %d", v, dataVersion)
	}
	psize := le.Uint32(m[24:]) // the free-page DB's md_pad holds the page size
	if psize < minPageSize || psize > maxPageSize || bits.OnesCount32(psize) != 1 {
		return Meta{}, fmt.Sprintf("implausible page size %d", psize)
	}
	out := Meta{
		PageSize: psize,
		MapSize:  le.Uint64(m[16:]),
		Free:     parseDB(m[24:]),
		Main:     parseDB(m[24+dbSize:]),
		LastPage: le.Uint64(m[24+2*dbSize:]),
		TxnID:    le.Uint64(m[32+2*dbSize:]),
	}
	if out.MapSize != 0 && out.MapSize < uint64(psize)*numMetas {
		return Meta{}, fmt.Sprintf("map size %d is smaller than the meta pages", out.MapSize)
	}
	return out, ""
}

// CheckLockFile checks that an existing lock.mdb is LMDB's (LMDB would
// otherwise reinitialise whatever file is there). A missing or empty file
// is fine: LMDB creates and sizes it.
func CheckLockFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &FileError{Path: path, Reason: "not a regular file", Code: ErrInvalid}
	}
	if fi.Size() == 0 {
		return nil
	}
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return &FileError{Path: path, Reason: fmt.Sprintf("%d bytes, too short for an LMDB lock file", fi.Size()), Code: ErrInvalid}
	}
	if m := binary.LittleEndian.Uint32(b[:]); m != lockMagic {
		return &FileError{Path: path, Reason: fmt.Sprintf("bad magic %#x: not an LMDB lock file", m), Code: ErrInvalid}
	}
	return nil
}
