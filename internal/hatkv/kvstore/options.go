package kvstore

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// SyncMode maps the application's durability hint onto LMDB flags.
type SyncMode int

const (
	// SyncAlways fsyncs data and meta page on every commit (LMDB default).
	SyncAlways SyncMode = iota
	// SyncNoMetaSync skips the meta-page fsync (MDB_NOMETASYNC).
	SyncNoMetaSync
	// SyncNoSync skips fsync entirely (MDB_NOSYNC).
	SyncNoSync
)

func (m SyncMode) String() string {
	switch m {
	case SyncAlways:
		return "always"
	case SyncNoMetaSync:
		return "nometasync"
	case SyncNoSync:
		return "nosync"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// ParseSyncMode parses "always", "nosync" or "nometasync".
func ParseSyncMode(s string) (SyncMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "always", "sync", "":
		return SyncAlways, nil
	case "nometasync":
		return SyncNoMetaSync, nil
	case "nosync":
		return SyncNoSync, nil
	}
	return 0, fmt.Errorf("kvstore: unknown sync mode %q (want always|nosync|nometasync)", s)
}

// CommitMode selects how writes become transactions.
type CommitMode int

const (
	// CommitImmediate runs every write in its own transaction on the
	// caller's goroutine.
	CommitImmediate CommitMode = iota
	// CommitGroup batches concurrent writes into one transaction run by a
	// single committer goroutine.
	CommitGroup
)

func (m CommitMode) String() string {
	switch m {
	case CommitImmediate:
		return "immediate"
	case CommitGroup:
		return "group"
	}
	return fmt.Sprintf("CommitMode(%d)", int(m))
}

// ParseCommitMode parses "immediate" or "group".
func ParseCommitMode(s string) (CommitMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "immediate", "":
		return CommitImmediate, nil
	case "group":
		return CommitGroup, nil
	}
	return 0, fmt.Errorf("kvstore: unknown commit mode %q (want immediate|group)", s)
}

// Limits bounds request sizes. Zero fields take the defaults.
type Limits struct {
	// MaxKeySize is capped by LMDB's compiled-in maximum (511 bytes).
	MaxKeySize   int
	MaxFields    int
	MaxFieldName int
	// MaxRecordSize bounds the encoded record (all fields together).
	MaxRecordSize int
	MaxScanCount  int
	// MaxScanBytes bounds the keys and records one Scan returns: a Scan
	// stops before the record that would pass it (returning at least one
	// record) and says it was cut, so a reply stays within the RPC
	// message limit (64 MiB) however large the records are.
	MaxScanBytes int
	// MaxBatch bounds the number of keys in MultiGet and MultiPut.
	MaxBatch int
}

// DefaultLimits are generous for YCSB (10 fields x 100 bytes, scans of up
// to 1000 records, batches of 10).
var DefaultLimits = Limits{
	MaxFields:     1024,
	MaxFieldName:  255,
	MaxRecordSize: 4 << 20,
	MaxScanCount:  10000,
	MaxScanBytes:  32 << 20,
	MaxBatch:      1024,
}

type config struct {
	sync        SyncMode
	writeMap    bool
	commit      CommitMode
	concurrency int
	mapSize     int64
	maxBatch    int
	maxDelay    time.Duration
	limits      Limits
	verify      VerifyLevel
	readOnly    bool
	log         *slog.Logger
}

func defaultConfig() config {
	return config{
		sync:        SyncAlways,
		commit:      CommitImmediate,
		concurrency: 126,
		mapSize:     1 << 30,
		maxBatch:    256,
		limits:      DefaultLimits,
		log:         slog.New(slog.DiscardHandler),
	}
}

// Option configures Open.
type Option func(*config)

// WithLogger sets where the store says what an operator must act on: a
// full disk, and writes succeeding again after it (default: nowhere).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithSync sets the durability mode.
func WithSync(m SyncMode) Option { return func(c *config) { c.sync = m } }

// WithWriteMap enables MDB_WRITEMAP: writes go straight to the memory
// map, saving a copy per page at the cost of exposing the map to stray
// writes.
func WithWriteMap(on bool) Option { return func(c *config) { c.writeMap = on } }

// WithCommit selects immediate or group commit.
func WithCommit(m CommitMode) Option { return func(c *config) { c.commit = m } }

// WithConcurrency sizes LMDB's reader table from the service's
// concurrency hint (expected concurrent requests); readers beyond it wait.
func WithConcurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// WithMapSize sets the LMDB map size, i.e. the store's capacity.
func WithMapSize(bytes int64) Option { return func(c *config) { c.mapSize = bytes } }

// WithGroupCommit bounds a group-commit batch: at most maxBatch writes,
// and the committer waits at most maxDelay for more writes to arrive
// (0 means it only takes what is already queued).
func WithGroupCommit(maxBatch int, maxDelay time.Duration) Option {
	return func(c *config) {
		c.maxBatch = maxBatch
		c.maxDelay = maxDelay
	}
}

// WithVerify sets how much of data.mdb Open checks before LMDB maps it
// (default VerifyFull).
func WithVerify(v VerifyLevel) Option { return func(c *config) { c.verify = v } }

// WithReadOnly opens an existing store for reading only (MDB_RDONLY): no
// file is created or written, so it may run beside a serving process
// (LMDB supports several processes on one environment), e.g. to back up.
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// WithLimits overrides request limits; zero fields keep their defaults.
func WithLimits(l Limits) Option {
	return func(c *config) {
		set := func(dst *int, v int) {
			if v > 0 {
				*dst = v
			}
		}
		set(&c.limits.MaxKeySize, l.MaxKeySize)
		set(&c.limits.MaxFields, l.MaxFields)
		set(&c.limits.MaxFieldName, l.MaxFieldName)
		set(&c.limits.MaxRecordSize, l.MaxRecordSize)
		set(&c.limits.MaxScanCount, l.MaxScanCount)
		set(&c.limits.MaxScanBytes, l.MaxScanBytes)
		set(&c.limits.MaxBatch, l.MaxBatch)
	}
}

func (c *config) validate() error {
	if c.concurrency < 1 {
		return fmt.Errorf("kvstore: concurrency must be >= 1, got %d", c.concurrency)
	}
	if c.maxBatch < 1 {
		return fmt.Errorf("kvstore: group commit batch must be >= 1, got %d", c.maxBatch)
	}
	if c.mapSize < 1<<20 {
		return fmt.Errorf("kvstore: map size must be >= 1 MiB, got %d", c.mapSize)
	}
	if c.sync < SyncAlways || c.sync > SyncNoSync {
		return fmt.Errorf("kvstore: invalid sync mode %d", c.sync)
	}
	if c.commit < CommitImmediate || c.commit > CommitGroup {
		return fmt.Errorf("kvstore: invalid commit mode %d", c.commit)
	}
	return nil
}
