namespace go kv

service KV {
  hint: perf_goal=throughput;
  s_hint: polling=event;
  binary get(1: string key) [c_hint: payload_size=4KB; s_hint: payload_size=128KiB;],
  void put(1: string key, 2: binary value) [c_hint: protocol=rfp, app.tag=x;],
}
