//go:build cgo && linux

package client_test

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// leaseMsg is the i-th message of a leased-request test: 64 KiB (past
// leaseMin) whose bytes depend on i.
func leaseMsg(i int) *wiretest.EchoArgs {
	b := make([]byte, 64<<10)
	for j := range b {
		b[j] = byte(i*31 + j*7)
	}
	return &wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: b}
}

// pingPong sends leaseMsg(from) ... leaseMsg(from+n-1) on st, each once
// the echo of the one before came back intact: SendMsg then writes each
// while the second lane's runner waits with its outbox lent the staging
// buffer (upRunner.nextLease).
func pingPong(t *testing.T, st client.Stream, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		w := leaseMsg(i)
		require.NoError(t, st.SendMsg(w))
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, w.Msg, a.Msg)
		require.True(t, bytes.Equal(w.Blob, a.Blob), "echo %d: every byte as sent", i)
	}
}

// A bidirectional stream's large messages are encoded by SendMsg into the
// staging memory of the second lane's engine and sent from there; the
// lease is taken back before the lane goes back to the pool or closes,
// however the stream ends: its end, a cancel, the Conn closed, the server
// gone, each with a writer going on meanwhile (a write into the lane's
// memory after it was unmapped would fault; run with -race and -asan).
func TestClientStreamRequestsLeased(t *testing.T) {
	m := &client.Method{Service: "S", Name: "echo", Stream: stream.Bidi}
	for _, end := range []string{"end", "cancel", "close", "server gone"} {
		t.Run(end, func(t *testing.T) {
			ts := laneServer(t)
			echoStreams(ts)
			c := dial(t, ts.addr, client.WithMultiplexed())
			ctx, cancel := context.WithCancel(tctx(t))
			defer cancel()
			st, err := c.NewStream(ctx, m, &wiretest.EchoResult{})
			require.NoError(t, err)
			const rounds = 8
			pingPong(t, st, 0, rounds)
			// The join frame and the first message or two go from the
			// runner's own buffer or the lane's; every later one from
			// where SendMsg wrote it.
			require.GreaterOrEqual(t, client.LeasedStreamRequests(c), uint64(rounds-3), "requests sent from the memory SendMsg wrote into")
			if end == "end" {
				require.NoError(t, st.CloseSend())
				require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
				require.Eventually(t, func() bool { return runnerGoroutines() == "" }, testenv.HangGuard(10*time.Second), time.Millisecond, "%s", runnerGoroutines)
				return
			}
			// A writer goes on (into the lease while the runner waits)
			// while the stream ends under it.
			sent := make(chan error, 1)
			go func() {
				for i := rounds; ; i++ {
					if err := st.SendMsg(leaseMsg(i)); err != nil {
						sent <- err
						return
					}
				}
			}()
			go func() { // its echoes, so the server's credit keeps coming
				for st.RecvMsg(&wiretest.EchoArgs{}) == nil {
				}
			}()
			switch end {
			case "cancel":
				cancel()
			case "close":
				require.NoError(t, c.Close())
			case "server gone":
				ts.stop()
			}
			require.Error(t, recvWithin(t, sent, 10*time.Second, "SendMsg went on after the stream ended"))
			require.Eventually(t, func() bool { return runnerGoroutines() == "" }, testenv.HangGuard(10*time.Second), time.Millisecond, "%s", runnerGoroutines)
			if end != "cancel" {
				return
			}
			// The next stream, on the lanes the canceled one gave back,
			// gets every byte of its own.
			st2, err := c.NewStream(tctx(t), m, &wiretest.EchoResult{})
			require.NoError(t, err)
			pingPong(t, st2, 100, rounds)
			require.NoError(t, st2.CloseSend())
			require.Equal(t, io.EOF, st2.RecvMsg(&wiretest.EchoArgs{}))
		})
	}
}
