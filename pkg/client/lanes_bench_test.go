package client_test

import (
	"context"
	"testing"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// BenchmarkLanes compares one function's calls over TCP and over engine
// lanes (shm, or RDMA with HATRPC_PROVIDER=ibv) planned with different hints, one caller (latency) and 64 callers
// (throughput), server and client in one process.
func BenchmarkLanes(b *testing.B) {
	args := &wiretest.EchoArgs{Msg: "hello, benchmark"}
	plans := []struct {
		name string
		set  hints.Set
		tcp  bool
	}{
		{"tcp", hints.Set{}, true},
		{"shm-busy-imm", hints.Set{Protocol: hints.ProtoDirectWriteIMM, Polling: hints.PollBusy}, false},
		{"shm-adaptive-imm", hints.Set{Protocol: hints.ProtoDirectWriteIMM, Polling: hints.PollAdaptive}, false},
		{"shm-event-imm", hints.Set{Protocol: hints.ProtoDirectWriteIMM, Polling: hints.PollEvent}, false},
		{"shm-flock", hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64}, false},
	}
	for _, p := range plans {
		m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo", Client: p.set,
			Server: hints.Set{PayloadSize: 64, Polling: p.set.Polling}}}
		var opts []client.Option
		if p.tcp {
			opts = append(opts, client.WithRDMA("off"))
		}
		call := func(c *client.Conn) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				var res wiretest.EchoResult
				return c.Call(ctx, m, args, &res)
			}
		}
		b.Run(p.name+"/seq", func(b *testing.B) {
			ts := serve(b, "", server.WithRDMA("auto")) // HATRPC_PROVIDER picks shm or ibv
			c := dial(b, ts.addr, opts...)
			benchSeq(b, call(c))
		})
		b.Run(p.name+"/par64", func(b *testing.B) {
			ts := serve(b, "", server.WithRDMA("auto"))
			c := dial(b, ts.addr, opts...)
			f := call(c)
			benchPar(b, func(ctx context.Context, _ int) error { return f(ctx) })
		})
	}
}
