package server_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestWithRDMAOff: "off" means what it means on the client, no lanes, and
// is not a provider the server tries to open (it used to log "open
// provider \"off\": rdma: invalid argument" as a warning); a client that
// offers lanes stays on TCP without a word in the log.
func TestWithRDMAOff(t *testing.T) {
	var logs testutil.LogBuffer
	s := server.New(server.WithRDMA("off"),
		server.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	s.Register(wiretest.NewEcho().Service())
	c := dial(t, serveOn(t, s), client.WithRDMA("auto"))
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "tcp"})
	require.NoError(t, err)
	assert.Equal(t, "tcp", got)
	assert.Empty(t, c.LaneStats(), "no lanes from a server WithRDMA(\"off\")")
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.NotContains(t, logs.String(), "lanes unavailable")
}

// TestWithRDMABadName: a name that is no provider fails Serve (and Dial)
// at once with the names that are, instead of a warning per server.
func TestWithRDMABadName(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := server.New(server.WithLogger(quiet), server.WithRDMA("verbs"))
	err = s.Serve(ln)
	require.ErrorIs(t, err, server.ErrBadProvider)
	assert.EqualError(t, err, `server: WithRDMA("verbs"): unknown rdma provider "verbs" (want off, auto, ibv or shm)`)
	require.NoError(t, s.Close())

	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	_, err = client.Dial(ctx, "127.0.0.1:1", client.WithRDMA("verbs"))
	require.ErrorIs(t, err, client.ErrBadProvider)
	assert.EqualError(t, err, `client: WithRDMA("verbs"): unknown rdma provider "verbs" (want off, auto, ibv or shm)`)
}
