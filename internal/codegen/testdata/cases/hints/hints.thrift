namespace go hinted

service KV {
  hint: perf_goal=throughput, concurrency=16;
  s_hint: polling=event, kv.store=lmdb;
  c_hint: timeout=2s;
  binary get(1: string key) [hint: payload_size=4KB; c_hint: protocol=direct_write_imm;],
  void put(1: string key, 2: binary value) [s_hint: kv.sync=nosync, payload_size=128KiB;],
  i32 size() [s_hint: never_blocks=on;],
}

service Plain {
  void noop(),
}
