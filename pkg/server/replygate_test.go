package server_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// D1 of issue 43: a client pipelines 200 calls with 1 MB replies and
// never reads them. The replies it is owed count against the memory
// budget: its connection stops being read once its share (4 MiB) is
// held, the server's budget never holds more than the share, a client on
// another connection keeps working, and everything is given back once
// the first one closes.
func TestUnreadRepliesBounded(t *testing.T) {
	const total, perConn = 16 << 20, 4 << 20
	s, _, addr := start(t, server.WithMemoryBudget(total, perConn))
	bigArgs := func() *wiretest.ApacheEchoArgs {
		// 1,000 bytes repeated 1,024 times: a reply of about 1 MB.
		return &wiretest.ApacheEchoArgs{Msg: strings.Repeat("r", 1000), Mode: wiretest.ModeRepeat}
	}

	// The attacker: plain framed Thrift, 200 calls written, none read.
	d := net.Dialer{Timeout: testenv.HangGuard(5 * time.Second)}
	nc, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	conf := &thrift.TConfiguration{SocketTimeout: testenv.HangGuard(10 * time.Second)}
	tr := thrift.NewTFramedTransportConf(thrift.NewTSocketFromConnConf(nc, conf), conf)
	p := thrift.NewTBinaryProtocolConf(tr, conf)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	const calls = 200
	for i := range calls {
		require.NoError(t, p.WriteMessageBegin(ctx, "echo", thrift.CALL, int32(i+1)))
		require.NoError(t, bigArgs().Write(ctx, p))
		require.NoError(t, p.WriteMessageEnd(ctx))
		require.NoError(t, p.Flush(ctx))
	}

	// A legitimate client on its own connection: small calls and one
	// large reply, no errors, while the attacker's replies wait.
	c, err := client.Dial(ctx, addr)
	require.NoError(t, err)
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				var res wiretest.EchoResult
				errs <- c.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "legit"}, &res)
			}
		}()
	}
	var big wiretest.EchoResult
	require.NoError(t, c.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: strings.Repeat("l", 1000), Mode: wiretest.ModeRepeat}, &big))
	require.Len(t, *big.Success, 1000*wiretest.RepeatTimes)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// The attacker's connection is held at its share: sampled while its
	// calls wait, no connection holds more, and most calls never ran.
	// (The server's total is not sampled against one share: the legit
	// connection gives back its last reply's memory after writing it,
	// which may be after its client has the reply.)
	var peak int64
	for range 50 {
		held := server.MaxConnMemHeld(s)
		peak = max(peak, held)
		require.LessOrEqual(t, held, int64(perConn), "a connection holds more than its share")
		require.LessOrEqual(t, server.BudgetUsed(s), int64(total))
		time.Sleep(5 * time.Millisecond)
	}
	started := startedCalls(t, s)
	t.Logf("peak held by a connection %d bytes, %v calls started of %d", peak, started, calls)
	assert.Less(t, started, float64(calls), "the unread connection stopped being read")

	// Closing the attacker gives everything back.
	require.NoError(t, nc.Close())
	require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, testenv.HangGuard(30*time.Second), 10*time.Millisecond)
}

// startedCalls is the server's echo calls started so far.
func startedCalls(t *testing.T, s *server.Server) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	return metricValue(mfs, "hatrpc_server_calls_total", map[string]string{"function": "echo"})
}

// On a server that has not sent a method's reply yet, its size is
// unknown and its first calls cannot be charged: at most 4 of them
// (coldMax) start in the whole server until one reply told the size (or
// the cold lease passed, here longer than the test), so a client
// pipelining 200 Scans to a freshly started hatkv, or 64 clients each
// sending one, hold at most 4 unknown replies (measured: +146-215 MB,
// under the 256 MiB budget + 64 MiB). Once one reply told the size, the
// calls are charged and each connection holds at most its share.
func TestColdRepliesBounded(t *testing.T) {
	// The place of a cold call is the method's, not the connection's: 64
	// Thrift-over-HTTP requests, each its own connection, ran 64 cold
	// Scans at once in hatkv.
	for _, tc := range []struct {
		name  string
		conns int
		bound int64 // what the budget may hold once the calls are charged
	}{
		{name: "one connection", conns: 1, bound: 8 << 20},
		{name: "a connection per call", conns: 24, bound: 32 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) { coldRepliesBounded(t, tc.conns, tc.bound) })
	}
}

