package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A server on a unix socket answers HatRPC and plain Thrift clients; its
// socket file is owner-only and gone after Shutdown.
func TestUnixSocket(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, addr string
		file       string // "" for an abstract socket
	}{
		{"path", "unix:" + filepath.Join(dir, "s.sock"), filepath.Join(dir, "s.sock")},
		{"abstract", fmt.Sprintf("unix:@hatrpc-test-%d-%d", os.Getpid(), rand.Uint64()), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := wiretest.NewEcho()
			s := server.New(server.WithLogger(quiet))
			s.Register(e.Service())
			served := make(chan error, 1)
			go func() { served <- s.ListenAndServe(tc.addr) }()
			var c *client.Conn
			require.Eventually(t, func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Second))
				defer cancel()
				var err error
				c, err = client.Dial(ctx, tc.addr, client.WithRDMA("off"))
				return err == nil
			}, eventually, 5*time.Millisecond)
			require.True(t, c.Upgraded())
			got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "over unix"})
			require.NoError(t, err)
			require.Equal(t, "over unix", got)
			require.NoError(t, c.Close())

			plain := dial(t, tc.addr, client.WithoutUpgrade(), client.WithFramed(), client.WithCompact())
			got, err = echo(tctx(t), plain, &wiretest.EchoArgs{Msg: "plain"})
			require.NoError(t, err)
			require.Equal(t, "plain", got)
			require.NoError(t, plain.Close())

			if tc.file != "" {
				fi, err := os.Stat(tc.file)
				require.NoError(t, err)
				require.Equal(t, server.UnixSocketMode, fi.Mode().Perm())
				require.NotZero(t, fi.Mode()&os.ModeSocket)
			}
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
			defer cancel()
			require.NoError(t, s.Shutdown(ctx))
			require.ErrorIs(t, <-served, server.ErrServerClosed)
			if tc.file != "" {
				_, err := os.Stat(tc.file)
				require.ErrorIs(t, err, os.ErrNotExist, "the socket file is removed on Shutdown")
			}
		})
	}
}

// A socket file nobody answers on (a server that died) is replaced; one
// a server answers on, or a file that is no socket, is refused.
func TestUnixSocketStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")

	old, err := net.Listen("unix", path)
	require.NoError(t, err)
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, old.Close()) // the file stays, as after a crash
	_, err = os.Stat(path)
	require.NoError(t, err)
	ln, err := server.Listen("unix:" + path)
	require.NoError(t, err, "a stale socket file is removed")

	_, err = server.Listen("unix:" + path)
	require.ErrorIs(t, err, server.ErrAddrInUse)
	require.EqualError(t, err, "server: address in use: a server answers on unix:"+path)
	require.NoError(t, ln.Close())

	regular := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(regular, []byte("x"), 0o600))
	_, err = server.Listen("unix:" + regular)
	require.EqualError(t, err, "server: unix:"+regular+" exists and is not a socket")
	data, err := os.ReadFile(regular)
	require.NoError(t, err)
	require.Equal(t, "x", string(data), "a file that is no socket is left alone")
}
