//go:build cgo && linux

package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// slotGate is a service whose "hold" handler signals entered and waits for
// release, whose "quick" handler answers at once, and whose "fire" is a
// oneway call.
type slotGate struct{ entered, release chan struct{} }

func newSlotGate() *slotGate {
	return &slotGate{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *slotGate) service() *server.Service {
	reply := func(msg string) proto.Struct { return &wiretest.EchoResult{Success: &msg} }
	return &server.Service{Name: "Gate", Methods: []server.Method{
		{Name: "hold", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
			Handle: func(context.Context, proto.Struct) (proto.Struct, error) {
				g.entered <- struct{}{}
				<-g.release
				return reply("held"), nil
			}},
		{Name: "quick", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
			Handle: func(context.Context, proto.Struct) (proto.Struct, error) { return reply("quick"), nil }},
		{Name: "fire", Oneway: true, NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
			Handle: func(context.Context, proto.Struct) (proto.Struct, error) { return nil, nil }},
	}}
}

// slotHeld is a server with one call slot and two dedicated lanes, whose
// first lane's "hold" call has taken the slot: held receives its reply
// once g.release is closed. The lanes close when the test ends.
func slotHeld(t *testing.T, busyTimeout time.Duration) (s *server.Server, g *slotGate, other func(req []byte) []byte, held chan []byte) {
	g = newSlotGate()
	s = server.New(server.WithLogger(quiet), server.WithMaxConcurrentCalls(1), server.WithBusyTimeout(busyTimeout))
	s.Register(g.service())
	holder, doneA := server.LaneCaller(s)
	t.Cleanup(doneA)
	other, doneB := server.LaneCaller(s)
	t.Cleanup(doneB)
	held = make(chan []byte, 1)
	go func() { held <- holder(laneRequest(t, "hold", "x", 1, 0)) }()
	g.waitEntered(t)
	return s, g, other, held
}

func (g *slotGate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		t.Fatal("the holding call did not start")
	}
}

// TestLaneCallWaitsForSlot: a dedicated lane's call that finds every call
// slot taken waits for one (up to the busy timeout) and then runs: the
// slot is the only thing a lane call takes before its handler, and it
// is given back, so the next call finds it free.
func TestLaneCallWaitsForSlot(t *testing.T) {
	s, g, other, held := slotHeld(t, time.Minute)
	waiting := make(chan []byte, 1)
	go func() { waiting <- other(laneRequest(t, "quick", "x", 2, 0)) }()
	select {
	case <-waiting:
		t.Fatal("a call ran while the only slot was taken")
	case <-time.After(20 * time.Millisecond): // a false pass at worst, never a false failure
	}
	close(g.release)
	for i, ch := range []chan []byte{held, waiting} {
		select {
		case out := <-ch:
			h, err := wire.DecodeHeader(out, 1<<20)
			require.NoError(t, err)
			require.Equal(t, wire.KindReply, h.Kind, "call %d", i)
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Fatalf("call %d did not end", i)
		}
	}
	out := other(laneRequest(t, "quick", "x", 3, 0)) // the slot was given back
	h, err := wire.DecodeHeader(out, 1<<20)
	require.NoError(t, err)
	require.Equal(t, wire.KindReply, h.Kind)
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	require.Equal(t, 0.0, metricValue(mfs, "hatrpc_server_rejected_total", map[string]string{"reason": "busy"}))
	require.Equal(t, 0.0, metricValue(mfs, "hatrpc_server_in_flight", nil))
}

// TestLaneShutdownWaitsForCall: a dedicated lane's calls are not counted
// in flight on their connection or in the server's call group (the
// lane's connection goroutine runs them), yet a graceful Shutdown still
// waits for a lane call under way, its reply reaches the client, and the
// server ends with no connection, lane or call left.
func TestLaneShutdownWaitsForCall(t *testing.T) {
	g := newSlotGate()
	s := server.New(server.WithLogger(quiet), server.WithRDMA(fastpathtest.Provider()))
	s.Register(g.service())
	addr := serveOn(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, addr)
	require.NoError(t, err)
	defer c.Close()
	call := func(name string) (string, error) {
		var res wiretest.EchoResult
		m := &client.Method{Service: "Gate", Name: name, Hints: &hints.Function{Name: name}}
		if err := c.Call(ctx, m, &wiretest.EchoArgs{Msg: "x"}, &res); err != nil {
			return "", err
		}
		return *res.Success, nil
	}
	got, err := call("quick")
	require.NoError(t, err)
	require.Equal(t, "quick", got)

	held := make(chan error, 1)
	go func() {
		got, err := call("hold")
		if err == nil && got != "held" {
			err = wire.ErrBadFrame
		}
		held <- err
	}()
	g.waitEntered(t)
	lanes, _, _, _ := server.FastPathInUse(s)
	require.Equal(t, 2, lanes, "quick's lane and hold's lane")
	waitInFlight(t, s, 1)

	shut := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
		defer scancel()
		shut <- s.Shutdown(sctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a lane call ran", err)
	case <-time.After(50 * time.Millisecond): // a false pass at worst, never a false failure
	}
	close(g.release)
	select {
	case err := <-held:
		require.NoError(t, err, "the lane call under way must complete during a graceful shutdown")
	case <-time.After(testenv.HangGuard(20 * time.Second)):
		t.Fatal("the lane call did not end")
	}
	select {
	case err := <-shut:
		require.NoError(t, err)
	case <-time.After(testenv.HangGuard(20 * time.Second)):
		t.Fatal("Shutdown did not return after the lane call ended")
	}
	lanes, peers, bytes, pending := server.FastPathInUse(s)
	require.Zero(t, lanes)
	require.Zero(t, peers)
	require.Zero(t, bytes)
	require.Zero(t, pending)
	require.Empty(t, server.Conns(s))
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	require.Equal(t, 0.0, metricValue(mfs, "hatrpc_server_in_flight", nil))
	require.Equal(t, 1.0, metricValue(mfs, "hatrpc_server_calls_total", map[string]string{"function": "hold"}))
}