func coldRepliesBounded(t *testing.T, conns int, bound int64) {
	const perConn = 8 << 20
	reply := strings.Repeat("r", 1<<20)
	var running, entered atomic.Int32
	release := make(chan struct{})
	svc := &server.Service{Name: "Big", Methods: []server.Method{{
		Name: "big", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
		Handle: func(ctx context.Context, _ proto.Struct) (proto.Struct, error) {
			running.Add(1)
			defer running.Add(-1)
			entered.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &wiretest.EchoResult{Success: &reply}, nil
		},
	}}}
	s := server.New(server.WithLogger(quiet), server.WithMemoryBudget(4*perConn, perConn))
	s.Register(svc)
	server.SetColdLease(s, time.Hour)
	addr := serveOn(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
	defer cancel()
	cs := make([]*client.Conn, conns)
	for i := range cs {
		c, err := client.Dial(ctx, addr)
		require.NoError(t, err)
		defer c.Close()
		cs[i] = c
	}

	const calls = 24
	m := &client.Method{Service: "Big", Name: "big"}
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			var res wiretest.EchoResult
			err := cs[i%conns].Call(ctx, m, &wiretest.EchoArgs{Msg: "x"}, &res)
			if err == nil && (res.Success == nil || len(*res.Success) != len(reply)) {
				err = errors.New("short reply")
			}
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return entered.Load() >= 4 }, eventually, 5*time.Millisecond)
	// Nothing more starts while the four run (a broken gate would let
	// the other 20 in; waiting longer on a slow machine only makes that
	// likelier to show).
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, int32(4), running.Load(), "calls of a method of unknown reply size running at once")
	assert.Zero(t, server.BudgetUsed(s), "cold calls are not charged")

	// The first reply tells the size: the rest are charged 2 MiB each,
	// so a connection's share admits at most 4 of them at a time, and
	// the budget never holds more than the shares.
	close(release)
	for range calls {
		require.LessOrEqual(t, server.BudgetUsed(s), bound)
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("calls did not end")
		}
	}
	require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, 10*time.Millisecond)
}

// A method whose calls wait (a long poll) sends no reply for as long as
// they wait, so all its calls are cold: a cold call holds its place for
// the cold lease only, and callers beyond coldMax start once it passed
// instead of waiting for one of the first to end (server-wide places
// held until the call ended stalled test/fault TestServerStoppedMidCall's
// fifth caller). 12 callers, on a connection each and pipelined on one,
// all run at once; none has ended when the last starts.
func TestColdLongCallsProceed(t *testing.T) {
	const callers = 12
	var entered, ended atomic.Int32
	release := make(chan struct{})
	svc := &server.Service{Name: "Poll", Methods: []server.Method{{
		Name: "poll", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
		Handle: func(ctx context.Context, _ proto.Struct) (proto.Struct, error) {
			entered.Add(1)
			defer ended.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			msg := "done"
			return &wiretest.EchoResult{Success: &msg}, nil
		},
	}}}
	s := server.New(server.WithLogger(quiet))
	s.Register(svc)
	server.SetColdLease(s, 10*time.Millisecond)
	addr := serveOn(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
	defer cancel()
	shared, err := client.Dial(ctx, addr)
	require.NoError(t, err)
	defer shared.Close()

	m := &client.Method{Service: "Poll", Name: "poll"}
	errs := make(chan error, callers)
	for i := range callers {
		c := shared
		if i%2 == 0 {
			own, err := client.Dial(ctx, addr)
			require.NoError(t, err)
			defer own.Close()
			c = own
		}
		go func() {
			var res wiretest.EchoResult
			errs <- c.Call(ctx, m, &wiretest.EchoArgs{Msg: "x"}, &res)
		}()
	}
	require.Eventually(t, func() bool { return entered.Load() == callers }, eventually, time.Millisecond,
		"long calls of a method of unknown reply size wait for each other")
	assert.Zero(t, ended.Load(), "a call ended before all started")
	close(release)
	for range callers {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("calls did not end")
		}
	}
}
