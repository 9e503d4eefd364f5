package kvstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// Names of the two LMDB databases. The identity lives apart from the data
// so that no user key can collide with it.
const (
	metaDBName  = "hatkv.meta"
	dataDBName  = "hatkv.data"
	identityKey = "identity"
	// FormatVersion is the store layout version written into the identity
	// and the marker file. Format 2 keeps records in their wire form
	// (recordVersion); a format-1 store is migrated when opened for
	// writing (migrate).
	FormatVersion = 2
)

var identityMagic = []byte("HATKV\x00")

func identityValue() []byte {
	return append(append([]byte(nil), identityMagic...), FormatVersion, recordVersion)
}

// Store is a key-value store of YCSB records on LMDB. It is safe for
// concurrent use.
type Store struct {
	env  *lmdb.Env
	data lmdb.DBI
	meta lmdb.DBI
	cfg  config
	path string

	maxKey    int
	committer *committer

	growMu    sync.Mutex
	mapSize   int64
	mapCeil   int64
	mapGrowth atomic.Uint64
	fullDisk  atomic.Bool // the last write failed for want of disk space (logged once)

	mu     sync.RWMutex // shared by operations, exclusive in Close
	closed bool

	counters counters

	migrated Migration
}

// Migration says what Open did to bring an older store to FormatVersion.
type Migration struct {
	From    int // the format found; 0 when the store was current
	Records int // records rewritten
}

// Migrated reports the migration Open ran (From is 0 when none ran).
func (s *Store) Migrated() Migration { return s.migrated }

type counters struct {
	gets, puts, deletes, scans, commits, batchedWrites, maxBatch atomic.Uint64
}

// Open opens the store in directory path, creating it if needed. The
// directory must be missing, empty, or a hatkv data directory (it holds
// MarkerFile); a directory without the marker that holds only LMDB's
// data.mdb and lock.mdb, with the hatkv identity inside (a store of a
// hatkv from before the marker), is adopted and gets the marker. Anything
// else — other files, a text lock.mdb, an empty or damaged data.mdb (see
// WithVerify), an LMDB environment of another program — is refused with an
// *OpenError before LMDB opens, maps or writes any file.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	state, err := prepareDir(ctx, path, cfg.readOnly, cfg.verify)
	if err != nil {
		return nil, err
	}

	var flags lmdb.EnvFlag
	switch cfg.sync {
	case SyncNoSync:
		flags |= lmdb.NoSync
	case SyncNoMetaSync:
		flags |= lmdb.NoMetaSync
	}
	if cfg.writeMap {
		flags |= lmdb.WriteMap
	}
	if cfg.readOnly {
		flags |= lmdb.ReadOnly
	}
	env, err := lmdb.Open(path,
		lmdb.WithFlags(flags),
		lmdb.WithMapSize(cfg.mapSize),
		lmdb.WithMaxReaders(cfg.concurrency+2),
		lmdb.WithMaxDBs(4),
	)
	if err != nil {
		oe := classifyOpenError(path, err)
		if cfg.writeMap && errors.Is(err, syscall.ENOSPC) {
			oe.Detail = "writemap keeps the whole map allocated on disk so that a full disk cannot crash the server: free space, lower the map size (not below what the data already uses), or turn writemap off"
		}
		return nil, oe
	}
	// Reader slots of processes that died (kill -9) would otherwise pin old
	// snapshots and keep their pages from being reused.
	if _, err := env.ReaderCheck(); err != nil {
		_ = env.Close()
		return nil, &OpenError{Path: path, Err: err}
	}
	s := &Store{env: env, cfg: cfg, path: path, mapSize: cfg.mapSize}
	s.mapCeil = cfg.mapSize + growStep(cfg.mapSize)*8
	check := s.checkIdentity
	if cfg.readOnly {
		check = s.readIdentity
	}
	from, err := check(ctx)
	if err != nil {
		_ = env.Close()
		return nil, err
	}
	if from < FormatVersion && !cfg.readOnly {
		n, err := s.migrate(ctx, from)
		if err != nil {
			_ = env.Close()
			return nil, &OpenError{Path: path, Err: s.mapErr(err), Detail: fmt.Sprintf(
				"migrating the store from format %d to %d stopped after %d records (they are kept; opening it again resumes)", from, FormatVersion, n)}
		}
		s.migrated = Migration{From: from, Records: n}
	}
	if !cfg.readOnly && (state != dirMarked || markerVersion(path) != FormatVersion) {
		// Written once LMDB and the identity are in place: a crash before
		// leaves LMDB's files alone, which the adoption rule accepts.
		if err := writeMarker(path); err != nil {
			_ = env.Close()
			return nil, &OpenError{Path: path, Err: err, Detail: "writing " + MarkerFile}
		}
	}
	s.maxKey = env.MaxKeySize()
	if cfg.limits.MaxKeySize > 0 && cfg.limits.MaxKeySize < s.maxKey {
		s.maxKey = cfg.limits.MaxKeySize
	}
	if cfg.commit == CommitGroup {
		s.committer = newCommitter(s, cfg.maxBatch, cfg.maxDelay)
	}
	return s, nil
}

