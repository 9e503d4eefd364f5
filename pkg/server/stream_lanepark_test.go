//go:build cgo && linux

package server_test

import (
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A bidirectional stream's long lane waits park in Go (the server's second
// lane waiting for the caller's next frame), and once the streams end the
// process has the fds and goroutines it had before them: a parker's fd
// goes as the lane leaves the stream, and parking starts no goroutine.
// Two lanes at most, so every stream takes the same two.
func TestDuplexStreamLanesPark(t *testing.T) {
	s, _, addr := duplexStreams(t)
	c := dial(t, addr, client.WithMaxLanes(2))
	pingPong := func(n int) {
		st, err := c.NewStream(tctx(t), sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
		require.NoError(t, err)
		var a wiretest.EchoArgs
		for i := range n {
			msg := strconv.Itoa(i)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: msg}))
			require.NoError(t, st.RecvMsg(&a))
			require.Equal(t, msg, a.Msg)
		}
		require.NoError(t, st.CloseSend())
		require.Equal(t, io.EOF, st.RecvMsg(&a))
	}
	settled := func(what string, want func() bool) {
		deadline := time.Now().Add(eventually)
		for !want() {
			require.True(t, time.Now().Before(deadline), what)
			time.Sleep(time.Millisecond)
		}
	}
	unparked := func() bool {
		_, parking := server.ParkedLaneWaits(s)
		return server.BlockedLaneWaits(s) == 0 && parking == 0
	}
	pingPong(2) // both lanes opened
	// The second lane's parker goes as its parked wait ends (at most an
	// idle slice after the stream).
	settled("lanes unparked after the first stream", unparked)
	parked, _ := server.ParkedLaneWaits(s)
	before, err := testenv.Snapshot()
	require.NoError(t, err)
	for range 3 {
		pingPong(50)
	}
	now, _ := server.ParkedLaneWaits(s)
	require.Greater(t, now, parked, "no server lane wait parked")
	settled("lanes unparked after the streams", unparked)
	lane, tcp := c.StreamRoutes()
	require.Equal(t, uint64(4), lane)
	require.Zero(t, tcp)
	// No goroutine or fd the streams started outlives them.
	require.NoError(t, before.Settled(eventually))
}
