//go:build cgo && linux

package client_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// countingArgs counts how often the call's arguments were encoded.
type countingArgs struct {
	wiretest.EchoArgs
	n *atomic.Int32
}

func (a *countingArgs) EncodeBinary(w *proto.BinaryWriter) error {
	a.n.Add(1)
	return a.EchoArgs.EncodeBinary(w)
}

func (a *countingArgs) EncodeCompact(w *proto.CompactWriter) error {
	a.n.Add(1)
	return a.EchoArgs.EncodeCompact(w)
}

// seen is what a server interceptor saw of the calls.
type seen struct {
	mu    sync.Mutex
	calls []server.CallInfo
	rids  []string
}

func (s *seen) interceptor() server.Interceptor {
	return func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		s.mu.Lock()
		s.calls = append(s.calls, *info)
		s.rids = append(s.rids, metadata.RequestID(ctx))
		s.mu.Unlock()
		return next(ctx, args)
	}
}

// TestRouteFallbackEncodesOnce: a call whose lane cannot open (the server's
// budget refuses it) goes over TCP with the bytes the lane route encoded:
// its arguments are encoded once, and the server sees it as any TCP call
// (the session's seqid, a request id), in either protocol and whether or
// not the call sets headers.
func TestRouteFallbackEncodesOnce(t *testing.T) {
	cases := []struct {
		name    string
		opts    []client.Option
		headers bool
		set     hints.Set
	}{
		{"binary", nil, false, hints.Set{}},
		{"compact", []client.Option{client.WithCompact()}, false, hints.Set{}},
		{"headers", nil, true, hints.Set{}},
		// A batched function's calls went nowhere: the batch's lane
		// failed them with "client: no lane".
		{"batch", nil, false, hints.Set{Protocol: hints.ProtoRFP, Batch: 4, BatchTimeout: time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sn seen
			ts := laneServer(t, server.WithLaneLimits(server.LaneLimits{Bytes: 1}),
				server.WithInterceptors(sn.interceptor()))
			// A long backoff: every call here finds the fast path off.
			c := dial(t, ts.addr, append(tc.opts, client.WithFastPathRetry(time.Hour, time.Hour))...)
			m := methodWith(tc.set)
			for i, n := range []int{10, 5000, 200 << 10} {
				var encodes atomic.Int32
				args := &countingArgs{wiretest.EchoArgs{Msg: strings.Repeat("y", n)}, &encodes}
				ctx := tctx(t)
				if tc.headers {
					ctx = metadata.AppendToOutgoingContext(ctx, "tenant", "t1")
				}
				var res wiretest.EchoResult
				require.NoError(t, c.Call(ctx, m, args, &res))
				require.NotNil(t, res.Success)
				require.Equal(t, args.Msg, *res.Success)
				require.Equal(t, int32(1), encodes.Load(), "call %d: arguments encoded once", i)
			}
			require.ErrorIs(t, c.FastPathErr(), client.ErrFastPathSetup)
			require.Equal(t, 3.0, callsOn(t, ts, "tcp"))
			require.Equal(t, 0.0, callsOn(t, ts, fastpathtest.Transport()))
			sn.mu.Lock()
			defer sn.mu.Unlock()
			require.Len(t, sn.calls, 3)
			ids := map[int32]bool{}
			for i, ci := range sn.calls {
				require.Equal(t, server.TransportTCP, ci.Transport)
				ids[ci.Seqid] = true
				require.NotEmpty(t, sn.rids[i], "call %d carried a request id", i)
			}
			require.Len(t, ids, 3, "each call had its own seqid: %v", ids)
			require.EqualValues(t, 2, client.RoutePicks(c), "picked twice: the lane pool, then TCP from the fallback on")
		})
	}
}

// TestRouteFlockOversizeEncodesOnce: a qp_sharing call too large for a
// FLOCK message goes to a lane with the bytes FLOCK's route encoded.
func TestRouteFlockOversizeEncodesOnce(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr)
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo",
		Client: hints.Set{PayloadSize: 256, QPSharing: hints.SwitchOn}, Server: hints.Set{PayloadSize: 256}}}
	for _, n := range []int{10, 100 << 10, 20} {
		var encodes atomic.Int32
		args := &countingArgs{wiretest.EchoArgs{Msg: strings.Repeat("z", n)}, &encodes}
		var res wiretest.EchoResult
		require.NoError(t, c.Call(tctx(t), m, args, &res))
		require.NotNil(t, res.Success)
		require.Equal(t, args.Msg, *res.Success)
		require.Equal(t, int32(1), encodes.Load(), "%d bytes: arguments encoded once", n)
	}
	st := c.LaneStats()
	require.Len(t, st, 1)
	var lane uint64
	for name, n := range st[0].Requests {
		if name != "flock" {
			lane += n
		}
	}
	require.Equal(t, uint64(2), st[0].Requests["flock"], "small calls shared: %v", st[0].Requests)
	require.Equal(t, uint64(1), lane, "the large call went by a lane: %v", st[0].Requests)
	require.Equal(t, 3.0, callsOn(t, ts, fastpathtest.Transport()))
}

// TestRouteCachedPerMethod: a method's route is picked on its first call
// and kept, also for Method values made afresh per call; another method
// picks its own, and a call of the same method asking for another
// transport picks again.
func TestRouteCachedPerMethod(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr)
	call := func(m *client.Method) {
		t.Helper()
		var res wiretest.EchoResult
		require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "hi"}, &res))
		require.Equal(t, "hi", *res.Success)
	}
	for range 20 {
		call(methodWith(hints.Set{}))
	}
	require.EqualValues(t, 1, client.RoutePicks(c))
	require.Equal(t, 20.0, callsOn(t, ts, fastpathtest.Transport()))
	for range 3 {
		fire := &client.Method{Service: "Echo", Name: "fire", Oneway: true}
		require.NoError(t, c.Call(tctx(t), fire, &wiretest.EchoArgs{Msg: "f"}, nil))
	}
	require.EqualValues(t, 2, client.RoutePicks(c), "another method picks its own")
	for range 3 {
		call(methodWith(hints.Set{Transport: hints.TransportTCP}))
	}
	require.EqualValues(t, 3, client.RoutePicks(c), "pinned to TCP: picked again")
	require.Equal(t, 3.0, callsOn(t, ts, "tcp"))
	for range 5 {
		call(methodWith(hints.Set{}))
	}
	require.EqualValues(t, 4, client.RoutePicks(c))
	require.Equal(t, 25.0, callsOn(t, ts, fastpathtest.Transport()))
}

// TestRouteMethodValueReused: a Method value the caller reuses for another
// method (its Name changed between calls) is routed as that method, not
// by the route cached for the value.
func TestRouteMethodValueReused(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr)
	m := &client.Method{Service: "Echo", Name: "echo"}
	for range 3 {
		var res wiretest.EchoResult
		require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "hi"}, &res))
		require.Equal(t, "hi", *res.Success)
	}
	m.Name, m.Oneway = "fire", true
	require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "f"}, nil))
	st := c.LaneStats()
	require.Len(t, st, 2, "%+v", st)
	sent := func(s client.LaneStats) (n uint64) {
		for _, v := range s.Requests {
			n += v
		}
		return n
	}
	require.Equal(t, "Echo:echo", st[0].Function)
	require.EqualValues(t, 3, sent(st[0]))
	require.Equal(t, "Echo:fire", st[1].Function)
	require.EqualValues(t, 1, sent(st[1]))
}
