struct Req { 1: string q }
struct Resp { 1: string a }
service S {
  hint: stream_window = 256KiB;
  Resp g(1: Req req) (streaming.mode="server") [ c_hint: stream_window = 100; ]
  Resp h(1: Req req) (streaming.mode="client") [ s_hint: stream_window = 2GiB; ]
  Resp i(1: Req req) (streaming.mode="client") [ s_hint: stream_window = big; ]
  Resp j(1: Req req) (streaming.mode="bidirectional") [ c_hint: stream_window = 64KiB; s_hint: stream_window = 4MiB; ]
}
