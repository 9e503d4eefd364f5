package server_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestServerPlan: the server's table of a function is the one hatgen
// explain builds for the server side (hints.TableFor), sized for the
// client's declared requests, on the transport asked for.
func TestServerPlan(t *testing.T) {
	fn := &hints.Function{Name: "echo",
		Client: hints.Set{PayloadSize: 100 << 10},
		Server: hints.Set{PerfGoal: hints.Throughput, Concurrency: 1 << 10, Protocol: hints.ProtoHybrid}}
	svc := wiretest.NewEcho().Service()
	svc.Methods[0].Hints = fn
	s := server.New(server.WithLogger(quiet))
	s.Register(svc)

	for _, name := range []string{"Echo:echo", "echo"} {
		tb := s.Plan(name, hints.TransportSHM)
		want := hints.TableFor(fn.Server, hints.Env{Side: hints.SideServer, Transport: hints.TransportSHM,
			Cores: tb.Cores, PeerPayload: fn.Client.PayloadSize})
		require.Equal(t, want, tb, name)
		assert.Equal(t, hints.SideServer, tb.Side)
		assert.Equal(t, hints.ProtoEager, tb.RowFor(tb.EagerThreshold).Protocol)
		assert.Equal(t, hints.ProtoWriteRNDV, tb.RowFor(tb.EagerThreshold+1).Protocol)
		assert.Equal(t, hints.BufferFor(100<<10), tb.DirectSize, "sized for the client's requests")
		assert.True(t, tb.Has(hints.AdaptFlockReply))
	}
	tcp := s.Plan("Echo:echo", hints.TransportTCP)
	assert.Equal(t, []hints.Row{{Max: hints.NoBound, Route: hints.RouteTCP, Polling: tcp.Polling}}, tcp.Rows)
	unknown := s.Plan("nope", hints.TransportRDMA)
	assert.Equal(t, hints.Latency, unknown.Goal, "an unknown function plans with the defaults")
}
