//go:build cgo && linux

package server_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// bigService's "big" builds a reply of the bytes its argument asks for
// (Msg, in decimal) without reserving it: a handler that does not use
// ReserveReply.
func bigService() *server.Service {
	return &server.Service{Name: "Big", Methods: []server.Method{{
		Name: "big", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
		Handle: func(_ context.Context, a proto.Struct) (proto.Struct, error) {
			n, err := strconv.Atoi(a.(*wiretest.EchoArgs).Msg)
			if err != nil {
				return nil, err
			}
			s := string(make([]byte, n))
			return &wiretest.EchoResult{Success: &s}, nil
		},
	}}}
}

// laneReplyServer serves Grow:grow and Big:big (not on a port: its lane
// calls run through server.SplitLaneCaller).
func laneReplyServer(t *testing.T, built *atomic.Int64, opts ...server.Option) *server.Server {
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	s.Register(growService(built))
	s.Register(bigService())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// laneAnswer is one reply frame of a lane: the result's length, or the
// exception's message.
type laneAnswer struct {
	n   int
	exc string
}

func decodeLaneAnswer(t *testing.T, frame []byte) laneAnswer {
	t.Helper()
	h, err := wire.DecodeHeader(frame, 1<<30)
	require.NoError(t, err)
	r := proto.NewBinaryReader(frame[wire.HeaderSize:], nil)
	_, typ, _, err := r.ReadMessageBegin()
	require.NoError(t, err)
	if typ == proto.Exception {
		require.Equal(t, wire.KindException, h.Kind)
		var ae proto.ApplicationException
		require.NoError(t, ae.DecodeBinary(r))
		return laneAnswer{exc: ae.Message}
	}
	require.Equal(t, wire.KindReply, h.Kind)
	var res wiretest.EchoResult
	require.NoError(t, res.DecodeBinary(r))
	require.NotNil(t, res.Success)
	return laneAnswer{n: len(*res.Success)}
}

// batchOf is a KindBatch frame of calls, name and decimal size each.
func batchOf(t *testing.T, calls ...[2]string) []byte {
	out := make([]byte, wire.HeaderSize)
	for i, c := range calls {
		out = append(out, laneRequest(t, c[0], c[1], int32(i+1), 0)...)
	}
	wire.SealFrame(out, wire.KindBatch, 0, 1, 0)
	return out
}

// A dedicated lane's single reply is charged to its connection's share
// from the moment it is built until the engine took it (after), a small
// one not at all (what its handler reserved is given back once it is
// built); a reply over the share is refused whole, and the share of a
// fast-path connection is at most a quarter of the budget.
func TestLaneReplyCharged(t *testing.T) {
	const share = 1 << 20
	budget := server.WithMemoryBudget(4*share, share)
	cases := []struct {
		name, method, size string
		budget             server.Option
		charged            bool
		exc                string
	}{
		{"large, reserved", "grow", "200000", budget, true, ""},
		{"large, not reserved", "big", "200000", budget, true, ""},
		{"small, reserved", "grow", "1000", budget, false, ""},
		{"small", "big", "1000", budget, false, ""},
		{"over the share", "big", "1500000", budget, false,
			"hatrpc: reply of 1500023 bytes exceeds the connection's memory share of 1048576 bytes (WithMemoryBudget)"},
		{"over a quarter of the budget", "big", "1500000", server.WithMemoryBudget(4*share, 4*share), false,
			"hatrpc: reply of 1500023 bytes exceeds the connection's memory share of 1048576 bytes (WithMemoryBudget)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var built atomic.Int64
			s := laneReplyServer(t, &built, tc.budget)
			call, after, done := server.SplitLaneCaller(s)
			defer done()
			out := call(laneRequest(t, tc.method, tc.size, 1, 0))
			got := decodeLaneAnswer(t, out)
			if tc.exc != "" {
				assert.Equal(t, laneAnswer{exc: tc.exc}, got)
			} else {
				want, _ := strconv.Atoi(tc.size)
				assert.Equal(t, laneAnswer{n: want}, got)
			}
			if tc.charged {
				assert.Equal(t, int64(len(out)), server.BudgetUsed(s), "the built reply is charged until it is sent")
			} else {
				assert.Zero(t, server.BudgetUsed(s))
			}
			after()
			assert.Zero(t, server.BudgetUsed(s), "given back once sent")
		})
	}
}

