// Command testserver is HatRPC's ThriftTest server for Apache Thrift's
// cross-language suite, with the flags of Apache's test servers:
//
//	go run ./test/crosstest/cmd/testserver --port 9090 --protocol compact --transport framed [--ssl --certPath DIR]
//
// One HatRPC server reads every stack it speaks; the flags name the stack
// the suite expects, and one HatRPC does not speak is refused at start.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/crosstest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
}

func run() error {
	f, err := crosstest.ParseFlags("testserver", os.Args[1:])
	if err != nil {
		return err
	}
	opts, err := crosstest.ServerOptions(f)
	if err != nil {
		return err
	}
	ln, err := server.Listen(f.ListenAddr())
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv := crosstest.NewServer(&crosstest.Handler{}, append(opts, server.WithLogger(log))...)
	log.Info("testserver listening", "addr", ln.Addr().String(), "stack", f.Stack.String())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, server.ErrServerClosed) && ctx.Err() == nil {
		return err
	}
	return nil
}
