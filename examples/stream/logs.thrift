// The log service of the streaming guide (README.md): one function per
// stream shape, declared in plain Thrift with Kitex's annotation
// `(streaming.mode = "...")`, which Apache's compiler accepts and ignores.
//
// A streaming function takes one struct and returns a struct: each message
// the client sends is the argument's struct, each message the server sends
// is the return struct. Declared exceptions end the stream.
namespace go logs

struct TailRequest {
  1: string source,
  2: i32 last,      // how many of the newest lines to send
}

struct Line {
  1: i64 seq,
  2: string text,
}

struct Chunk {
  1: string source,
  2: binary data,
}

struct UploadSummary {
  1: i64 chunks,
  2: i64 bytes,
}

struct ChatMessage {
  1: string author,
  2: string text,
}

exception NoSuchSource {
  1: string source,
}

exception QuotaExceeded {
  1: i64 limit_bytes,
}

service Logs {
  hint: perf_goal = throughput;

  // Server stream: the client sends one TailRequest, the server sends Lines.
  // The client holds at most 256 KiB of Lines it has not read yet: the
  // server's handler blocks in Send beyond that (stream_window).
  Line tail(1: TailRequest req) throws (1: NoSuchSource missing) (streaming.mode = "server") [ c_hint: stream_window = 256KiB; ],

  // Client stream: the client sends Chunks, the server replies once.
  UploadSummary upload(1: Chunk chunk) throws (1: QuotaExceeded quota) (streaming.mode = "client") [ hint: payload_size = 64KiB; ]

  // Bidirectional stream: both sides send when they like.
  ChatMessage chat(1: ChatMessage msg) (streaming.mode = "bidirectional"),

  // A unary call next to the streams, on the same connection.
  i64 count(1: string source) throws (1: NoSuchSource missing),
}