func classifyOpenError(path string, err error) *OpenError {
	for _, bad := range []error{lmdb.ErrInvalid, lmdb.ErrVersionMismatch, lmdb.ErrCorrupted, lmdb.ErrPageNotFound, lmdb.ErrPanic} {
		if errors.Is(err, bad) {
			return &OpenError{Path: path, Err: ErrCorruptData, Cause: err}
		}
	}
	return &OpenError{Path: path, Err: err}
}

// checkIdentity creates the identity in a fresh environment or verifies
// it in an existing one. It runs in a write transaction so that the DBI
// handles it opens stay valid for the environment's lifetime.
func (s *Store) checkIdentity(ctx context.Context) (int, error) {
	foreign := func(detail string, cause error) error {
		return &OpenError{Path: s.path, Err: ErrForeignData, Detail: detail, Cause: cause}
	}
	format := FormatVersion
	err := s.env.Update(ctx, func(txn *lmdb.Txn) error {
		meta, err := txn.OpenDBI(metaDBName, 0)
		switch {
		case errors.Is(err, lmdb.ErrNotFound):
			main, err := txn.OpenDBI("", 0)
			if err != nil {
				return classifyOpenError(s.path, err)
			}
			st, err := txn.Stat(main)
			if err != nil {
				return classifyOpenError(s.path, err)
			}
			if st.Entries != 0 {
				return foreign("LMDB environment without hatkv identity", nil)
			}
			if meta, err = txn.OpenDBI(metaDBName, lmdb.Create); err != nil {
				return classifyOpenError(s.path, err)
			}
			if err := txn.Put(meta, []byte(identityKey), identityValue(), 0); err != nil {
				return classifyOpenError(s.path, err)
			}
		case errors.Is(err, lmdb.ErrIncompatible):
			return foreign("LMDB environment with a conflicting main database", err)
		case err != nil:
			return classifyOpenError(s.path, err)
		default:
			id, err := txn.GetView(meta, []byte(identityKey))
			if err != nil {
				return foreign("identity record missing", err)
			}
			if format, err = s.identityFormat(id); err != nil {
				return err
			}
		}
		s.meta = meta
		data, err := txn.OpenDBI(dataDBName, lmdb.Create)
		if err != nil {
			return classifyOpenError(s.path, err)
		}
		s.data = data
		return nil
	})
	return format, err
}

// identityFormat checks the identity record and returns its format.
func (s *Store) identityFormat(id []byte) (int, error) {
	if len(id) != len(identityMagic)+2 || !bytes.HasPrefix(id, identityMagic) {
		return 0, &OpenError{Path: s.path, Err: ErrForeignData, Detail: "identity record has the wrong magic"}
	}
	v := int(id[len(identityMagic)])
	if v > FormatVersion || v < 1 {
		return 0, &OpenError{Path: s.path, Err: ErrUnsupportedVersion, Detail: newerFormat("the store's identity record", v)}
	}
	return v, nil
}

// newerFormat says what to do with a store this build cannot read.
func newerFormat(who string, v int) string {
	return fmt.Sprintf("%s says format %d, this build reads formats 1..%d: the store was written by a newer hatkv; "+
		"serve it with that version (or newer), or restore a backup made by this one", who, v, FormatVersion)
}

// readIdentity is checkIdentity for a read-only environment: the store
// must already exist.
func (s *Store) readIdentity(ctx context.Context) (int, error) {
	foreign := func(detail string, cause error) error {
		return &OpenError{Path: s.path, Err: ErrForeignData, Detail: detail, Cause: cause}
	}
	meta, err := s.env.OpenDBI(ctx, metaDBName)
	if err != nil {
		return 0, foreign("no hatkv identity", err)
	}
	data, err := s.env.OpenDBI(ctx, dataDBName)
	if err != nil {
		return 0, foreign("no hatkv data tree", err)
	}
	s.meta, s.data = meta, data
	// An older format is read as it is (every read understands both
	// record layouts): a read-only open cannot migrate.
	format := FormatVersion
	err = s.env.View(ctx, func(txn *lmdb.Txn) error {
		id, err := txn.GetView(meta, []byte(identityKey))
		if err != nil {
			return foreign("identity record missing", err)
		}
		format, err = s.identityFormat(id)
		return err
	})
	return format, err
}

// Path returns the data directory.
func (s *Store) Path() string { return s.path }

