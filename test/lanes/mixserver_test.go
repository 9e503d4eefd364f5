package lanes_test

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix/mixserver"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// mixServer serves the Mix service (and Shared, whose functions go by
// FLOCK, with withShared) with the fast path and opts on a loopback port,
// closed when the test ends; it returns the server and its address.
func mixServer(t *testing.T, withShared bool, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	opts = append([]server.Option{server.WithRDMA(fastProvider),
		server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	srv := server.New(opts...)
	mixserver.RegisterMix(srv, &handler{infos: map[string]string{}})
	if withShared {
		mixserver.RegisterShared(srv, &shared{slowStarted: make(chan struct{}, 16)})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		select {
		case <-done:
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Error("Serve did not return")
		}
	})
	return srv, ln.Addr().String()
}
