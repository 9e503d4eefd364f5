namespace go services

struct Req { 1: string q }
struct Resp { 1: list<string> hits }

/** A service exercising every function shape. */
service Search {
  /** Plain call. */
  Resp search(1: Req req, 2: i32 limit),
  void reset(),
  oneway void log(1: string line),
  list<string> suggest(1: string prefix),
  map<string, i32> stats(),
  binary raw(1: binary in),
  i64 total(1: list<Req> reqs, 2: map<string, Req> named, 3: set<i32> ids),
  bool optional_args(1: optional i32 maybe, 2: i32 surely),
}
