//go:build cgo && linux

package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix/mixserver"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// binEcho is test/lanes' Mix service whose ping echoes a binary payload;
// "boom" fails with an exception. The other functions are not called.
type binEcho struct{ mix.MixHandler }

func (binEcho) Ping(_ context.Context, p []byte) ([]byte, error) {
	if string(p) == "boom" {
		return nil, errors.New("boom")
	}
	return p, nil
}

// serveBinEcho runs the binary echo (Mix.ping) with lanes and returns its
// address.
func serveBinEcho(t *testing.T) string {
	t.Helper()
	s := server.New(server.WithLogger(quiet), server.WithRDMA(fastpathtest.Provider()))
	mixserver.RegisterMix(s, binEcho{})
	return serveWith(t, s)
}

// TestCallBorrowedRoutes: on every route a call may take (TCP, a lane,
// FLOCK, a batching lane pool), CallBorrowed runs use exactly once per
// call on the right result, returns use's error, and skips use for an
// exception; a lane's result is read in place, in the lane's memory (seen
// where the engine puts every reply in the same place).
func TestCallBorrowedRoutes(t *testing.T) {
	cases := []struct {
		name    string
		set     hints.Set
		opts    []client.Option
		inPlace bool // the result is the lane's lease: the next call overwrites it
	}{
		{"tcp", hints.Set{}, []client.Option{client.WithRDMA("off")}, false},
		{"lane", hints.Set{}, nil, false},
		{"lane-rfp", hints.Set{Protocol: hints.ProtoRFP, Polling: hints.PollBusy}, nil, false},
		// Direct-WriteIMM writes every reply to the same place in the
		// client's pre-known buffer (RFP's moves between fetch and
		// server-reply mode, eager's between receive slots).
		{"lane-imm", hints.Set{Protocol: hints.ProtoDirectWriteIMM, Polling: hints.PollBusy}, nil, true},
		{"flock", hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64}, nil, false},
		{"batch", hints.Set{Protocol: hints.ProtoRFP, Batch: 4, BatchTimeout: time.Millisecond}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, serveBinEcho(t), tc.opts...)
			m := &client.Method{Service: "Mix", Name: "ping", Hints: &hints.Function{Name: "ping", Client: tc.set,
				Server: hints.Set{PayloadSize: 64}}}
			call := func(p []byte, use func(r []byte) error) error {
				args, res := &mix.MixPingArgs{Data: p}, &mix.MixPingResult{}
				return c.CallBorrowed(tctx(t), m, args, res, func() error { return use(res.Success) })
			}
			for i, n := range []int{1, 64, 5000, 64} {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				uses := 0
				require.NoError(t, call(p, func(r []byte) error {
					uses++
					require.Equal(t, p, r)
					return nil
				}))
				require.Equal(t, 1, uses, "call %d", i)
			}

			errMine := errors.New("mine")
			require.ErrorIs(t, call([]byte("x"), func([]byte) error { return errMine }), errMine)

			ran := false
			err := call([]byte("boom"), func([]byte) error { ran = true; return nil })
			require.Error(t, err)
			require.Contains(t, err.Error(), "boom")
			require.False(t, ran, "no use after an exception")

			if tc.inPlace {
				var kept []byte
				first, second := bytes.Repeat([]byte("1"), 64), bytes.Repeat([]byte("2"), 64)
				require.NoError(t, call(first, func(r []byte) error { kept = r; return nil }))
				require.Equal(t, first, kept)
				require.NoError(t, call(second, func([]byte) error { return nil }))
				require.Equal(t, second, kept, "the borrowed result was the lane's memory, reused by the next call")
			}
			if tc.name != "tcp" {
				st := c.LaneStats()
				require.Len(t, st, 1)
				var n uint64
				for _, v := range st[0].Requests {
					n += v
				}
				require.NotZero(t, n, "the calls ran on the fast path")
			}
		})
	}
}

// TestCloseWhileBorrowedOnLane: closing the Conn while a caller reads a
// borrowed result in a lane's registered memory leaves that memory mapped
// until the caller is done (closing the lane in use unmapped it: a SIGSEGV
// in a lane stream's runner filing its reply, seen in CI), and later calls
// fail as on a closed Conn.
func TestCloseWhileBorrowedOnLane(t *testing.T) {
	addr := serveBinEcho(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithLogger(quiet), client.WithRDMA(fastpathtest.Provider()))
	require.NoError(t, err)
	m := &client.Method{Service: "Mix", Name: "ping", Hints: &hints.Function{Name: "ping",
		Client: hints.Set{Protocol: hints.ProtoDirectWriteIMM, Polling: hints.PollBusy}, Server: hints.Set{PayloadSize: 64}}}
	p := bytes.Repeat([]byte{'x'}, 64<<10)
	args, res := &mix.MixPingArgs{Data: p}, &mix.MixPingResult{}
	require.NoError(t, c.CallBorrowed(ctx, m, args, res, func() error {
		require.Equal(t, uint64(1), c.RouteStats().Lane, "the call ran on a lane")
		closed := make(chan error, 1)
		go func() { closed <- c.Close() }()
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("Close waits for a borrowed result")
		}
		// Still the lane's memory, still mapped.
		require.Equal(t, p, res.Success)
		return nil
	}))
	require.ErrorIs(t, c.Call(ctx, m, args, &mix.MixPingResult{}), client.ErrConnClosed)
	// Nor does a lane opening after Close take a device: nothing would
	// release it.
	require.ErrorIs(t, c.LaneDevice(fastpathtest.HintTransport()), client.ErrConnClosed)
}
