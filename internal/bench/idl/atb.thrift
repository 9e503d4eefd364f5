// Apache Thrift Benchmark (ATB) echo service with HatRPC hints; input of
// hatgen. atb_plain.thrift is the hint-free copy for Apache's compiler.
namespace go atb

service Echo {
  hint: perf_goal = latency;
  s_hint: concurrency = 64;

  // The echo handlers return their argument and keep nothing past the
  // call, neither it nor their context, so the server may decode it in
  // place and a lane reuse the context (docs/hints.md, "Borrowed
  // arguments").
  binary echo(1: binary payload) [ s_hint: borrow_args = on; s_hint: borrow_ctx = on; ],
}
