//go:build cgo && linux

package client_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A server that does not grant wire.CapLaneCancel (as one of the previous
// version: WithoutLaneCancel, the lanes' hellos offer it not, and the
// server then takes a cancel on a lane's link for the client gone) gets
// no Cancel on the link: a canceled stream's lanes are kept where a reset
// request reaches the server, on the first lane (no poll held) or on a
// client or bidirectional stream's second lane (its held poll then
// answered with a reset); a server stream's held poll is reached by
// nothing, and its lane closes at once, as before the handshake. A Cancel
// sent to such a server would close the lane: each kept case shows none
// went. Both sides see the cancel, and the next stream works. "late":
// the stream's cancel watcher has not run when the second lane sends the
// reset, whose answer ends the first lane's held poll (a loaded host's
// scheduling): the cancel is counted all the same.
func TestLaneStreamCancelOldServer(t *testing.T) {
	tests := []struct {
		name    string
		mode    stream.Mode
		at      string // "open": the open alone sent (no poll); "held": a poll held; "mid": messages in flight each way
		granted bool   // the server grants the bit (as today's)
		kept    bool
		late    bool // the cancel watcher never runs (LateCancelWatch)
	}{
		{"server/open", stream.Server, "open", false, true, false},
		{"server/held", stream.Server, "held", false, false, false},
		{"server/held/granted", stream.Server, "held", true, true, false},
		{"client/held", stream.Client, "held", false, true, false},
		{"client/mid", stream.Client, "mid", false, true, false},
		{"bidi/held", stream.Bidi, "held", false, true, false},
		{"bidi/mid", stream.Bidi, "mid", false, true, false},
		{"client/held/late", stream.Client, "held", false, true, true},
		{"bidi/held/late", stream.Bidi, "held", false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := laneServer(t)
			sv := cancelStreams(ts)
			opts := []client.Option{client.WithMultiplexed(), client.WithStreamCancelWait(testenv.HangGuard(time.Minute))}
			if !tt.granted {
				opts = append(opts, client.WithoutLaneCancel())
			}
			if tt.late {
				opts = append(opts, client.LateCancelWatch())
			}
			c := dial(t, ts.addr, opts...)
			if tt.at == "mid" {
				cancelMidStream(t, c, sv, tt.mode, 64, false)
			} else {
				cancelAt(t, c, sv, tt.mode, tt.at)
			}
			lanes := lanesOf(tt.mode)
			want := [2]uint64{1, 0}
			if !tt.kept {
				want = [2]uint64{0, 1}
			}
			settle(t, func() bool {
				kept, closed := client.LaneCancels(c)
				return [2]uint64{kept, closed} == want
			})
			kept, closed := client.LaneCancels(c)
			require.Equal(t, want, [2]uint64{kept, closed}, "kept, closed; %s", runnerGoroutines())
			open := lanes
			if !tt.kept {
				open--
			}
			require.Eventually(t, func() bool { return client.LanesOpen(c) == open }, testenv.HangGuard(10*time.Second), time.Millisecond)

			// The next stream: on the same lanes where they were kept.
			sv.got.Store(0)
			const n = 3
			st, _ := openK(t, tctx(t), c, tt.mode, "new", n, 64)
			if tt.mode.ClientSends() {
				require.NoError(t, <-sendAll(st, "new", n, 64))
			}
			require.NoError(t, st.CloseSend())
			if tt.mode.ServerSends() {
				recvTagged(t, st, "new", n)
			}
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
			require.NoError(t, awaitEnd(t, sv))
			require.Zero(t, sv.stray.Load(), "no message of one stream reached another, or out of order")
			setups := uint64(lanes)
			if !tt.kept {
				setups++
			}
			require.Equal(t, setups, client.LaneSetups(c))
			requireNoRunners(t)
		})
	}
}

// cancelAt opens a stream tagged "old" and cancels it at a known point:
// "open", its handler started but nothing sent past the open (no poll:
// the server first waits for the client's message); "held", its first
// lane's poll out, the handler waiting (a server stream's after its
// messages, idle; a client stream's reading, a bidirectional one's after
// its messages, reading). Both sides must see the cancel.
func cancelAt(t *testing.T, c *client.Conn, sv *cancelSvc, mode stream.Mode, at string) {
	t.Helper()
	ctx, cancel := context.WithCancel(tctx(t))
	defer cancel()
	st, err := c.NewStream(ctx, kMethod(mode), &wiretest.EchoResult{})
	require.NoError(t, err)
	var sent <-chan error
	if at == "held" {
		// (A Blob: K.down idles after its messages.)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "old:0", Mode: 3, DelayNs: 64, Blob: []byte{1}}))
		switch mode {
		case stream.Client:
			sent = sendAll(st, "old", 4, 64)
			require.Eventually(t, func() bool { return sv.got.Load() == 4 }, testenv.HangGuard(10*time.Second), time.Millisecond)
		case stream.Server:
			require.NoError(t, st.CloseSend())
			fallthrough
		default:
			recvTagged(t, st, "old", 3)
		}
		require.Eventually(t, func() bool { return client.StreamsPolling(c) == 1 }, testenv.HangGuard(10*time.Second), time.Millisecond, "a poll out")
	} else {
		require.Eventually(t, func() bool { return sv.opened.Load() == 1 }, testenv.HangGuard(10*time.Second), time.Millisecond, "the handler started")
	}
	cancel()
	var rerr error
	for rerr == nil {
		rerr = st.RecvMsg(&wiretest.EchoArgs{})
	}
	require.ErrorIs(t, rerr, context.Canceled)
	if sent != nil {
		require.NoError(t, <-sent, "its messages went before the cancel")
	}
	require.ErrorIs(t, awaitEnd(t, sv), context.Canceled)
}
