package client_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A server with one service and a client calling it. Generated code wraps
// exactly these calls (RegisterX, NewXClient).
func Example() {
	srv := server.New(server.WithLogger(quiet))
	srv.Register(wiretest.NewEcho().Service())
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, ln.Addr().String(), client.WithCompact())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	var res wiretest.EchoResult
	err = conn.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "hi"}, &res)
	fmt.Println(*res.Success, err, conn.Upgraded())
	// Output: hi <nil> true
}
