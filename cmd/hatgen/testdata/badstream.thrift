struct Req { 1: string q }
struct Resp { 1: string a }
service S {
  Resp a(1: Req req) (streaming.mode="sever"),
  void b(1: Req req) (streaming.mode="server"),
  Resp c(1: string q) (streaming.mode="client"),
  oneway void d(1: Req req) (streaming.mode="bidirectional"),
  Resp e(1: Req req) (streaming.mode="server") [ c_hint: idempotent = on; ]
  Resp f(1: Req req) [ hint: stream_window = 64KiB; ]
}
