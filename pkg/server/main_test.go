package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// start serves the echo service on a loopback port until the test ends.
func start(t testing.TB, opts ...server.Option) (*server.Server, *wiretest.Echo, string) {
	t.Helper()
	e := wiretest.NewEcho()
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	s.Register(e.Service())
	return s, e, serveOn(t, s)
}

// serveOn serves s on a loopback port until the test ends.
func serveOn(t testing.TB, s *server.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		select {
		case err := <-served:
			require.ErrorIs(t, err, server.ErrServerClosed)
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Fatal("Serve did not return")
		}
	})
	return ln.Addr().String()
}

func dial(t testing.TB, addr string, opts ...client.Option) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func echo(ctx context.Context, c *client.Conn, args *wiretest.EchoArgs) (string, error) {
	var res wiretest.EchoResult
	if err := c.Call(ctx, wiretest.EchoMethod, args, &res); err != nil {
		return "", err
	}
	if res.Err != nil {
		return "", res.Err
	}
	if res.Success == nil {
		return "", errors.New("no success field")
	}
	return *res.Success, nil
}

// tctx is a test's hang guard, scaled in the emulated guest
// (testenv.HangGuard): 10,000 streams on one connection outlast 10 s there.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// eventually bounds require.Eventually waits: a guard against hangs, not an
// assertion on speed, so it scales with the environment (testenv.HangGuard)
// and holds under emulation (test/rxe) and load.
var eventually = testenv.HangGuard(time.Minute)
