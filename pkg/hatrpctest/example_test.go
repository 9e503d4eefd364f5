package hatrpctest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/examples/echo/gen/echo/echoserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hatrpctest"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// A server and a client joined in memory: no port, no network.
func ExampleListen() {
	l := hatrpctest.Listen()
	srv := server.New(server.WithLogger(quiet))
	echoserver.RegisterEcho(srv, echoer{})
	go srv.Serve(l)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, l.Addr().String(), client.WithDialer(l.DialContext))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	got, err := echo.NewEchoClient(conn).Echo(ctx, "in memory")
	fmt.Println(got, err)
	// Output: in memory <nil>
}
