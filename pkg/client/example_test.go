package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	echosvc "github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/examples/echo/gen/echo/echoserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hatrpctest"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// echoHandler implements the echo example's generated EchoHandler.
type echoHandler struct{}

func (echoHandler) Echo(_ context.Context, msg string) (string, error) {
	if msg == "" {
		return "", &echosvc.EchoError{Message: "nothing to echo"}
	}
	return msg, nil
}

func (echoHandler) EchoBytes(_ context.Context, b []byte) ([]byte, error) { return b, nil }

// startEcho serves the echo example on an in-memory listener; over TCP a
// client dials "host:port" and needs no WithDialer.
func startEcho() (*hatrpctest.Listener, func()) {
	l := hatrpctest.Listen()
	srv := server.New(server.WithLogger(quiet))
	echoserver.RegisterEcho(srv, echoHandler{})
	go srv.Serve(l)
	return l, func() { srv.Close() }
}

// A client calling a server through the code hatgen generates from
// examples/echo/echo.thrift: a result, then a declared exception as a
// typed error.
func Example() {
	l, stop := startEcho()
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, l.Addr().String(), client.WithDialer(l.DialContext))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	c := echosvc.NewEchoClient(conn)

	s, err := c.Echo(ctx, "hi")
	fmt.Println(s, err, conn.Upgraded())
	_, err = c.Echo(ctx, "")
	var ee *echosvc.EchoError
	fmt.Println(errors.As(err, &ee), ee.GetMessage())
	// Output:
	// hi <nil> true
	// true nothing to echo
}

// An interceptor sees every call of a Conn, its method and its outcome.
func ExampleWithInterceptors() {
	l, stop := startEcho()
	defer stop()
	logCalls := func(ctx context.Context, m *client.Method, args, result proto.Struct, next client.Invoker) error {
		err := next(ctx, m, args, result)
		fmt.Printf("%s.%s: err=%v\n", m.Service, m.Name, err)
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, l.Addr().String(), client.WithDialer(l.DialContext),
		client.WithInterceptors(logCalls))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	_, _ = echosvc.NewEchoClient(conn).Echo(ctx, "hi")
	// Output: Echo.echo: err=<nil>
}

// A client of a plain Apache Thrift server, speaking framed compact
// without the HatRPC handshake (a default client finds the framing and
// protocol by itself).
func ExampleWithoutUpgrade() {
	l, stop := startEcho()
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, l.Addr().String(), client.WithDialer(l.DialContext),
		client.WithoutUpgrade(), client.WithFramed(), client.WithCompact())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	s, err := echosvc.NewEchoClient(conn).Echo(ctx, "plain")
	fmt.Println(s, err, conn.Upgraded())
	// Output: plain <nil> false
}
