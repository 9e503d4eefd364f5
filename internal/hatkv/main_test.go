package hatkv

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(childDirEnv) != "" {
		os.Exit(runServerChild())
	}
	goleak.VerifyTestMain(m)
}

// testCtx is a test's hang guard, scaled in the emulated guest
// (testenv.HangGuard): a three-server scan missed 60 s there on a loaded host.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(d))
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// closeWithin closes c, failing the test instead of hanging when the
// client cannot close; d is a hang guard, scaled (testenv.HangGuard).
func closeWithin(t testing.TB, c *Client, d time.Duration) {
	t.Helper()
	d = testenv.HangGuard(d)
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(d):
		t.Errorf("client Close did not return within %v", d)
	}
}

// testServer is a HatKV server on 127.0.0.1:0 with a client connected to it.
type testServer struct {
	srv    *Server
	addr   string
	client *Client
	kv     *hatkv.HatKVClient
}

// startServer serves a fresh store in a temp dir. Writes skip fsync unless
// the options say otherwise: the durability test covers sync=always.
func startServer(t testing.TB, dir string, opts ...Option) *testServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx := testCtx(t, 30*time.Second)
	all := append([]Option{WithLogger(quietLogger()), WithSetting("sync", "nosync"), WithSetting("mapsize", "64MiB")}, opts...)
	srv, err := Open(ctx, dir, all...)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	c, err := Dial(ctx, ln.Addr().String())
	require.NoError(t, err)
	ts := &testServer{srv: srv, addr: ln.Addr().String(), client: c, kv: c.KV()}
	t.Cleanup(func() {
		closeWithin(t, c, 10*time.Second)
		sctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
		defer cancel()
		require.NoError(t, srv.Shutdown(sctx))
		require.NoError(t, <-done)
	})
	return ts
}
