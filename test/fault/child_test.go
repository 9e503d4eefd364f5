package fault_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// Environment of the child roles.
const (
	envAddr  = "HATRPC_FAULT_ADDR"
	envCount = "HATRPC_FAULT_COUNT"
	envStack = "HATRPC_FAULT_STACK" // "framed+binary" or "buffered+compact"
)

var childRoles = map[string]func(ctx context.Context, out io.Writer, in io.Reader) error{
	"idle":         childIdle,
	"apache-sleep": childApacheSleep,
	"hat-sleep":    childHatSleep,
}

// childIdle opens HATRPC_FAULT_COUNT connections that never send a byte,
// reports "OPEN n" and holds them until stdin closes or it is killed.
func childIdle(ctx context.Context, out io.Writer, in io.Reader) error {
	n, err := strconv.Atoi(os.Getenv(envCount))
	if err != nil {
		return err
	}
	addr := os.Getenv(envAddr)
	conns := make([]net.Conn, 0, n)
	d := net.Dialer{Timeout: testenv.HangGuard(10 * time.Second)}
	for len(conns) < n {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("after %d connections: %w", len(conns), err)
		}
		conns = append(conns, c)
	}
	fmt.Fprintf(out, "OPEN %d\n", len(conns))
	_, _ = io.Copy(io.Discard, in)
	return nil // exiting drops every connection at once
}

// childApacheSleep starts a long sleep call through an Apache client,
// says "CALLING" just before, and is meant to be SIGKILLed mid-call.
func childApacheSleep(ctx context.Context, out io.Writer, _ io.Reader) error {
	st := testutil.Stack{Framing: testutil.Framed, Protocol: testutil.Binary}
	if os.Getenv(envStack) == "buffered+compact" {
		st = testutil.Stack{Framing: testutil.Buffered, Protocol: testutil.Compact}
	}
	c, closer, err := testutil.DialApacheErr(os.Getenv(envAddr), st)
	if err != nil {
		return err
	}
	defer closer()
	fmt.Fprintln(out, "CALLING")
	_, err = c.Sleep(ctx, 60_000)
	return fmt.Errorf("sleep returned although the child should be dead: %v", err)
}

// childHatSleep is childApacheSleep with a HatRPC client (upgraded,
// pipelined framing).
func childHatSleep(ctx context.Context, out io.Writer, _ io.Reader) error {
	c, err := client.Dial(ctx, os.Getenv(envAddr))
	if err != nil {
		return err
	}
	defer c.Close()
	if !c.Upgraded() {
		return errors.New("HatRPC client did not upgrade to HatRPC framing")
	}
	fmt.Fprintln(out, "CALLING")
	_, err = testutil.HatSleep(ctx, c, 60_000)
	return fmt.Errorf("sleep returned although the child should be dead: %v", err)
}
