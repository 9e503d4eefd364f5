// The echo service of the "Your first service" guide (README.md).
//
// Everything here is plain Apache Thrift IDL except the hint groups: a
// `hint:` group applies to both sides, `s_hint:` to the server only and
// `c_hint:` to the client only. Service-level groups come first in the
// service body; a function's own groups go in [ ... ] after its signature
// and override the service-level ones for that function.
namespace go echo

exception EchoError {
  1: string message,
}

service Echo {
  hint: perf_goal = latency;
  s_hint: concurrency = 8;

  // Returns msg unchanged; an empty msg is refused with EchoError.
  string echo(1: string msg) throws (1: EchoError err),

  // Bulk data: tell the runtime it is about throughput and large payloads,
  // and that the handler keeps nothing of data once it returns.
  binary echoBytes(1: binary data) [ hint: perf_goal = throughput, payload_size = 1MiB; s_hint: borrow_args = on; ]
}
