// A store whose reads may run twice and whose writes may not: the
// cluster tests call it through its generated client over a
// cluster.Client.
namespace go store

exception NotFound {
  1: string key
}

service Store {
  // Idempotent: a multi-server client sends it again after a failure.
  string get(1: string key) throws (1: NotFound nf) [c_hint: idempotent = true, retries = 3;]
  // Not idempotent: never sent twice.
  i64 incr(1: string key)
  // Idempotent with a call deadline: retries stop at the deadline.
  string slow(1: string key) [c_hint: idempotent = true, retries = 10, timeout = 200ms;]
  // Idempotent, read in place with BlobBorrowed.
  binary blob(1: i32 size) [c_hint: idempotent = on;]
}
