// Command server serves the example echo service.
//
//	go run ./examples/echo/server -addr 127.0.0.1:9090
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/examples/echo/gen/echo/echoserver"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// handler implements echo.EchoHandler, the interface hatgen generated from
// the service in echo.thrift.
type handler struct{}

func (handler) Echo(_ context.Context, msg string) (string, error) {
	if msg == "" {
		// A declared exception: the client receives it as *echo.EchoError.
		return "", &echo.EchoError{Message: "nothing to echo"}
	}
	return msg, nil
}

func (handler) EchoBytes(_ context.Context, data []byte) ([]byte, error) {
	return data, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "address to listen on")
	lanes := flag.String("rdma", "auto", "rdma/shm lanes: auto (RDMA NIC if any, else shared memory with same-host clients), shm, ibv, or off")
	flag.Parse()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	var opts []server.Option
	if *lanes != "off" {
		// HatRPC clients move each function onto an engine lane planned
		// from its hints; everyone else (and transport=tcp functions)
		// stays on TCP.
		opts = append(opts, server.WithRDMA(*lanes))
	}
	srv := server.New(opts...)
	echoserver.RegisterEcho(srv, handler{})

	// Stop gracefully on Ctrl-C: finish in-flight calls, then close.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()

	fmt.Printf("echo server listening on %s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, server.ErrServerClosed) {
		log.Fatal(err)
	}
	fmt.Println("echo server stopped")
}
