namespace go streams.base

struct Tick { 1: i64 n }

/** A base service whose stream another package inherits. */
service Clock {
  /** Ticks until the client cancels. */
  Tick ticks(1: Tick from) (streaming.mode="server")
}
