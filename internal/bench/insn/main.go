// Command insn drives one atb system's echo in one process for a fixed
// number of calls, for scripts/insn-ab.sh to count under callgrind: the
// user-space instructions a call costs, client and server together, which
// unlike a timed run do not move with the host's load.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/hatrpc/hatrpc/internal/bench"
)

func main() {
	sys := flag.String("sys", "hatrpc", "atb system")
	callers := flag.Int("callers", 64, "concurrent callers")
	calls := flag.Int("calls", 300, "calls per caller")
	size := flag.Int("size", 512, "payload bytes")
	serve := flag.String("serve", "", "serve only, on this address, until standard input ends (one side counted alone)")
	addr := flag.String("addr", "", "call only, the server on this address")
	flag.Parse()
	var err error
	switch {
	case *serve != "":
		err = serveOnly(*sys, *serve)
	default:
		err = run(*sys, *addr, *callers, *calls, *size)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "insn:", err)
		os.Exit(1)
	}
}

// checker is a caller that can look at a reply in place (atb's hatrpc
// systems): the calls then allocate as atb's do.
type checker interface {
	EchoCheck(ctx context.Context, payload []byte, check func(rep []byte) error) error
}

// serveOnly serves name on addr until standard input ends, then stops
// and returns, so a server counted alone under callgrind exits normally
// and its profile is written (a signal to a Go program trips an
// assertion of callgrind 3.19's, and no profile is written).
func serveOnly(name, addr string) error {
	ctx := context.Background()
	s, err := bench.Lookup(name)
	if err != nil {
		return err
	}
	srv, err := s.Serve(ctx, addr)
	if err != nil {
		return err
	}
	fmt.Println(srv.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Stop(ctx)
}

// run calls the server at addr, or one of its own when addr is empty.
func run(name, addr string, callers, calls, size int) error {
	ctx := context.Background()
	s, err := bench.Lookup(name)
	if err != nil {
		return err
	}
	if addr == "" {
		srv, err := s.Serve(ctx, "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer func() { _ = srv.Stop(ctx) }()
		addr = srv.Addr()
	}
	cs, err := s.Callers(ctx, addr, callers)
	if err != nil {
		return err
	}
	p := make([]byte, size)
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			errs[i] = callN(ctx, c, p, calls)
		})
	}
	wg.Wait()
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

func callN(ctx context.Context, c bench.Caller, p []byte, n int) error {
	errShort := errors.New("short reply")
	check := func(rep []byte) error {
		if len(rep) != len(p) {
			return errShort
		}
		return nil
	}
	ck, inPlace := c.(checker)
	for range n {
		var err error
		if inPlace {
			err = ck.EchoCheck(ctx, p, check)
		} else {
			var rep []byte
			if rep, err = c.Echo(ctx, p); err == nil {
				err = check(rep)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
