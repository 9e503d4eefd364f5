// Command protonode checks every engine protocol between two hosts: the
// cross-node half of pkg/rdma's TestProtocolConformance, for the two-node
// Soft-RoCE run (test/rxe/twonode.sh) and for real RDMA hosts.
//
//	protonode -listen :7100            on the server host
//	protonode -connect HOST:7100       on the client host
//
// The client runs each protocol with busy and event polling, 0 B to 1 MiB,
// checks every response byte, and prints one line per case; it exits 1 if
// any failed. The provider is HATRPC_PROVIDER's (ibv across hosts).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"time"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

var sizes = []int{0, 100, 5000, 70 << 10, 1 << 20}

const callsPerSize = 5

func main() {
	listen := flag.String("listen", "", "serve on this TCP address")
	connect := flag.String("connect", "", "check against the server at this address")
	flag.Parse()
	d, err := rdma.Open()
	if err != nil {
		log.Fatalf("protonode: %v", err)
	}
	defer d.Close()
	switch {
	case *listen != "":
		err = serve(d, *listen)
	case *connect != "":
		err = check(d, *connect)
	default:
		err = errors.New("give -listen or -connect")
	}
	if err != nil {
		log.Fatalf("protonode: %v", err)
	}
}

// answer is the response to req: every byte inverted.
func answer(req []byte) []byte {
	out := make([]byte, len(req))
	for i, b := range req {
		out[i] = ^b
	}
	return out
}

func serve(d *rdma.Device, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("protonode listening on", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			if err := serveOne(d, c); err != nil {
				log.Printf("protonode: %v", err)
			}
		}()
	}
}

// serveOne reads the case (two bytes: protocol, polling; unbuffered, the
// bootstrap follows on the same connection), bootstraps an endpoint and
// serves until the client closes the connection.
func serveOne(d *rdma.Device, c net.Conn) error {
	defer c.Close()
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	proto, poll := rdma.Protocol(hdr[0]), rdma.Polling(hdr[1])
	if !slices.Contains(rdma.Protocols(), proto) || (poll != rdma.PollBusy && poll != rdma.PollEvent) {
		return fmt.Errorf("bad case %v", hdr)
	}
	pd, err := d.AllocPD()
	if err != nil {
		return err
	}
	defer pd.Close()
	ep, err := rdma.NewRPCEndpoint(pd, rdma.EndpointConfig{Polling: poll, MaxMessage: 4 << 20})
	if err != nil {
		return err
	}
	defer ep.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = ep.Bootstrap(ctx, c)
	cancel()
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, c) // the client closes when done
		stop()
	}()
	err = ep.Serve(sctx, proto, answer)
	if sctx.Err() != nil {
		return nil
	}
	return err
}

func check(d *rdma.Device, addr string) error {
	failed := 0
	for _, proto := range rdma.Protocols() {
		for _, poll := range []rdma.Polling{rdma.PollBusy, rdma.PollEvent} {
			start := time.Now()
			n, err := checkCase(d, addr, proto, poll)
			status := "ok"
			if err != nil {
				status = "FAIL: " + err.Error()
				failed++
			}
			fmt.Printf("%-18s %-5s %3d calls 0 B-1 MiB  %6.2fs  %s\n", proto, poll, n, time.Since(start).Seconds(), status)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d cases failed", failed)
	}
	fmt.Println("protonode: every protocol ok across nodes")
	return nil
}

func checkCase(d *rdma.Device, addr string, proto rdma.Protocol, poll rdma.Polling) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.Write([]byte{byte(proto), byte(poll)}); err != nil {
		return 0, err
	}
	pd, err := d.AllocPD()
	if err != nil {
		return 0, err
	}
	defer pd.Close()
	ep, err := rdma.NewRPCEndpoint(pd, rdma.EndpointConfig{Polling: poll, MaxMessage: 4 << 20})
	if err != nil {
		return 0, err
	}
	defer ep.Close()
	if err := ep.Bootstrap(ctx, c); err != nil {
		return 0, err
	}
	calls := 0
	for _, n := range sizes {
		for i := range callsPerSize {
			req := make([]byte, n)
			for j := range req {
				req[j] = byte(j*7 + i + n)
			}
			resp, err := ep.Call(ctx, proto, req)
			if err != nil {
				return calls, fmt.Errorf("%d B call %d: %w", n, i, err)
			}
			if !slices.Equal(resp, answer(req)) {
				return calls, fmt.Errorf("%d B call %d: wrong response (%d B)", n, i, len(resp))
			}
			calls++
		}
	}
	return calls, nil
}
