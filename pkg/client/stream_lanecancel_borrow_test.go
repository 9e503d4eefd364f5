//go:build cgo && linux

package client_test

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A borrowed stream canceled while its caller holds a message lent in
// place (read in the lane's reply): the server's handler ends at once
// (the cancel goes on the lane's link), and the lane, which the next
// exchange would overwrite, is neither put back nor closed while the
// message is held: its bytes stay as they were. Once the message is back
// (the caller's next RecvMsg, or a cleanup once the stream is
// unreachable) the server acknowledges and the lane goes back to the
// pool, for the next stream (no lane set up). Meanwhile a stream opened
// does not wait for it (a new lane). Closed instead: the Conn closed
// while the message was held (its endpoint, whose memory the message is
// read in, only once the message is back), or a server that does not
// grant wire.CapLaneCancel (its link closed at once, as before).
func TestServerStreamBorrowedCanceled(t *testing.T) {
	tests := []struct {
		name    string
		drop    bool // the stream dropped (its cleanup gives the message back), else the next RecvMsg
		close   bool // the Conn closed while the message is held
		next    bool // a stream opened while the message is held
		granted bool // the server grants wire.CapLaneCancel
	}{
		{name: "next RecvMsg", granted: true},
		{name: "stream dropped", drop: true, granted: true},
		{name: "next stream while held", next: true, granted: true},
		{name: "Conn closed/next RecvMsg", close: true, granted: true},
		{name: "Conn closed/stream dropped", close: true, drop: true, granted: true},
		{name: "old server/next RecvMsg"},
		{name: "old server/stream dropped", drop: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := laneServer(t)
			ended := blobStreams(ts)
			opts := []client.Option{client.WithMultiplexed(), client.WithStreamCancelWait(testenv.HangGuard(time.Minute))}
			if !tt.granted {
				opts = append(opts, client.WithoutLaneCancel())
			}
			c := dial(t, ts.addr, opts...)
			// No deadline: the server's own timer would end the handler.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := c.NewStream(ctx, blobMethod(true), &wiretest.EchoResult{})
			require.NoError(t, err)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: 1000}))
			require.NoError(t, st.CloseSend())
			a := new(wiretest.EchoArgs)
			require.NoError(t, st.RecvMsg(a))
			require.NoError(t, checkBlob(a, 0))
			require.NotZero(t, client.LentStreamMsgs(c), "read in place")
			cancel()
			err = recvWithin(t, ended, 10*time.Second, "the handler did not end")
			if tt.granted {
				// The cancel on the link: no exchange needed.
				require.ErrorContains(t, err, "client reset the stream: canceled")
			} else {
				// The lane's end (its link closed): its send fails, or
				// its context is canceled.
				require.Error(t, err)
				require.NotContains(t, err.Error(), "client reset", "no reset could reach it")
			}
			require.NoError(t, checkBlob(a, 0), "the lane's memory, after the stream's end")
			require.Equal(t, 1, client.LanesOpen(c), "kept while the message is out")
			kept, closed := client.LaneCancels(c)
			require.Zero(t, kept, "not back while the message is out")
			if tt.granted {
				require.Zero(t, closed, "not closed while the message is out")
			}
			lanes := 1
			if tt.next {
				// Not waiting for the held lane, which may be held for good.
				blobsOnce(t, c, ended)
				lanes++
				require.Equal(t, uint64(lanes), client.LaneSetups(c), "a new lane")
				require.NoError(t, checkBlob(a, 0), "the held lane untouched")
			}
			if tt.close {
				require.NoError(t, c.Close())
				require.NoError(t, checkBlob(a, 0), "the lane's memory, after Close")
			}
			want := [2]uint64{1, 0}
			if tt.close || !tt.granted {
				want, lanes = [2]uint64{0, 1}, lanes-1
			}
			setups := client.LaneSetups(c)
			if tt.drop {
				st, a = nil, nil
				runtime.GC()
			} else {
				require.ErrorIs(t, st.RecvMsg(new(wiretest.EchoArgs)), context.Canceled)
				if want[0] == 1 {
					// At once: it waits for the lane the handshake is giving back.
					blobsOnce(t, c, ended)
					require.Equal(t, setups, client.LaneSetups(c), "the held lane, back in the pool")
				}
			}
			require.Eventually(t, func() bool {
				runtime.GC() // (drop: the stream's cleanup)
				kept, closed := client.LaneCancels(c)
				return [2]uint64{kept, closed} == want && client.LanesOpen(c) == lanes
			}, testenv.HangGuard(10*time.Second), time.Millisecond, "kept, closed; lanes open")
			requireNoRunners(t)
			if tt.close || !tt.drop && want[0] == 1 {
				return
			}
			blobsOnce(t, c, ended)
			if want[0] == 1 {
				require.Equal(t, setups, client.LaneSetups(c), "the held lane, back in the pool")
			} else {
				require.Equal(t, setups+1, client.LaneSetups(c), "a new lane")
			}
		})
	}
}

// blobsOnce runs a borrowed stream of S.blobs to its end.
func blobsOnce(t *testing.T, c *client.Conn, ended <-chan error) {
	t.Helper()
	const n = 3
	st, err := c.NewStream(tctx(t), blobMethod(true), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: n}))
	require.NoError(t, st.CloseSend())
	for i := range n {
		a := new(wiretest.EchoArgs)
		require.NoError(t, st.RecvMsg(a))
		require.NoError(t, checkBlob(a, i))
	}
	require.Equal(t, io.EOF, st.RecvMsg(new(wiretest.EchoArgs)))
	require.NoError(t, recvWithin(t, ended, 10*time.Second, "the handler did not end"))
}
