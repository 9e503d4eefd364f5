namespace go echo

struct Msg {
  1: string text,
  2: optional i32 n,
}

service Echo {
  hint: perf_goal=latency;
  Msg echo(1: Msg m) [c_hint: payload_size=512;],
}
