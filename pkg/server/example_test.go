package server_test

import (
	"context"
	"fmt"
	"time"

	echosvc "github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/examples/echo/gen/echo/echoserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hatrpctest"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// upper implements the echo example's generated EchoHandler.
type upper struct{}

func (upper) Echo(_ context.Context, msg string) (string, error) {
	return fmt.Sprintf("%q back", msg), nil
}

func (upper) EchoBytes(_ context.Context, b []byte) ([]byte, error) { return b, nil }

// callEcho dials l and makes one echo call.
func callEcho(l *hatrpctest.Listener, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, l.Addr().String(), client.WithDialer(l.DialContext))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println(echosvc.NewEchoClient(conn).Echo(ctx, msg))
}

// A server for the code hatgen generates: New, the generated Register
// function with a handler, Serve on a listener (ListenAndServe(addr) for
// TCP; an in-memory one here), and a graceful Shutdown.
func ExampleServer_Serve() {
	srv := server.New(server.WithLogger(quiet))
	echoserver.RegisterEcho(srv, upper{})
	l := hatrpctest.Listen()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	callEcho(l, "hi")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println(srv.Shutdown(ctx), <-served)
	// Output:
	// "hi" back <nil>
	// <nil> server: closed
}

// A server interceptor runs around every handler, with what the call is.
func ExampleWithInterceptors() {
	audit := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		fmt.Printf("%s.%s over %s\n", info.Service, info.Method.Name, info.Transport)
		return next(ctx, args)
	}
	srv := server.New(server.WithLogger(quiet), server.WithInterceptors(audit))
	echoserver.RegisterEcho(srv, upper{})
	l := hatrpctest.Listen()
	go srv.Serve(l)
	defer srv.Close()

	callEcho(l, "hi")
	// Output:
	// Echo.echo over tcp
	// "hi" back <nil>
}
