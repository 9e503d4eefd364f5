// Command client calls the example echo service.
//
//	go run ./examples/echo/client -addr 127.0.0.1:9090 -msg "hello"
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/pkg/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "server address")
	msg := flag.String("msg", "hello, HatRPC", "message to echo")
	lanes := flag.String("rdma", "auto", "rdma/shm lanes when the server offers them: auto, shm, ibv, or off")
	flag.Parse()

	// Every blocking call takes a context; this one bounds the whole run.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	conn, err := client.Dial(ctx, *addr, client.WithRDMA(*lanes), client.WithHints(&echo.EchoHints))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	c := echo.NewEchoClient(conn)

	reply, err := c.Echo(ctx, *msg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("echo: %s\n", reply)

	// Declared exceptions come back as their generated Go type.
	_, err = c.Echo(ctx, "")
	var ee *echo.EchoError
	if !errors.As(err, &ee) {
		log.Fatalf("expected an EchoError, got %v", err)
	}
	fmt.Printf("empty message refused: %s\n", ee.Message)

	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	back, err := c.EchoBytes(ctx, data)
	if err != nil {
		log.Fatal(err)
	}
	if !bytes.Equal(back, data) {
		log.Fatal("echoBytes: reply differs from request")
	}
	fmt.Printf("echoBytes: %d bytes round trip ok\n", len(back))

	// The plan table each function runs by: transport, and per size range
	// the route and RDMA protocol, from the hints in echo.thrift and what
	// the server offered.
	for _, fn := range []string{"echo", "echoBytes"} {
		p := conn.Plan("Echo:" + fn)
		fmt.Printf("plan %s: transport=%s polling=%s\n", fn, p.Transport, p.Polling)
		for _, r := range p.Rows {
			fmt.Printf("  %s\n", r)
		}
	}
}
