package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/examples/echo/gen/echo/echoserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/cluster"
	"github.com/hatrpc/hatrpc/pkg/hatrpctest"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// named answers every echo with its server's name.
type named string

func (n named) Echo(context.Context, string) (string, error) { return string(n), nil }

func (n named) EchoBytes(_ context.Context, b []byte) ([]byte, error) { return b, nil }

// Calls spread round robin over two servers (in memory here; the dialer
// picks the listener by address).
func Example() {
	ls := map[string]*hatrpctest.Listener{}
	for _, name := range []string{"a:1", "b:1"} {
		srv := server.New(server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		echoserver.RegisterEcho(srv, named(name))
		ls[name] = hatrpctest.Listen()
		go srv.Serve(ls[name])
		defer srv.Close()
	}
	dialer := func(ctx context.Context, addr string) (net.Conn, error) { return ls[addr].DialContext(ctx, addr) }

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := cluster.Dial(ctx, cluster.Static("a:1", "b:1"),
		cluster.WithConnOptions(client.WithDialer(dialer)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	c := echo.NewEchoClient(cl)
	var got []string
	for range 4 {
		s, err := c.Echo(ctx, "who?")
		if err != nil {
			fmt.Println(err)
			return
		}
		got = append(got, s)
	}
	slices.Sort(got)
	fmt.Println(got)
	// Output: [a:1 a:1 b:1 b:1]
}

// A generated client over three servers: the same code as over one
// client.Conn.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := cluster.Dial(ctx,
		cluster.Static("127.0.0.1:9090", "127.0.0.1:9091", "127.0.0.1:9092"),
		cluster.WithBalancer(cluster.PowerOfTwoChoices()),
		cluster.WithConnOptions(client.WithRDMA("off")))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	c := echo.NewEchoClient(cl)
	s, err := c.Echo(ctx, "hello")
	switch {
	case errors.Is(err, cluster.ErrNotRetried):
		// echo is not hinted idempotent: its server failed under it, and
		// only the caller knows whether running it twice is safe.
	case err != nil:
		fmt.Println(err)
	default:
		fmt.Println(s)
	}
	for _, s := range cl.Servers() {
		fmt.Println(s.Addr, s.Up, s.Breaker)
	}
}
