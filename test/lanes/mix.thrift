// A service with a latency-critical function and a throughput function, as
// in the HatRPC mix benchmark: the hints give each its own plan, and the
// runtime runs each on lanes of its own.
namespace go mix

service Mix {
  s_hint: concurrency = 1024;

  // Small and latency-critical: busy polling, Direct-WriteIMM both ways.
  binary ping(1: binary data) [ hint: perf_goal = latency, payload_size = 64; ]

  // Bulk: many concurrent callers with 128 KiB payloads; over-subscribed,
  // so large messages go by RFP and everyone polls by events.
  i64 crunch(1: binary data) [ hint: perf_goal = throughput, concurrency = 1024, payload_size = 128KiB; ]

  // Pinned to TCP whatever the connection upgraded to (hybrid transport).
  string status() [ hint: transport = tcp; ]

  oneway void note(1: string msg)
}

// Many callers, small messages: the callers of every connection of a
// process share a few QPs through one FLOCK handle (qp_sharing).
service Shared {
  hint: qp_sharing = on, perf_goal = throughput, concurrency = 256;

  binary get(1: binary key) [ c_hint: payload_size = 64; s_hint: payload_size = 1KiB; ]
  i64 slow(1: i64 ms) [ hint: payload_size = 64; ]
}

// atb.thrift's echo (internal/bench/idl), for pkg/server's lane-call tests
// and benchmarks, which may not import internal/: the handler keeps nothing
// past the call, so the server decodes its argument in place.
service Echo {
  hint: perf_goal = latency;
  s_hint: concurrency = 64;

  binary echo(1: binary payload) [ s_hint: borrow_args = on; ],
}
