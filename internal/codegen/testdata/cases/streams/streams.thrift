namespace go streams

include "streambase.thrift"

struct Req { 1: string q, 2: i32 n = 3 }
struct Resp { 1: string a, 2: optional i32 seq }
typedef Resp Reply

exception Oops { 1: string why }
exception TooMany { 1: i32 limit }

/** All three stream shapes next to unary calls. */
service Streamer extends streambase.Clock {
  hint: perf_goal = throughput;

  /** Sends n replies for one request. */
  Resp tail(1: Req req) (streaming.mode="server") [ c_hint: stream_window = 256KiB; ],
  Reply upload(1: Req chunk) throws (1: Oops oops, 2: TooMany many) (streaming.mode="client") [ hint: payload_size = 64KiB; s_hint: stream_window = 64KiB; ]
  Resp chat(1: Req msg) throws (1: Oops oops) (streaming.mode = "bidirectional"),
  Resp call(1: Req req) (streaming.mode="unary"),
  /** An argument named like the package generated code uses. */
  Resp watch(1: Req stream) (streaming.mode="server"),
  oneway void note(1: string line),
}
