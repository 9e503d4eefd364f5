namespace go ext.base

struct Info { 1: string name }

exception BaseError { 1: string msg }

service Base {
  hint: perf_goal=throughput;
  Info info(1: i32 id) throws (1: BaseError err),
  oneway void ping(),
}
