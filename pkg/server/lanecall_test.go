//go:build cgo && linux

package server_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix/mixserver"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// laneRequest is the frame a client sends on a lane for method name.
func laneRequest(t testing.TB, name, msg string, seqid int32, timeout time.Duration) []byte {
	b, err := wiretest.Frame(proto.Binary, wire.KindCall, proto.Call, name, seqid, timeout, nil, &wiretest.EchoArgs{Msg: msg})
	require.NoError(t, err)
	return b
}

// BenchmarkLaneCall is the server's Go time for one 64 B echo on a lane,
// engine left out: "echo" with the test service's handler (a string
// argument), "atb" with atb.thrift's echo as generated from
// test/lanes/mix.thrift's Echo (a borrowed binary argument, arguments and
// result reused from the lane's last call), "bare" with an empty
// message, a handler and arguments that cost nothing (the server's own
// share).
func BenchmarkLaneCall(b *testing.B) {
	for _, name := range []string{"echo", "atb", "bare"} {
		b.Run(name, func(b *testing.B) {
			s := server.New(server.WithLogger(quiet))
			var req []byte
			switch name {
			case "echo":
				s.Register(wiretest.NewEcho().Service())
				req = laneRequest(b, "echo", strings.Repeat("x", 64), 7, 0)
			case "atb":
				mixserver.RegisterEcho(s, atbEcho{})
				req = frameOf(b, wire.KindCall, "echo", 7, &mix.EchoEchoArgs{Payload: make([]byte, 64)})
			case "bare":
				s.Register(bareService())
				req = laneRequest(b, "echo", "", 7, 0)
			}
			call, done := server.LaneCaller(s)
			defer done()
			require.NotEmpty(b, call(req))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				call(req)
			}
		})
	}
}

// bareService has an "echo" whose arguments and result are reused and
// whose handler does nothing: a call costs only what the server spends.
func bareService() *server.Service {
	args, msg := new(wiretest.EchoArgs), "pong"
	res := &wiretest.EchoResult{Success: &msg}
	return &server.Service{Name: "Zero", Methods: []server.Method{{Name: "echo",
		NewArgs: func() proto.Struct { *args = wiretest.EchoArgs{}; return args },
		Handle:  func(context.Context, proto.Struct) (proto.Struct, error) { return res, nil }}}}
}

// TestLaneCallAllocs: a lane call costs the server no allocation of its
// own (its request lives on the stack, its codec and reply buffer on the
// lane, its context comes from a block): what a call allocates is its
// handler's and its arguments'. The handler here allocates nothing.
func TestLaneCallAllocs(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	s.Register(bareService())
	call, done := server.LaneCaller(s)
	defer done()
	for _, timeout := range []time.Duration{0, time.Minute} {
		req := laneRequest(t, "echo", "", 7, timeout)
		out := call(req)
		h, err := wire.DecodeHeader(out, 1<<20)
		require.NoError(t, err)
		require.Equal(t, wire.KindReply, h.Kind)
		require.Equal(t, int32(7), h.Seqid)
		require.Zero(t, testing.AllocsPerRun(1000, func() { call(req) }), "timeout %v", timeout)
	}
}

// atbEcho is atb's echo handler: it returns its (borrowed) argument.
type atbEcho struct{}

func (atbEcho) Echo(_ context.Context, p []byte) ([]byte, error) { return p, nil }

// TestLaneCallAllocsGenerated: atb.thrift's echo, generated from
// test/lanes/mix.thrift's Echo, on a lane
// allocates nothing: its arguments and result come together (NewCall),
// reused from the lane's last call, and the 64 B argument is borrowed
// from the lease (borrow_args), the reply written from it.
func TestLaneCallAllocsGenerated(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	mixserver.RegisterEcho(s, atbEcho{})
	call, done := server.LaneCaller(s)
	defer done()
	p := bytes.Repeat([]byte{7}, 64)
	req := frameOf(t, wire.KindCall, "echo", 7, &mix.EchoEchoArgs{Payload: p})
	require.Equal(t, p, echoReply(t, call(req), 7))
	require.Zero(t, testing.AllocsPerRun(1000, func() { call(req) }))
}

