// The stream benchmark's service (issue 46's goals; stream.go): a server
// stream of chunks of a requested size, and the same chunk as a unary
// call, so streamed and called messages are the same bytes on the wire.
// Input of hatgen; Kitex's streaming annotation, which Apache's compiler
// accepts and ignores.
namespace go atbstream

struct Pull {
  1: i64 count, // messages the server sends
  2: i32 size,  // bytes of data in each
}

struct Chunk {
  1: binary data,
}

service Stream {
  hint: perf_goal = throughput;

  // count Chunks of size bytes each, then a clean end. The client only
  // checks each Chunk before its next Recv: it borrows them (a fresh
  // buffer per message cost more than the bytes' copy).
  Chunk pull(1: Pull req) (streaming.mode = "server") [ c_hint: borrow_msgs = on; ],

  // One Chunk of req.size bytes (req.count is ignored): the unary
  // comparison of the small-message goal.
  Chunk fetch(1: Pull req),
}
