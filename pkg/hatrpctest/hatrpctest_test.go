package hatrpctest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/examples/echo/gen/echo/echoserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hatrpctest"
	"github.com/hatrpc/hatrpc/pkg/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type echoer struct{}

func (echoer) Echo(_ context.Context, msg string) (string, error) {
	if msg == "" {
		return "", &echo.EchoError{Message: "nothing to echo"}
	}
	return msg, nil
}

func (echoer) EchoBytes(_ context.Context, b []byte) ([]byte, error) { return b, nil }

// serve serves the echo service on a new Listener until the test ends.
func serve(t *testing.T, opts ...server.Option) *hatrpctest.Listener {
	t.Helper()
	l := hatrpctest.Listen()
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	echoserver.RegisterEcho(s, echoer{})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		select {
		case err := <-served:
			require.ErrorIs(t, err, server.ErrServerClosed)
		case <-time.After(time.Minute):
			t.Fatal("Serve did not return")
		}
	})
	return l
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, l *hatrpctest.Listener, opts ...client.Option) *client.Conn {
	t.Helper()
	c, err := client.Dial(tctx(t), l.Addr().String(), append([]client.Option{client.WithDialer(l.DialContext)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestCalls: a server on the Listener answers a client dialled through it,
// results and declared exceptions alike, with every client protocol.
func TestCalls(t *testing.T) {
	l := serve(t)
	for _, tc := range []struct {
		name string
		opts []client.Option
	}{
		{"hatrpc", nil},
		{"plain-compact", []client.Option{client.WithoutUpgrade(), client.WithCompact()}},
		{"theader", []client.Option{client.WithTHeader()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := echo.NewEchoClient(dial(t, l, tc.opts...))
			got, err := c.Echo(tctx(t), "hi")
			require.NoError(t, err)
			assert.Equal(t, "hi", got)
			big := make([]byte, 1<<20)
			b, err := c.EchoBytes(tctx(t), big)
			require.NoError(t, err)
			assert.Len(t, b, len(big))
			_, err = c.Echo(tctx(t), "")
			var ee *echo.EchoError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, "nothing to echo", ee.Message)
		})
	}
}

// TestConcurrent: many clients dial and call at once, each over its own
// in-memory connections.
func TestConcurrent(t *testing.T) {
	l := serve(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(tctx(t), l.Addr().String(), client.WithDialer(l.DialContext))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			ec := echo.NewEchoClient(c)
			for j := range 20 {
				msg := fmt.Sprintf("%d/%d", i, j)
				got, err := ec.Echo(tctx(t), msg)
				if err == nil && got != msg {
					err = fmt.Errorf("got %q, want %q", got, msg)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestCloseUnblocks: Close ends a blocked Accept and a pending dial, and
// later ones fail at once; a dial also ends with its context.
func TestCloseUnblocks(t *testing.T) {
	l := hatrpctest.Listen()
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	_, err := l.Dial() // nothing accepts it but the goroutine above
	require.NoError(t, err)
	require.NoError(t, <-accepted)

	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	dialed := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l2 := hatrpctest.Listen() // no Accept at all: the dial waits
	go func() {
		_, err := l2.DialContext(ctx, "")
		dialed <- err
	}()
	cancel()
	select {
	case err := <-dialed:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("a cancelled dial did not return")
	}

	go func() {
		_, err := l2.Dial()
		dialed <- err
	}()
	require.NoError(t, l.Close())
	require.NoError(t, l2.Close())
	require.NoError(t, l.Close(), "Close twice is harmless")
	for _, ch := range []chan error{accepted, dialed} {
		select {
		case err := <-ch:
			require.ErrorIs(t, err, net.ErrClosed)
		case <-time.After(time.Minute):
			t.Fatal("Close did not unblock")
		}
	}
	_, err = l.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = l.Dial()
	require.ErrorIs(t, err, net.ErrClosed)
	var oe *net.OpError
	require.True(t, errors.As(err, &oe))
	assert.Equal(t, "dial hatrpctest hatrpctest: use of closed network connection", err.Error())
}

// TestServerCloseEndsCalls: closing the server fails a client's later
// calls as over TCP (the in-memory connections close with it).
func TestServerCloseEndsCalls(t *testing.T) {
	l := hatrpctest.Listen()
	s := server.New(server.WithLogger(quiet))
	echoserver.RegisterEcho(s, echoer{})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c := dial(t, l, client.WithRDMA("off"))
	_, err := echo.NewEchoClient(c).Echo(tctx(t), "x")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-served, server.ErrServerClosed)
	_, err = echo.NewEchoClient(c).Echo(tctx(t), "x")
	require.Error(t, err)
}