// TestFLOCKCallAllocs: a FLOCK session's call of atb's echo
// allocates nothing either once FLOCK hands it storage for the reply (its
// node's, kept from the last reply): the call's context comes from a
// block shared by the concurrent calls, the request and codec from pools.
// Without storage, or too little, the reply gets a buffer of its own.
func TestFLOCKCallAllocs(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	mixserver.RegisterEcho(s, atbEcho{})
	call, done := server.FLOCKCallerInto(s)
	defer done()
	p := bytes.Repeat([]byte{7}, 64)
	req := frameOf(t, wire.KindCall, "echo", 7, &mix.EchoEchoArgs{Payload: p})
	out := call(req, nil)
	require.Equal(t, p, echoReply(t, out, 7))
	dst := out[:0]
	out = call(req, dst)
	require.Equal(t, p, echoReply(t, out, 7))
	require.Same(t, &dst[:1][0], &out[0], "the reply is in the storage given")
	small := make([]byte, 0, 16)
	out = call(req, small)
	require.Equal(t, p, echoReply(t, out, 7))
	require.NotSame(t, &small[:1][0], &out[0], "too small: a buffer of its own")
	// What is left is the call contexts' block, one per
	// server.CtxSlabSize calls (14: 0.071).
	// The call's request, codec (5 objects) and call value come from
	// pools, which the race detector's build empties at random on a
	// quarter of the calls: ~1.8 allocations then. make test counts
	// without it too (test-allocs).
	got := testutil.AllocsPerCall(2100, func() { dst = call(req, dst)[:0] })
	if testenv.Race {
		require.Less(t, got, 2.5, "beyond what the race detector's pools drop")
	} else {
		require.LessOrEqual(t, got, 1.0/server.CtxSlabSize+0.001, "more than the contexts' block")
	}
}

// TestLaneCallReuseResets: the call value a lane reuses is reset: a call
// whose frame leaves the argument out gets none, not the last call's
// (which would be a slice of a lease since reused).
func TestLaneCallReuseResets(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	mixserver.RegisterEcho(s, atbEcho{})
	call, done := server.LaneCaller(s)
	defer done()
	req := frameOf(t, wire.KindCall, "echo", 1, &mix.EchoEchoArgs{Payload: []byte("abc")})
	require.Equal(t, []byte("abc"), echoReply(t, call(req), 1))
	require.Equal(t, []byte{}, echoReply(t, call(frameOf(t, wire.KindCall, "echo", 2, &wiretest.Empty{})), 2))
}

// TestLaneCallMethodSwitch: a lane remembers the method it last called,
// and a call naming another one (or none the server has) is still
// dispatched by its own name.
func TestLaneCallMethodSwitch(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	s.Register(wiretest.NewEcho().Service())
	call, done := server.LaneCaller(s)
	defer done()
	for i, tc := range []struct {
		name string
		kind wire.Kind
	}{
		{"echo", wire.KindReply},
		{"Echo:echo", wire.KindReply},
		{"echo", wire.KindReply},
		{"nope", wire.KindException},
		{"echp", wire.KindException}, // same length as the last one found
		{"echo", wire.KindReply},
	} {
		out := call(laneRequest(t, tc.name, "x", int32(i), 0))
		h, err := wire.DecodeHeader(out, 1<<20)
		require.NoError(t, err)
		require.Equal(t, tc.kind, h.Kind, "call %d: %s", i, tc.name)
		require.Equal(t, int32(i), h.Seqid)
	}
	s.Register(wiretest.NewEcho().ServiceNamed("Other"))
	out := call(laneRequest(t, "Other:echo", "x", 9, 0))
	h, err := wire.DecodeHeader(out, 1<<20)
	require.NoError(t, err)
	require.Equal(t, wire.KindReply, h.Kind, "a method registered after the lane's first call")
}

// TestLaneCallBusy: a lane call that finds every call slot taken for the
// busy timeout is answered "server busy" (a oneway one is dropped), and
// counted; the slot's holder is unaffected.
func TestLaneCallBusy(t *testing.T) {
	s, g, other, held := slotHeld(t, time.Millisecond)
	out := other(laneRequest(t, "quick", "x", 2, 0))
	h, err := wire.DecodeHeader(out, 1<<20)
	require.NoError(t, err)
	require.Equal(t, wire.KindException, h.Kind)
	require.Equal(t, int32(2), h.Seqid)
	require.Contains(t, string(out), "server busy")
	require.NotZero(t, h.Flags&wire.FlagHeaders, "the busy reply says Unavailable in its headers")
	md, _, err := wire.ParseHeaderBlock(out[wire.HeaderSize:])
	require.NoError(t, err)
	require.Equal(t, "14", md["hatrpc-status"])
	require.Nil(t, other(laneRequest(t, "fire", "x", 3, 0)), "a oneway call gets no reply")

	close(g.release)
	select {
	case out := <-held:
		h, err := wire.DecodeHeader(out, 1<<20)
		require.NoError(t, err)
		require.Equal(t, wire.KindReply, h.Kind)
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		t.Fatal("the holding call did not end")
	}
	out = other(laneRequest(t, "quick", "x", 4, 0)) // a slot is free again
	h, err = wire.DecodeHeader(out, 1<<20)
	require.NoError(t, err)
	require.Equal(t, wire.KindReply, h.Kind)

	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	require.Equal(t, 2.0, metricValue(mfs, "hatrpc_server_rejected_total", map[string]string{"reason": "busy"}))
}
