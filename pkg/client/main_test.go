package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type testServer struct {
	srv    *server.Server
	echo   *wiretest.Echo
	addr   string
	served chan error
	once   sync.Once
}

// serve runs a HatRPC server with the echo service on addr ("" = any port).
func serve(t testing.TB, addr string, opts ...server.Option) *testServer {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	e := wiretest.NewEcho()
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	s.Register(e.Service())
	var ln net.Listener
	var err error
	// A restarted server may find its port in TIME_WAIT briefly.
	for range 50 {
		if ln, err = server.Listen(addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	ts := &testServer{srv: s, echo: e, addr: ln.Addr().String(), served: make(chan error, 1)}
	if strings.HasPrefix(addr, wire.UnixPrefix) {
		ts.addr = addr
	}
	go func() { ts.served <- s.Serve(ln) }()
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) stop() {
	ts.once.Do(func() {
		ts.srv.Close()
		select {
		case <-ts.served:
		case <-time.After(testenv.HangGuard(5 * time.Second)):
			panic("Serve did not return")
		}
	})
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

// requireEcho asserts that an echo of msg on c answers with msg: the
// connection still serves calls.
func requireEcho(t *testing.T, ctx context.Context, c *client.Conn, msg string) {
	t.Helper()
	got, err := echo(ctx, c, &wiretest.EchoArgs{Msg: msg})
	require.NoError(t, err)
	require.Equal(t, msg, got)
}

// tctx is a test's hang guard, scaled in the emulated guest
// (testenv.HangGuard).
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// recvWithin is the next value from ch, or a failure (why) if none comes
// within a hang guard of d: it asserts nothing about speed.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, why string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testenv.HangGuard(d)):
		t.Fatal(why)
		panic("unreachable")
	}
}
