namespace go ext.child

include "base.thrift"

service Middle extends base.Base {
  i32 count(),
}

service Child extends Middle {
  hint: perf_goal=latency;
  string name(1: base.Info info) [c_hint: timeout=50ms;],
}
