// Apache Thrift Benchmark (ATB) echo service with HatRPC hints; input of
// hatgen. atb_plain.thrift is the hint-free copy for Apache's compiler.
namespace go atb

service Echo {
  hint: perf_goal = latency;
  s_hint: concurrency = 64;

  binary echo(1: binary payload),
}