// A dedicated lane's batch holds its frame so far against the
// connection's share and the lane's maximum: a handler that reserves as
// it builds (ReserveReply) is refused, or cut, before it builds what does
// not fit; one that does not gets an exception in place of its reply. The
// frame stays charged until it is sent.
func TestLaneBatchReplyCharged(t *testing.T) {
	const share = 1 << 20
	budget := server.WithMemoryBudget(4*share, share)
	noBudget := server.WithMemoryBudget(0, 0)
	limit := server.WithLimits(msgLimit(share))
	// room is what the batch's frame has left of the lane's maximum
	// for call i; free what the share has left once the batch holds the
	// frames before call i, by its capacity: doubled from the first
	// frame's (the cases' first two calls have equal replies).
	room := func(frames [][]byte, i int) int {
		used := wire.HeaderSize
		for _, f := range frames[:i] {
			used += len(f)
		}
		return share - used
	}
	free := func(frames [][]byte) int {
		return share - 2*(wire.HeaderSize+len(frames[0]))
	}
	cases := []struct {
		name  string
		opts  []server.Option
		calls [][2]string
		built int64
		// want the answers, given the reply frames
		want func(frames [][]byte) []laneAnswer
	}{
		{"reserved whole, refused by the share", []server.Option{budget},
			[][2]string{{"grow", "!300000"}, {"grow", "!300000"}, {"grow", "!300000"}}, 600000,
			func(f [][]byte) []laneAnswer {
				return []laneAnswer{{n: 300000}, {n: 300000}, {exc: fmt.Sprintf(
					"hatrpc: no room for a reply of 300064 bytes: %d bytes of the connection's memory share are free (WithMemoryBudget)", free(f)/2)}}
			}},
		{"not reserved, refused by the share", []server.Option{budget},
			[][2]string{{"big", "400000"}, {"big", "400000"}, {"big", "400000"}}, 0,
			func(f [][]byte) []laneAnswer {
				return []laneAnswer{{n: 400000}, {n: 400000}, {exc: fmt.Sprintf(
					"hatrpc: reply of 400023 bytes does not fit in the batch's reply: %d bytes of the connection's memory share are free (WithMemoryBudget)", free(f))}}
			}},
		{"reserved whole, refused by the lane's maximum", []server.Option{noBudget, limit},
			[][2]string{{"grow", "!400000"}, {"grow", "!400000"}, {"grow", "!400000"}}, 800000,
			func(f [][]byte) []laneAnswer {
				return []laneAnswer{{n: 400000}, {n: 400000}, {exc: fmt.Sprintf(
					"hatrpc: reply of 400064 bytes exceeds the message limit of %d bytes", room(f, 2))}}
			}},
		// The third is built 64 KiB at a time while it fits: 3 chunks
		// (196,608 bytes and the 64-byte margin) of the 248,468 left.
		{"reserved as built, cut by the lane's maximum", []server.Option{noBudget, limit},
			[][2]string{{"grow", "400000"}, {"grow", "400000"}, {"grow", "400000"}}, 996608,
			func([][]byte) []laneAnswer {
				return []laneAnswer{{n: 400000}, {n: 400000}, {n: 3 * growChunk}}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var built atomic.Int64
			s := laneReplyServer(t, &built, tc.opts...)
			call, after, done := server.SplitLaneCaller(s)
			defer done()
			out := call(batchOf(t, tc.calls...))
			h, err := wire.DecodeHeader(out, 1<<30)
			require.NoError(t, err)
			require.Equal(t, wire.KindBatch, h.Kind)
			frames, err := wire.SplitFrames(out[wire.HeaderSize:], 1<<30)
			require.NoError(t, err)
			require.Len(t, frames, len(tc.calls))
			got := make([]laneAnswer, len(frames))
			for i, f := range frames {
				got[i] = decodeLaneAnswer(t, f)
			}
			assert.Equal(t, tc.want(frames), got)
			assert.Equal(t, tc.built, built.Load(), "what the handlers built")
			assert.LessOrEqual(t, len(out), share+wire.HeaderSize)
			if len(tc.opts) == 1 { // the budget's cases: the frame grew to fit the exception exactly
				assert.Equal(t, int64(len(out)), server.BudgetUsed(s), "the batch's frame is charged until it is sent")
			}
			after()
			assert.Zero(t, server.BudgetUsed(s), "given back once sent")
		})
	}
}

// ReserveReply on a dedicated lane and on a FLOCK handle (served, on the
// test's provider) answers as on TCP (TestReserveReply): within the share the reply is
// whole; cut at the share or the lane's maximum; reserved whole over
// either, refused before it is built. What the lane held is given back
// once the reply is sent.
func TestReserveReplyOnLane(t *testing.T) {
	paths := []reservePath{
		{"lane", &hints.Function{Name: "grow"}, 1, 0},
		{"flock", &hints.Function{Name: "grow",
			Client: hints.Set{QPSharing: hints.SwitchOn, PayloadSize: 64}, Server: hints.Set{PayloadSize: 64}}, 0, 1},
	}
	for _, path := range paths {
		for _, tc := range reserveCases("lane's maximum") {
			t.Run(path.name+"/"+tc.name, func(t *testing.T) { reserveReplyOnLane(t, tc, path) })
		}
	}
}

// reservePath is a path of TestReserveReplyOnLane: the call by fn's
// hints goes by lanes lanes or flocks FLOCK handles.
type reservePath struct {
	name          string
	fn            *hints.Function
	lanes, flocks int
}

// reserveReplyOnLane is one case of TestReserveReplyOnLane.
func reserveReplyOnLane(t *testing.T, tc reserveCase, path reservePath) {
	var built atomic.Int64
	s, addr := growServer(t, &built, append(tc.opts, server.WithRDMA(fastpathtest.Provider()))...)
	c, err := client.Dial(tctx(t), addr)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	m := &client.Method{Service: "Grow", Name: "grow", Hints: path.fn}
	var res wiretest.EchoResult
	err = c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: tc.size}, &res)
	gotLanes, gotFlocks, _, _ := server.FastPathInUse(s)
	require.Equal(t, []int{path.lanes, path.flocks}, []int{gotLanes, gotFlocks}, "the call's path")
	if tc.wantErr != "" {
		var ae *proto.ApplicationException
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, tc.wantErr, ae.Message)
		assert.Zero(t, built.Load(), "refused before it was built")
	} else {
		require.NoError(t, err)
		assert.Len(t, *res.Success, tc.wantLen)
	}
	require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, time.Millisecond)
}
