package lmdb

/*
#cgo LDFLAGS: -llmdb
#include "hatlmdb.h"
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// EnvFlag is an environment flag passed to Open.
type EnvFlag uint

// Environment flags (see mdb_env_open). NoTLS is always set by Open.
const (
	FixedMap   EnvFlag = C.MDB_FIXEDMAP
	NoSubdir   EnvFlag = C.MDB_NOSUBDIR
	NoSync     EnvFlag = C.MDB_NOSYNC
	ReadOnly   EnvFlag = C.MDB_RDONLY
	NoMetaSync EnvFlag = C.MDB_NOMETASYNC
	WriteMap   EnvFlag = C.MDB_WRITEMAP
	MapAsync   EnvFlag = C.MDB_MAPASYNC
	NoTLS      EnvFlag = C.MDB_NOTLS
	NoLock     EnvFlag = C.MDB_NOLOCK
	NoRdAhead  EnvFlag = C.MDB_NORDAHEAD
	NoMemInit  EnvFlag = C.MDB_NOMEMINIT
)

// Defaults used when the corresponding option is not given.
const (
	DefaultMapSize    = 64 << 20
	DefaultMaxReaders = 126
	DefaultMaxDBs     = 4
)

type config struct {
	mapSize    int64
	maxReaders int
	maxDBs     int
	flags      EnvFlag
	mode       uint32
}

// Option configures Open.
type Option func(*config)

// WithMapSize sets the size of the memory map, i.e. the maximum database
// size. Writes beyond it fail with ErrMapFull.
func WithMapSize(bytes int64) Option { return func(c *config) { c.mapSize = bytes } }

// WithMaxReaders sets the reader table size. It also bounds how many read
// transactions this process runs at once: further View calls wait (subject
// to their context) instead of failing with ErrReadersFull.
func WithMaxReaders(n int) Option { return func(c *config) { c.maxReaders = n } }

// WithMaxDBs sets the number of named databases the environment may hold.
func WithMaxDBs(n int) Option { return func(c *config) { c.maxDBs = n } }

// WithFlags adds environment flags.
func WithFlags(f EnvFlag) Option { return func(c *config) { c.flags |= f } }

// WithMode sets the permission bits of created files (default 0644).
func WithMode(mode uint32) Option { return func(c *config) { c.mode = mode } }

// Env is an open LMDB environment. It is safe for concurrent use; read
// transactions may run from any goroutine because Open always sets NoTLS.
type Env struct {
	env        *C.MDB_env
	path       string
	flags      EnvFlag
	maxReaders int

	// readSlots bounds concurrent readers to the reader table size, and
	// idle caches reset read transactions so View does no C allocation in
	// steady state (mdb_txn_renew reuses the handle and its reader slot).
	readSlots chan struct{}
	idle      chan *C.MDB_txn
	// writeSlot serialises writers in Go so that waiting for the write
	// lock honours contexts instead of blocking inside mdb_txn_begin.
	writeSlot chan struct{}

	// Read-only cursors are kept per database and renewed into the next
	// read transaction (mdb_cursor_renew) instead of being freed.
	curMu   sync.Mutex
	curPool map[DBI][]*C.MDB_cursor

	mu     sync.RWMutex // held shared by every transaction, exclusively by Close
	closed bool
}

func (e *Env) getCursor(dbi DBI) *C.MDB_cursor {
	e.curMu.Lock()
	defer e.curMu.Unlock()
	p := e.curPool[dbi]
	if len(p) == 0 {
		return nil
	}
	c := p[len(p)-1]
	e.curPool[dbi] = p[:len(p)-1]
	return c
}

func (e *Env) putCursor(dbi DBI, c *C.MDB_cursor) {
	e.curMu.Lock()
	defer e.curMu.Unlock()
	if len(e.curPool[dbi]) >= e.maxReaders {
		C.mdb_cursor_close(c)
		return
	}
	e.curPool[dbi] = append(e.curPool[dbi], c)
}

func (e *Env) dropCursors() {
	e.curMu.Lock()
	defer e.curMu.Unlock()
	for dbi, p := range e.curPool {
		for _, c := range p {
			C.mdb_cursor_close(c)
		}
		delete(e.curPool, dbi)
	}
}

// Open opens (creating if needed) the environment at path. Unless NoSubdir
// is given, path is a directory that must exist.
func Open(path string, opts ...Option) (*Env, error) {
	cfg := config{
		mapSize:    DefaultMapSize,
		maxReaders: DefaultMaxReaders,
		maxDBs:     DefaultMaxDBs,
		mode:       0o644,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxReaders < 1 || cfg.maxDBs < 0 || cfg.mapSize <= 0 {
		return nil, &OpError{Op: "mdb_env_open", Path: path, Err: fmt.Errorf("invalid options: maxReaders=%d maxDBs=%d mapSize=%d: %w", cfg.maxReaders, cfg.maxDBs, cfg.mapSize, syscall.EINVAL)}
	}
	cfg.flags |= NoTLS

	var env *C.MDB_env
	if rc := C.mdb_env_create(&env); rc != 0 {
		return nil, pathError("mdb_env_create", path, rc)
	}
	fail := func(op string, rc C.int) (*Env, error) {
		C.mdb_env_close(env)
		return nil, pathError(op, path, rc)
	}
	if rc := C.mdb_env_set_mapsize(env, C.size_t(cfg.mapSize)); rc != 0 {
		return fail("mdb_env_set_mapsize", rc)
	}
	if rc := C.mdb_env_set_maxreaders(env, C.uint(cfg.maxReaders)); rc != 0 {
		return fail("mdb_env_set_maxreaders", rc)
	}
	if rc := C.mdb_env_set_maxdbs(env, C.MDB_dbi(cfg.maxDBs)); rc != 0 {
		return fail("mdb_env_set_maxdbs", rc)
	}
	cpath := C.CString(path)
	rc := C.mdb_env_open(env, cpath, C.uint(cfg.flags), C.mdb_mode_t(cfg.mode))
	C.free(unsafe.Pointer(cpath))
	if rc != 0 {
		return fail("mdb_env_open", rc)
	}
	if cfg.flags&(WriteMap|ReadOnly) == WriteMap {
		// The map in force, which is what has to fit: LMDB raises the
		// size asked for to what an existing file's data already uses.
		size := C.hat_mapsize(env)
		if rc := C.hat_reserve(env, size); rc != 0 {
			return fail(reserveOp(int64(size)), rc)
		}
	}
	return &Env{
		env:        env,
		path:       path,
		flags:      cfg.flags,
		maxReaders: cfg.maxReaders,
		readSlots:  make(chan struct{}, cfg.maxReaders),
		idle:       make(chan *C.MDB_txn, cfg.maxReaders),
		writeSlot:  make(chan struct{}, 1),
		curPool:    map[DBI][]*C.MDB_cursor{},
	}, nil
}

// Path returns the path the environment was opened with.
func (e *Env) Path() string { return e.path }

// Flags returns the flags the environment was opened with.
func (e *Env) Flags() EnvFlag { return e.flags }

// MaxReaders returns the configured reader table size.
func (e *Env) MaxReaders() int { return e.maxReaders }

// Close waits for running transactions to finish and closes the
// environment. Closing twice is a no-op.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.dropCursors()
	e.dropIdle()
	C.mdb_env_close(e.env)
	e.env = nil
	return nil
}

// SetMapSize changes the map size, e.g. to give a full map room for the
// deletes that free space (LMDB's copy-on-write needs fresh pages even to
// delete). It waits for every transaction of this process to finish
// because LMDB allows a resize only then; ctx is checked before waiting.
func (e *Env) SetMapSize(ctx context.Context, bytes int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.dropIdle()
	if e.flags&(WriteMap|ReadOnly) == WriteMap && bytes > 0 {
		if err := pathError(reserveOp(bytes), e.path, C.hat_reserve(e.env, C.size_t(bytes))); err != nil {
			return err
		}
	}
	return pathError("mdb_env_set_mapsize", e.path, C.mdb_env_set_mapsize(e.env, C.size_t(bytes)))
}

// reserveOp names the failed reservation of a WriteMap environment's
// file: with WriteMap, Open and SetMapSize allocate the data file's blocks
// for the whole map, since a write the disk cannot back would be a SIGBUS
// that ends the process (ENOSPC then comes from them instead). It gives
// the size, which at Open can be larger than the one asked for (LMDB
// raises it to what an existing file's data uses).
func reserveOp(bytes int64) string {
	return fmt.Sprintf("reserving the map (%d bytes) on disk for MDB_WRITEMAP", bytes)
}

func (e *Env) dropIdle() {
	for {
		select {
		case t := <-e.idle:
			C.mdb_txn_abort(t)
		default:
			return
		}
	}
}

// MaxKeySize returns the largest key (and DupSort value) size LMDB accepts.
func (e *Env) MaxKeySize() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0
	}
	return int(C.mdb_env_get_maxkeysize(e.env))
}

// Sync flushes the data buffers to disk; force makes it synchronous even
// under NoSync/MapAsync. It blocks on disk I/O, which cannot be cancelled,
// so ctx is only checked before starting.
func (e *Env) Sync(ctx context.Context, force bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	f := C.int(0)
	if force {
		f = 1
	}
	return pathError("mdb_env_sync", e.path, C.mdb_env_sync(e.env, f))
}

// ReaderCheck clears reader slots left by dead processes and returns how
// many were cleared.
func (e *Env) ReaderCheck() (int, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, ErrClosed
	}
	var dead C.int
	if rc := C.mdb_reader_check(e.env, &dead); rc != 0 {
		return 0, statusError("mdb_reader_check", rc)
	}
	return int(dead), nil
}

// Stat describes a B-tree (mdb_stat).
type Stat struct {
	PageSize      uint
	Depth         uint
	BranchPages   uint64
	LeafPages     uint64
	OverflowPages uint64
	Entries       uint64
}

func statFrom(s *C.MDB_stat) Stat {
	return Stat{
		PageSize:      uint(s.ms_psize),
		Depth:         uint(s.ms_depth),
		BranchPages:   uint64(s.ms_branch_pages),
		LeafPages:     uint64(s.ms_leaf_pages),
		OverflowPages: uint64(s.ms_overflow_pages),
		Entries:       uint64(s.ms_entries),
	}
}

// Stat returns statistics of the main (unnamed) database.
func (e *Env) Stat() (Stat, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return Stat{}, ErrClosed
	}
	var s C.MDB_stat
	if rc := C.mdb_env_stat(e.env, &s); rc != 0 {
		return Stat{}, statusError("mdb_env_stat", rc)
	}
	return statFrom(&s), nil
}

// Info describes the environment (mdb_env_info).
type Info struct {
	MapSize    int64
	LastPgno   uint64
	LastTxnID  uint64
	MaxReaders uint
	NumReaders uint
}

// Info returns environment information.
func (e *Env) Info() (Info, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return Info{}, ErrClosed
	}
	var i C.MDB_envinfo
	if rc := C.mdb_env_info(e.env, &i); rc != 0 {
		return Info{}, statusError("mdb_env_info", rc)
	}
	return Info{
		MapSize:    int64(i.me_mapsize),
		LastPgno:   uint64(i.me_last_pgno),
		LastTxnID:  uint64(i.me_last_txnid),
		MaxReaders: uint(i.me_maxreaders),
		NumReaders: uint(i.me_numreaders),
	}, nil
}

// Version returns the liblmdb version string.
func Version() string {
	return C.GoString(C.mdb_version(nil, nil, nil))
}

// View runs fn in a read-only transaction. The transaction, and any view
// slices obtained from it, are valid only until fn returns. Waiting for a
// free reader slot honours ctx.
func (e *Env) View(ctx context.Context, fn func(*Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := acquire(ctx, e.readSlots); err != nil {
		return err
	}
	defer func() { <-e.readSlots }()

	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	ct, err := e.beginRead()
	if err != nil {
		return err
	}
	t := &Txn{env: e, txn: ct, readOnly: true}
	defer func() {
		t.finish()
		C.mdb_txn_reset(ct)
		select {
		case e.idle <- ct:
		default:
			C.mdb_txn_abort(ct)
		}
	}()
	return fn(t)
}

// ReadTxns returns the read transactions running now (View calls in
// progress). LMDB's own reader count (Info.NumReaders) counts slots ever
// taken, which stay assigned to idle transactions.
func (e *Env) ReadTxns() int { return len(e.readSlots) }

// acquire takes a slot, waiting under ctx only when none is free: asking a
// context for Done can cost more than the transaction (a server's call
// context builds its channel and parent watch lazily, on first use).
func acquire(ctx context.Context, slots chan struct{}) error {
	select {
	case slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Env) beginRead() (*C.MDB_txn, error) {
	select {
	case ct := <-e.idle:
		if rc := C.mdb_txn_renew(ct); rc != 0 {
			C.mdb_txn_abort(ct)
			return nil, statusError("mdb_txn_renew", rc)
		}
		return ct, nil
	default:
	}
	var ct *C.MDB_txn
	if rc := C.mdb_txn_begin(e.env, nil, C.MDB_RDONLY, &ct); rc != 0 {
		return nil, statusError("mdb_txn_begin", rc)
	}
	return ct, nil
}

// Update runs fn in a write transaction and commits it if fn returns nil
// and ctx is still live; otherwise the transaction is aborted. LMDB's
// write lock is owned by an OS thread, so the calling goroutine is locked
// to its thread for the transaction's lifetime. Waiting for the write
// lock honours ctx; the commit itself (disk I/O) cannot be interrupted.
func (e *Env) Update(ctx context.Context, fn func(*Txn) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := acquire(ctx, e.writeSlot); err != nil {
		return err
	}
	defer func() { <-e.writeSlot }()

	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	var ct *C.MDB_txn
	if rc := C.mdb_txn_begin(e.env, nil, 0, &ct); rc != 0 {
		return statusError("mdb_txn_begin", rc)
	}
	t := &Txn{env: e, txn: ct}
	committed := false
	defer func() {
		if !committed {
			t.finish()
			C.mdb_txn_abort(ct)
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t.finish()
	committed = true
	return statusError("mdb_txn_commit", C.mdb_txn_commit(ct))
}

// Copy writes a copy of the environment to dir/data.mdb (dir must exist;
// an existing data.mdb is never overwritten: the file is created with
// O_EXCL, mode 0600). It runs in a read transaction, so it is consistent
// while other goroutines or processes write; compact omits free pages and
// renumbers the rest (MDB_CP_COMPACT). The copy itself (disk I/O) cannot be
// interrupted, so ctx is only checked before starting.
//
// The file is opened here and handed to mdb_env_copyfd2: mdb_env_copy2
// turns O_DIRECT on, and writes with it fail with EINVAL on overlayfs over
// tmpfs (containers, the test VM) while the fcntl itself succeeds.
func (e *Env) Copy(ctx context.Context, dir string, compact bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	flags := C.uint(0)
	if compact {
		flags = C.MDB_CP_COMPACT
	}
	name := filepath.Join(dir, "data.mdb")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &OpError{Op: "mdb_env_copyfd2", Path: dir, Err: err}
	}
	err = pathError("mdb_env_copyfd2", dir, C.mdb_env_copyfd2(e.env, C.mdb_filehandle_t(f.Fd()), flags))
	if err == nil {
		if serr := f.Sync(); serr != nil {
			err = &OpError{Op: "fsync", Path: name, Err: serr}
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &OpError{Op: "close", Path: name, Err: cerr}
	}
	if err != nil {
		_ = os.Remove(name) // a partial copy is no backup
	}
	return err
}
