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
	"os"
	"sync"

	"github.com/hatrpc/hatrpc/internal/bench"
)

func main() {
	sys := flag.String("sys", "hatrpc", "atb system")
	callers := flag.Int("callers", 64, "concurrent callers")
	calls := flag.Int("calls", 300, "calls per caller")
	size := flag.Int("size", 512, "payload bytes")
	flag.Parse()
	if err := run(*sys, *callers, *calls, *size); err != nil {
		fmt.Fprintln(os.Stderr, "insn:", err)
		os.Exit(1)
	}
}

// checker is a caller that can look at a reply in place (atb's hatrpc
// systems): the calls then allocate as atb's do.
type checker interface {
	EchoCheck(ctx context.Context, payload []byte, check func(rep []byte) error) error
}

func run(name string, callers, calls, size int) error {
	ctx := context.Background()
	s, err := bench.Lookup(name)
	if err != nil {
		return err
	}
	srv, err := s.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop(ctx) }()
	cs, err := s.Callers(ctx, srv.Addr(), callers)
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
