// Package kvstore is the storage engine of hatkv: YCSB-style records
// (field maps) kept in LMDB through internal/hatkv/lmdb.
//
// # Data layout
//
// One LMDB environment per data directory with two named databases:
// "hatkv.data" maps keys to encoded records (see EncodeRecord: a version
// byte, then, in format 2, the record's wire form — a Thrift binary
// map<string, binary> with name-sorted fields — which GetWire, MultiGetWire
// and ScanWire hand out without decoding) and "hatkv.meta" holds the store
// identity (magic "HATKV\0" and the format version). The directory also
// holds MarkerFile ("hatkv-format"), which says it is a hatkv data
// directory and which format it holds. A format-1 store (uvarint-prefixed
// fields) is migrated by Open in steps (see Migrated); a newer format is
// refused with ErrUnsupportedVersion.
//
// # What Open refuses
//
// Open accepts a missing or empty directory, a marked one, and an unmarked
// one holding only data.mdb and lock.mdb with the identity inside (a store
// from before the marker: adopted, the marker is written). It refuses,
// before LMDB opens, maps or writes any file, and changing nothing: a file
// given as the directory, other files in an unmarked directory, a lock.mdb
// that is not LMDB's (ErrForeignData); an empty, truncated or damaged
// data.mdb (ErrCorruptData, matching lmdb.ErrDamaged and the LMDB code for
// the condition), checked in Go by lmdb.ReadMeta and, at VerifyFull (the
// default), by lmdb.Verify over every page and record, because LMDB trusts
// its pages and a damaged one crashes the process (SIGBUS, SIGSEGV, an
// assertion) or loses records silently; a valid LMDB environment without
// the identity (ErrForeignData). The *OpenError names the path. Check
// runs the same walk and lists the damage; Backup writes a verified,
// compacted copy.
//
// # Writes and acknowledgement
//
// Put merges fields into a record (YCSB update; a missing record is
// created), Insert replaces it, MultiPut merges several records in one
// transaction, Delete removes one. A write call returns nil only after the
// LMDB transaction containing it has committed. With CommitImmediate each
// write is its own transaction on the caller's goroutine. With CommitGroup
// a single committer goroutine takes all queued writes (at most maxBatch,
// waiting at most maxDelay for more) and commits them in one transaction,
// so one fsync covers many callers; if that transaction fails every caller
// in it receives the error. A caller whose context ends while queued or
// waiting gets the context error; its write may or may not have committed.
//
// # Durability modes
//
// The guarantees below are LMDB's (mdb_env_open flags):
//
//   - SyncAlways (default): commit flushes the data pages and then the meta
//     page. An acknowledged write survives a process crash and an OS crash
//     or power loss.
//   - SyncNoMetaSync (MDB_NOMETASYNC): data pages are flushed on commit but
//     the meta page is not; a system crash may undo the last committed
//     transaction (atomicity, consistency and isolation are kept, durability
//     of that last transaction is not). The next commit or an explicit sync
//     makes it durable.
//   - SyncNoSync (MDB_NOSYNC): nothing is flushed on commit; a system crash
//     can lose every transaction since the OS last wrote its buffers, and
//     unless the filesystem preserves write order it can corrupt the
//     database. With WriteMap as well LMDB gives the kernel no hint when to
//     write at all.
//
// A crash of only the process (kill -9) loses nothing that was
// acknowledged in any mode, because committed pages are already in the
// kernel's page cache; the durability test checks exactly this promise
// (ack implies committed) under SIGKILL for both commit modes. The
// difference between the modes shows only on power loss or kernel crash,
// which a test cannot provoke.
//
// # Full map
//
// When the LMDB map is full, writes fail with ErrStoreFull and reads keep
// working. LMDB's copy-on-write needs fresh pages even to delete, so a
// delete that hits a full map grows the map by a small step (at most
// eight steps of max(1 MiB, mapsize/64) over the configured size, counted
// in Stats.MapGrowths); pages freed by deletes are then reused by later
// writes.
//
// # Full disk
//
// A write the file system has no room for fails with ErrDiskFull (an
// ErrStoreFull too) and leaves the store as it was: reads keep working,
// writes work again once space is freed; the logger (WithLogger) is told
// once when the disk fills and once when writes succeed again. With WriteMap, LMDB writes by
// storing into the mapped file, and a page the disk cannot back would be
// a SIGBUS that ends the process; so the map is allocated on disk when
// the store opens and when it grows (Open fails with ENOSPC, saying why,
// when it does not fit).
//
// # Concurrency
//
// Reads run in LMDB read transactions from any goroutine (MDB_NOTLS). The
// reader table is sized from WithConcurrency; readers beyond it wait for
// a slot rather than fail with MDB_READERS_FULL.
package kvstore