// MaxKeySize returns the longest accepted key.
func (s *Store) MaxKeySize() int { return s.maxKey }

// Close waits for running operations, stops the committer and closes the
// environment. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.committer != nil {
		s.committer.stop()
	}
	return s.env.Close()
}

// enter marks an operation in flight; Close waits for it.
func (s *Store) enter() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) leave() { s.mu.RUnlock() }

// Stats describes the store.
type Stats struct {
	Records       uint64
	Depth         uint
	PageSize      uint
	BranchPages   uint64
	LeafPages     uint64
	OverflowPages uint64
	MapSize       int64
	UsedBytes     int64
	MaxReaders    uint
	NumReaders    uint
	LastTxnID     uint64
	MapGrowths    uint64

	Gets, Puts, Deletes, Scans uint64
	// Commits counts write transactions; BatchedWrites the writes they
	// carried (BatchedWrites/Commits is the mean group-commit batch).
	Commits, BatchedWrites, MaxBatch uint64

	Sync     SyncMode
	Commit   CommitMode
	WriteMap bool
}

// Stats returns current statistics.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	if err := s.enter(); err != nil {
		return Stats{}, err
	}
	defer s.leave()
	var st Stats
	err := s.env.View(ctx, func(txn *lmdb.Txn) error {
		ds, err := txn.Stat(s.data)
		if err != nil {
			return err
		}
		st.Records, st.Depth, st.PageSize = ds.Entries, ds.Depth, ds.PageSize
		st.BranchPages, st.LeafPages, st.OverflowPages = ds.BranchPages, ds.LeafPages, ds.OverflowPages
		return nil
	})
	if err != nil {
		return Stats{}, s.mapErr(err)
	}
	info, err := s.env.Info()
	if err != nil {
		return Stats{}, s.mapErr(err)
	}
	st.MapSize = info.MapSize
	st.UsedBytes = int64(info.LastPgno+1) * int64(st.PageSize)
	st.MaxReaders, st.NumReaders, st.LastTxnID = info.MaxReaders, info.NumReaders, info.LastTxnID
	st.MapGrowths = s.mapGrowth.Load()
	c := &s.counters
	st.Gets, st.Puts, st.Deletes, st.Scans = c.gets.Load(), c.puts.Load(), c.deletes.Load(), c.scans.Load()
	st.Commits, st.BatchedWrites, st.MaxBatch = c.commits.Load(), c.batchedWrites.Load(), c.maxBatch.Load()
	st.Sync, st.Commit, st.WriteMap = s.cfg.sync, s.cfg.commit, s.cfg.writeMap
	return st, nil
}

// mapErr turns binding errors into the store's vocabulary.
func (s *Store) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lmdb.ErrMapFull):
		return fmt.Errorf("%w (map size %d bytes): %w", ErrStoreFull, s.currentMapSize(), err)
	case errors.Is(err, lmdb.ErrClosed):
		return ErrClosed
	}
	return err
}

// writeErr is mapErr for a failed write transaction, which can also
// mean the disk is full (reads cannot: only a write asks for space).
// LMDB reports a short write of its pages as EIO, which a full file system
// causes as well as a failing device: EIO counts as full only when less
// than a megabyte is left.
func (s *Store) writeErr(err error) error {
	eio := errors.Is(err, syscall.EIO)
	if !eio && !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return s.mapErr(err)
	}
	var st syscall.Statfs_t
	var free uint64
	if syscall.Statfs(s.path, &st) == nil {
		free = st.Bavail * uint64(st.Bsize)
	} else if eio {
		return s.mapErr(err)
	}
	if eio && free >= 1<<20 {
		return s.mapErr(err)
	}
	return fmt.Errorf("%w (%d bytes free on the file system holding %s): %w", ErrDiskFull, free, s.path, err)
}

func (s *Store) currentMapSize() int64 {
	s.growMu.Lock()
	defer s.growMu.Unlock()
	return s.mapSize
}

func growStep(mapSize int64) int64 {
	step := mapSize / 64
	if step < 1<<20 {
		step = 1 << 20
	}
	return step
}

// growForDelete enlarges the map by one step, up to a ceiling. A
// completely full LMDB map cannot even delete (copy-on-write needs fresh
// pages), so deletes on a full store get this headroom; the freed pages
// are then reused by later writes.
func (s *Store) growForDelete(ctx context.Context) bool {
	s.growMu.Lock()
	defer s.growMu.Unlock()
	next := s.mapSize + growStep(s.cfg.mapSize)
	if next > s.mapCeil {
		return false
	}
	if err := s.env.SetMapSize(ctx, next); err != nil {
		return false
	}
	s.mapSize = next
	s.mapGrowth.Add(1)
	return true
}
