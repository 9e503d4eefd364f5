package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// Headers set by the caller ride lane and FLOCK requests too (with a
// generated request id), and reply headers come back on them. A call
// without headers sends none on the fast path.
func TestLaneHeaders(t *testing.T) {
	type seenCall struct {
		md        metadata.MD
		transport string
		replied   bool
	}
	seen := make(chan seenCall, 64)
	ic := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		seen <- seenCall{md, info.Transport, metadata.SetReply(ctx, "r", "1")}
		return next(ctx, args)
	}
	cases := []struct {
		name  string
		set   hints.Set
		flock bool
	}{
		{"lane", hints.Set{}, false},
		{"flock", hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := laneServer(t, server.WithInterceptors(ic))
			c := dial(t, ts.addr)
			m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo", Client: tc.set,
				Server: hints.Set{PayloadSize: 64}}}
			call := func(ctx context.Context) {
				var res wiretest.EchoResult
				require.NoError(t, c.Call(ctx, m, &wiretest.EchoArgs{Msg: "x"}, &res))
				require.Equal(t, "x", *res.Success)
			}
			var reply metadata.MD
			ctx := metadata.CaptureReply(metadata.AppendToOutgoingContext(tctx(t), "traceparent", "00-abc"), &reply)
			call(ctx)
			got := recv(t, seen)
			require.Equal(t, fastpathtest.Transport(), got.transport, "the call ran on the fast path")
			require.Equal(t, "00-abc", got.md["traceparent"])
			require.Regexp(t, "^[0-9a-f]{16}$", got.md[metadata.RequestIDKey])
			require.Len(t, got.md, 2)
			require.True(t, got.replied)
			require.Equal(t, metadata.MD{"r": "1"}, reply)

			reply = nil
			call(metadata.CaptureReply(tctx(t), &reply))
			got = recv(t, seen)
			require.Equal(t, fastpathtest.Transport(), got.transport)
			require.Empty(t, got.md)
			require.False(t, got.replied, "a call that sent no headers has no way back for any")
			require.Nil(t, reply)

			st := c.LaneStats()
			require.Len(t, st, 1)
			if tc.flock {
				require.Equal(t, uint64(2), st[0].Requests["flock"], "%v", st[0].Requests)
			} else {
				require.Zero(t, st[0].Requests["flock"], "%v", st[0].Requests)
			}
		})
	}
}

// uncomparable is a context whose dynamic type cannot be compared with ==
// (a map field): a lane's memo of a context without headers must not
// panic on it.
type uncomparable struct {
	context.Context
	tags map[string]int
}

// TestLaneHeadersAfterPlainCalls: a lane remembers the last context
// whose calls carried no headers (plainMemo); a call under another
// context, even one derived from it, still looks its headers up and sends
// them, and the remembered context goes on sending none.
func TestLaneHeadersAfterPlainCalls(t *testing.T) {
	seen := make(chan metadata.MD, 64)
	ic := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if info.Transport != fastpathtest.Transport() {
			md = metadata.MD{"off-the-lane": info.Transport}
		}
		seen <- md
		return next(ctx, args)
	}
	ts := laneServer(t, server.WithInterceptors(ic))
	c := dial(t, ts.addr, client.WithoutRequestIDs())
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo"}}
	call := func(ctx context.Context) metadata.MD {
		var res wiretest.EchoResult
		require.NoError(t, c.Call(ctx, m, &wiretest.EchoArgs{Msg: "x"}, &res))
		require.Equal(t, "x", *res.Success)
		return recv(t, seen)
	}
	plain := tctx(t)
	withMD := metadata.AppendToOutgoingContext(plain, "k", "v")
	odd := uncomparable{plain, map[string]int{}}
	oddMD := uncomparable{withMD, map[string]int{}}
	steps := []struct {
		ctx  context.Context
		want metadata.MD
	}{
		{plain, nil}, {plain, nil}, {withMD, metadata.MD{"k": "v"}}, {plain, nil},
		{withMD, metadata.MD{"k": "v"}}, {withMD, metadata.MD{"k": "v"}},
		{odd, nil}, {odd, nil}, {oddMD, metadata.MD{"k": "v"}}, {odd, nil}, {plain, nil},
	}
	for i, s := range steps {
		got := call(s.ctx)
		if s.want == nil {
			require.Empty(t, got, "step %d", i)
		} else {
			require.Equal(t, s.want, got, "step %d", i)
		}
	}
	st := c.LaneStats()
	require.Len(t, st, 1)
	var n uint64
	for _, v := range st[0].Requests {
		n += v
	}
	require.Equal(t, uint64(len(steps)), n, "every call ran on the lane: %v", st[0].Requests)
}
