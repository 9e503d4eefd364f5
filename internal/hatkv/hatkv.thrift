// HatKV: the key-value store co-designed with HatRPC and LMDB (HatRPC paper
// §4.4, Figure 10). Records are YCSB records: 24-byte keys and 10 fields of
// 100 bytes, so a PUT carries about 1 KB and a MultiPUT of 10 about 10 KB.
//
// Two kinds of hints are used. Communication hints (perf_goal, concurrency,
// payload_size) steer the RPC engine per service and per function. The
// application hints kv.* configure the LMDB backend; the server reads them
// from the generated HatKVHints table (service level, server side):
//
//   kv.sync     = always | nometasync | nosync   LMDB durability per commit
//   kv.commit   = immediate | group | auto       one txn per write, or group commit;
//                                                auto (or no hint): group when the
//                                                service plans for throughput or is
//                                                over-subscribed, else immediate
//   kv.writemap = on | off                       MDB_WRITEMAP
//   kv.mapsize  = size (e.g. 1GiB)               LMDB map size = store capacity
//
// and `concurrency` sizes LMDB's reader table (max readers). The kv.* keys
// are store-wide (LMDB environment flags): a function-level kv.* hint that
// differs from the service level is rejected at server start.
//
// The original artifact's ycsb IDL sends each record as one binary value;
// here records are YCSB field maps, so Get/Scan can project fields and Put
// merges fields (YCSB update semantics).
namespace go hatkv

/** A YCSB record: field name to value. */
typedef map<string, binary> Record

/** A key with its record, as MultiPut takes and Scan returns. */
struct KeyRecord {
  1: string key,
  2: Record record,
}

/** One MultiGet answer: found is false for a missing key. */
struct Lookup {
  1: bool found,
  2: Record record,
}

/** Store statistics. */
struct StoreStats {
  1: i64 records,
  2: i64 map_size,
  3: i64 used_bytes,
  4: i32 max_readers,
  5: i32 num_readers,
  6: i64 last_txn_id,
  7: i64 gets,
  8: i64 puts,
  9: i64 deletes,
  10: i64 scans,
  11: i64 commits,
  12: i64 batched_writes,
  13: i64 max_batch,
  14: string sync_mode,
  15: string commit_mode,
  16: bool write_map,
  17: i32 max_key_size,
  18: i64 map_growths,
}

/**
 * A ScanStream request: the records with start_key <= key < end_key in key
 * order (end_key "": through the last key; both "": every record).
 */
struct ScanRequest {
  1: string start_key,
  2: string end_key,
  3: list<string> fields,
  /** At most this many records in all; 0: no limit. */
  4: i64 limit,
  /** At most this many records per message; 0: the server's batch. */
  5: i32 batch_records,
}

/** One message of a ScanStream: the next records, in key order. */
struct ScanBatch {
  1: list<KeyRecord> records,
}

/** The request is malformed: empty or oversized key, record too large, ... */
exception InvalidArgument {
  1: string message,
}

/** The key does not exist. */
exception NotFound {
  1: string message,
  2: string key,
}

/** The LMDB map is full: writes fail, reads and deletes keep working. */
exception StoreFull {
  1: string message,
}

service HatKV {
  hint: perf_goal=throughput, concurrency=128;
  s_hint: kv.sync=always, kv.commit=group, kv.writemap=off;

  /** Returns the record, restricted to fields when fields is not empty. */
  // never_blocks: a Get is one LMDB read transaction (MVCC: it never waits
  // for the writer or a commit) and a copy of the stored wire-form record,
  // a few microseconds; over FLOCK it then runs on the request dispatcher,
  // without a request copy and a worker wake-up per call. It assumes the
  // store's pages are in memory: a page fault to disk stalls the
  // dispatcher, and every call queued behind it, for that read. It also
  // waits while the map is resized (a delete on a full store, rare: one
  // commit's time) or when every LMDB reader slot is taken.
  Record Get(1: string key, 2: list<string> fields)
      throws (1: InvalidArgument bad, 2: NotFound missing)
      [c_hint: payload_size=64; s_hint: payload_size=1KB, never_blocks=on;],

  /** Merges fields into the record (YCSB update); creates it if missing. */
  void Put(1: string key, 2: Record fields)
      throws (1: InvalidArgument bad, 2: StoreFull full)
      [c_hint: payload_size=1KB; s_hint: payload_size=64;],

  void Delete(1: string key)
      throws (1: InvalidArgument bad, 2: NotFound missing, 3: StoreFull full)
      [hint: payload_size=64;],

  /** Reads the keys from one snapshot; one Lookup per key, in order. */
  list<Lookup> MultiGet(1: list<string> keys, 2: list<string> fields)
      throws (1: InvalidArgument bad)
      [c_hint: payload_size=256; s_hint: payload_size=10KB;],

  /** Merges every record atomically: all are committed or none is. */
  void MultiPut(1: list<KeyRecord> records)
      throws (1: InvalidArgument bad, 2: StoreFull full)
      [c_hint: payload_size=10KB; s_hint: payload_size=64;],

  /**
   * Up to count records with keys >= start_key, in key order; fewer when
   * the keys and records would pass the server's scan size limit
   * (kvstore.Limits.MaxScanBytes, 32 MiB by default), or the room the
   * reply has in the server's memory budget or message limit: the answer
   * then ends before the record that would pass it (it holds at least
   * one) and the reply header hatkv-scan-cut is set (on a call that sent
   * headers; "1" for the size limit, "memory" or "message-limit"), so
   * the next Scan starts after its last key.
   */
  list<KeyRecord> Scan(1: string start_key, 2: i32 count, 3: list<string> fields)
      throws (1: InvalidArgument bad)
      [hint: perf_goal=latency; c_hint: payload_size=64;],

  /**
   * Streams every record of the range, without Scan's count limit, in
   * batches of about 64 KiB of keys and records (at most 1,024 records),
   * each read from its own snapshot: see the README's "Streamed scan".
   */
  ScanBatch ScanStream(1: ScanRequest req)
      throws (1: InvalidArgument bad)
      (streaming.mode = "server")
      [c_hint: payload_size=64; s_hint: payload_size=64KB;],

  StoreStats Stats()
      [hint: perf_goal=latency;],
}
