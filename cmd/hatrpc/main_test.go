package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	hatkvIDL  = filepath.Join("..", "..", "internal", "hatkv", "hatkv.thrift")
	fb303IDL  = filepath.Join("..", "..", "pkg", "fb303", "fb303.thrift")
	kindsIDL  = filepath.Join("..", "..", "pkg", "generic", "testdata", "kinds.thrift")
	echoIDL   = filepath.Join("..", "..", "examples", "echo", "echo.thrift")
	quietLogs = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// hatrpc runs the command line in process and returns its exit status,
// stdout and stderr.
func hatrpc(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// startHatKV serves a fresh store (with its fb303 service) on loopback.
func startHatKV(t *testing.T, opts ...hatkv.Option) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	all := append([]hatkv.Option{hatkv.WithLogger(quietLogs), hatkv.WithSetting("sync", "nosync"), hatkv.WithSetting("mapsize", "64MiB")}, opts...)
	srv, err := hatkv.Open(ctx, t.TempDir(), all...)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
		defer cancel()
		require.NoError(t, srv.Shutdown(sctx))
		require.NoError(t, <-done)
	})
	return ln.Addr().String()
}
