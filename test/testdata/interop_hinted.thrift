// The interop IDL with HatRPC hints, input of hatgen. It must stay identical
// to interop.thrift (the hint-free copy Apache's compiler reads) apart from
// the hints: the interop tests make code generated from the two talk.
//
// uuid is absent on purpose: Debian's thrift 0.17 predates the uuid type.
namespace go interop
namespace py interop

enum Color {
  RED = 1,
  GREEN = 2,
  BLUE = 3,
}

struct Inner {
  1: i32 id,
  2: string name,
}

struct AllTypes {
  1: bool b,
  2: i8 i8v,
  3: i16 i16v,
  4: i32 i32v,
  5: i64 i64v,
  6: double d,
  7: string s,
  8: binary bin,
  9: Color color,
  10: list<i32> ints,
  11: set<string> strs,
  12: map<string, i64> m,
  13: list<Inner> inners,
  14: map<i32, list<string>> nested,
  15: optional string opt,
  16: Inner inner,
  17: list<bool> bools,
  18: map<string, Inner> byName,
}

exception InteropError {
  1: i32 code,
  2: string message,
}

exception OtherError {
  1: string reason,
}

service Interop {
  hint: transport = tcp, perf_goal = latency;
  s_hint: concurrency = 8;
  void ping(),
  AllTypes echoAll(1: AllTypes v),
  binary echoBinary(1: binary data) [ hint: perf_goal = throughput, payload_size = 16MiB; ],
  string echoString(1: string s),
  i64 add(1: i32 a, 2: i64 b),
  // code 0 returns 42, 1 raises InteropError{code=1}, 2 raises OtherError and
  // anything else fails with an undeclared error (an INTERNAL_ERROR reply).
  i32 mayFail(1: i32 code) throws (1: InteropError err, 2: OtherError other),
  oneway void notify(1: string msg) [ c_hint: perf_goal = res_util; ],
  // Returns the messages received through notify since the last drain.
  list<string> drainNotes(),
  // Blocks for up to ms milliseconds (or until the server is stopped); the
  // fault tests use it to have a call in flight.
  i32 sleep(1: i32 ms),
}
