// Command grpc-stream is the stream benchmark's gRPC-Go system
// (internal/bench, "grpc-stream"): gRPC-Go server streaming over TCP
// loopback with its default transport settings, run by the harness as an
// external program.
//
// It is a Go module of its own so that the framework's users never
// download gRPC; the harness builds it with the module cache only (`make
// deps-bench` fills the cache). There is no protoc on the build machines,
// so no generated protobuf: the service is declared by hand
// (grpc.ServiceDesc) and messages are raw bytes through a codec of our own
// (rawCodec), which is gRPC's fastest case, with nothing to marshal.
//
//	grpc-stream -role server -addr 127.0.0.1:0   # prints "ADDR <addr>", serves until stdin ends
//	grpc-stream -role client -addr A -size 65536 -count 16384
//
// The client prints one JSON line, {"stream":{"messages":…,"bytes":…,"elapsed_ns":…}},
// the harness's ClientResult shape.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "grpc-stream:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		role    = flag.String("role", "", "server | client")
		addr    = flag.String("addr", "127.0.0.1:0", "listen (server) or server (client) address")
		size    = flag.Int("size", 64, "client: bytes per message")
		count   = flag.Int64("count", 1000, "client: messages in the measured stream")
		warmup  = flag.Int64("warmup", 1000, "client: messages of an unmeasured stream first")
		timeout = flag.Duration("timeout", 30*time.Minute, "overall limit")
	)
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch *role {
	case "server":
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		srv := newServer()
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		if _, err := fmt.Printf("ADDR %s\n", ln.Addr()); err != nil {
			return err
		}
		// The runner closes our stdin (or dies): never outlive it.
		_, _ = io.Copy(io.Discard, os.Stdin)
		srv.Stop()
		return <-done
	case "client":
		if *size < 0 || *count < 1 || *warmup < 0 {
			return fmt.Errorf("want -size >= 0, -count >= 1, -warmup >= 0; have %d, %d, %d", *size, *count, *warmup)
		}
		res, err := measure(ctx, *addr, *size, *count, *warmup)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(map[string]result{"stream": res})
	default:
		return fmt.Errorf("unknown -role %q: want server or client", *role)
	}
}
