// The exchange between the TPC-H coordinator and its DuckDB workers, as
// plain Thrift: Apache Thrift's compiler reads this file (the vanilla
// configuration, apachegen/) and exchange.thrift declares the same service
// with HatRPC hints over these types.
namespace go exchangebase

// How a column's values travel: BIGINT and smaller integers as i64,
// FLOAT/DOUBLE as double, BOOLEAN as bool, everything else (DECIMAL, DATE,
// VARCHAR, HUGEINT, ...) as its exact text, cast back to dbType on arrival.
enum Kind {
  I64 = 1,
  F64 = 2,
  BOOL = 3,
  STR = 4,
}

struct ColumnMeta {
  1: required string name,
  2: required string dbType,
  3: required Kind kind,
}

// One column of a chunk: the list of its kind, one value per row (a zero
// value where the row is NULL), and a bitmap of the NULL rows (bit i of
// byte i/8), empty when none is NULL.
struct Column {
  1: optional list<i64> i64s,
  2: optional list<double> f64s,
  3: optional list<bool> bools,
  4: optional list<string> strs,
  5: required binary nulls,
}

// Input is rows a fragment needs from every worker (a shuffle): before
// the fragment's sql runs, worker i of N asks each of peers (itself too),
// under the same tag, for the rows of sql whose key % N = i, and loads
// them into a temporary table of that name, seen by the fragment's sql
// alone.
struct Input {
  1: required string table,
  2: required string sql,
  3: required string key,
}

struct OpenReq {
  1: required string sql,
  2: required string tag,
  3: optional list<Input> inputs,
  // The workers' exchange addresses in the configuration of this call
  // (worker i at i), for inputs.
  4: optional list<string> peers,
  // A share of a shuffle's input: the worker runs spool.sql once per tag
  // into a table that the requests of all N workers read (sql names it
  // {spool}), so each peer scans its data once, not once per receiver.
  5: optional Input spool,
}

struct OpenResp {
  1: required i64 handle,
  2: required list<ColumnMeta> columns,
  // The inputs' values the worker received (ChunkBytes), for the
  // coordinator's count of bytes exchanged.
  3: optional i64 inputBytes,
}

struct FetchReq {
  1: required i64 handle,
  2: required i32 maxBytes,
}

struct Chunk {
  1: required i32 rows,
  2: required list<Column> columns,
  3: required bool last,
}

struct WorkerInfo {
  1: required i32 index,
  2: required i32 count,
  3: required double sf,
  4: required i64 lineitemRows,
  5: required i64 ordersRows,
  6: required i32 openFragments,
}

exception FragmentError {
  1: required string message,
}

service Exchange {
  WorkerInfo Info(),
  OpenResp OpenFragment(1: OpenReq req) throws (1: FragmentError err),
  Chunk FetchChunk(1: FetchReq req) throws (1: FragmentError err),
  void CloseFragment(1: i64 handle),
  // Cancel stops every fragment the coordinator opened (or is opening)
  // under tag, and releases their handles.
  void Cancel(1: string tag),
}
