package server_test

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestAcceptErrorsPass: a process out of descriptors (a flood of
// connections, other files) or a connection reset before it was taken
// makes Accept fail for a moment; Serve waits and serves on, logging one
// line, where it used to return and leave the port unserved for good.
func TestAcceptErrorsPass(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ECONNABORTED} {
		t.Run(errno.Error(), func(t *testing.T) {
			var logs testutil.LogBuffer
			s := server.New(server.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			s.Register(wiretest.NewEcho().Service())
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			served := make(chan error, 1)
			go func() {
				served <- s.Serve(&testutil.FailingListener{Listener: ln, N: 3, Err: testutil.AcceptErr(errno)})
			}()

			c := dial(t, ln.Addr().String())
			got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "after"})
			require.NoError(t, err)
			require.Equal(t, "after", got)
			// Logged, at most a line a failure (the limiter allows one a
			// second; how many seconds 5+10+20 ms of sleeps take on a
			// loaded host is not the test's to say).
			lines := strings.Count(logs.String(), "hatrpc: accept failed; retrying")
			require.True(t, lines >= 1 && lines <= 3, logs.String())
			require.Contains(t, logs.String(), errno.Error())

			c.Close()
			require.NoError(t, s.Close())
			select {
			case err := <-served:
				require.ErrorIs(t, err, server.ErrServerClosed)
			case <-time.After(testenv.HangGuard(10 * time.Second)):
				t.Fatal("Serve did not return")
			}
		})
	}
}

// TestAcceptErrorEndsServe: an error that does not pass (the listener
// gone) still ends Serve with that error.
func TestAcceptErrorEndsServe(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := errors.New("listener gone")
	served := make(chan error, 1)
	go func() { served <- s.Serve(&testutil.FailingListener{Listener: ln, N: 1, Err: gone}) }()
	select {
	case err := <-served:
		require.ErrorIs(t, err, gone)
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		t.Fatal("Serve did not return")
	}
	require.NoError(t, s.Close())
}
