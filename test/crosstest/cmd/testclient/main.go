// Command testclient is HatRPC's ThriftTest client for Apache Thrift's
// cross-language suite, with the flags of Apache's test clients:
//
//	go run ./test/crosstest/cmd/testclient --port 9090 --protocol multic --transport framed [--ssl] [--testloops N]
//
// It runs the checks of Apache's clients and exits non-zero on the first
// mismatch, as they do. --no-uuid leaves out testUuid for servers built
// from the ThriftTest.thrift of Apache 0.17 and older, which has none.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/test/crosstest"
)

func main() {
	f, err := crosstest.ParseFlags("testclient", os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testclient:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(f.TestLoops)*time.Minute)
	defer cancel()
	n, err := crosstest.RunClient(ctx, f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testclient: FAIL after %d checks: %v\n", n, err)
		os.Exit(1)
	}
	fmt.Printf("OK %d checks, %s\n", n, f.Stack)
}
