// The coordinator↔worker exchange with HatRPC hints: the same functions and
// types as exchange_base.thrift (which Apache Thrift's compiler reads for
// the vanilla configuration). FetchChunk carries the data (replies up to
// the coordinator's maxBytes, 1 MiB by default): throughput, hybrid
// eager/rendezvous; the control calls are small and latency-bound.
namespace go exchange

include "exchange_base.thrift"

service Exchange {
  hint: perf_goal = throughput;

  exchange_base.WorkerInfo Info() [ hint: perf_goal = latency; c_hint: idempotent = on; ]
  exchange_base.OpenResp OpenFragment(1: exchange_base.OpenReq req) throws (1: exchange_base.FragmentError err) [ hint: perf_goal = res_util, polling = event; ]
  exchange_base.Chunk FetchChunk(1: exchange_base.FetchReq req) throws (1: exchange_base.FragmentError err) [ hint: perf_goal = throughput, protocol = hybrid, polling = busy; s_hint: payload_size = 1MiB; ]
  void CloseFragment(1: i64 handle) [ hint: perf_goal = latency; ]
  void Cancel(1: string tag) [ hint: perf_goal = latency; ]
}
