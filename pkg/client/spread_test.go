package client_test

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// burst runs callers concurrent loops of up to rounds echoes of msg (each
// delayed by the server so they overlap), a loop ending early once stop
// returns true; every call must succeed within ctx and return msg.
func burst(t *testing.T, ctx context.Context, c *client.Conn, callers, rounds int, msg string, stop func() bool) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if stop() {
					return
				}
				got, err := echo(ctx, c, &wiretest.EchoArgs{Msg: msg, DelayNs: int64(time.Millisecond)})
				if err != nil {
					errs <- err
					return
				}
				if got != msg {
					errs <- assert.AnError
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestConnsSpreadLargeCalls(t *testing.T) {
	large := strings.Repeat("x", 128<<10)
	small := strings.Repeat("y", 64)
	medium := strings.Repeat("m", 4<<10)
	tests := []struct {
		name      string
		opts      []client.Option
		msg       string
		wantMulti bool
		max       int
		workers   int // concurrent callers; 0 = 16
	}{
		{"large calls spread over the default", nil, large, true, client.DefaultConns, 0},
		{"WithConns(2) caps the connections", []client.Option{client.WithConns(2)}, large, true, 2, 0},
		{"WithConns(1) keeps one", []client.Option{client.WithConns(1)}, large, false, 1, 0},
		{"small calls stay on one", nil, small, false, 1, 16},
		// 64 callers put more than 32 calls in flight on one connection.
		{"many small calls spread", nil, small, true, 4, 64},
		// 64 callers of 4 KiB would fill 8 connections; calls under
		// 64 KiB spread over at most 4 (smallConns).
		{"medium calls spread over at most 4", nil, medium, true, 4, 64},
		{"plain Thrift never spreads", []client.Option{client.WithoutUpgrade()}, large, false, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := serve(t, "")
			c := dial(t, ts.addr, tt.opts...)
			require.Equal(t, 1, c.Conns())
			// Spreading starts in the background: stop as soon as it
			// shows, or after a fixed amount of work when it must not.
			rounds := 20
			if tt.wantMulti {
				rounds = 500 // ends as soon as a second connection shows
			}
			workers, done := cmp.Or(tt.workers, 16), func() bool { return tt.wantMulti && c.Conns() > 1 }
			if len(tt.msg) == len(medium) {
				// Past the cap, not just past one connection.
				rounds, done = 100, func() bool { return false }
			}
			// A hang guard, not a speed bound: 6,400 calls of 1 ms each
			// on a loaded 2-core host take well over tctx's 10 s.
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
			defer cancel()
			burst(t, ctx, c, workers, rounds, tt.msg, done)
			n := c.Conns()
			assert.LessOrEqual(t, n, tt.max)
			if tt.wantMulti {
				assert.Greater(t, n, 1, "%d concurrent calls of %d bytes must spread", workers, len(tt.msg))
			} else {
				assert.Equal(t, 1, n)
			}
			// Whatever the layout, a lone caller still works.
			got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "after"})
			require.NoError(t, err)
			assert.Equal(t, "after", got)
		})
	}
}

func TestConnsServerLimitKeepsCallsWorking(t *testing.T) {
	// The server turns every connection beyond the first away: extra dials
	// fail, calls stay on the first connection and all succeed.
	ts := serve(t, "", server.WithMaxConns(1))
	c := dial(t, ts.addr)
	large := strings.Repeat("z", 128<<10)
	burst(t, tctx(t), c, 8, 20, large, func() bool { return false })
	assert.Equal(t, 1, c.Conns())
	assert.True(t, c.Upgraded())
}

func TestConnsReconnectAfterServerRestart(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	large := strings.Repeat("r", 128<<10)
	burst(t, tctx(t), c, 16, 500, large, func() bool { return c.Conns() > 1 })
	require.Greater(t, c.Conns(), 1)

	ts.stop()
	// Every connection died with the server; calls fail with the typed
	// error until it is back, then succeed on fresh connections.
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: large})
	require.ErrorIs(t, err, client.ErrConnClosed)
	serve(t, ts.addr)
	burst(t, tctx(t), c, 16, 20, large, func() bool { return false })
	assert.True(t, c.Upgraded())
}

func TestConnsCloseWhileSpreading(t *testing.T) {
	// Close right as the background dial starts must not leak its
	// goroutine or connection (goleak in TestMain checks).
	ts := serve(t, "")
	for range 5 {
		ctx, cancel := context.WithTimeout(tctx(t), testenv.HangGuard(5*time.Second))
		c, err := client.Dial(ctx, ts.addr)
		require.NoError(t, err)
		large := strings.Repeat("c", 128<<10)
		bctx, bcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for bctx.Err() == nil {
					if _, err := echo(bctx, c, &wiretest.EchoArgs{Msg: large}); err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, c.Close())
		wg.Wait()
		bcancel()
		cancel()
		assert.Equal(t, 0, c.Conns())
	}
}

func TestConnsCloseDuringUnansweredExtraHandshake(t *testing.T) {
	// Extra connections reach a peer that accepts and never answers the
	// handshake: Close must stop that background dial at once, not after
	// the handshake timeout.
	ts := serve(t, "")
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer hole.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	}()
	// Close must not wait out the extra connection's handshake: a minute,
	// so a Close that did is told apart from a slow host's by far.
	const handshake = time.Minute
	var dials atomic.Int32
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		if dials.Add(1) > 1 {
			addr = hole.Addr().String()
		}
		return d.DialContext(ctx, "tcp", addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, ts.addr, client.WithDialer(dialer), client.WithHandshakeTimeout(handshake))
	require.NoError(t, err)
	burst(t, tctx(t), c, 16, 500, strings.Repeat("h", 128<<10), func() bool { return dials.Load() > 1 })
	require.Eventually(t, func() bool { return len(accepted) > 0 }, testenv.HangGuard(5*time.Second), time.Millisecond, "no extra dial started")
	start := time.Now()
	require.NoError(t, c.Close())
	assert.Less(t, time.Since(start), handshake/2, "Close waited for the handshake timeout")
	assert.Equal(t, 0, c.Conns(), "Close leaves no connection")
}

// slowToNotice is a connection whose reader does not see it end while
// hold is set: a Read that fails waits for Close instead, as a reader the
// scheduler has not run yet would.
type slowToNotice struct {
	net.Conn
	hold   *atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func (c *slowToNotice) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.hold.Load() {
		<-c.closed
	}
	return n, err
}

func (c *slowToNotice) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestConnsRetireExtrasWithFirst: after a server restart, calls succeed
// on fresh connections even while the extra connections' readers have
// not yet seen the old server go: redialling the first connection takes
// the extras out of use (they close; spreading dials new ones), so no
// call is sent on one of them.
func TestConnsRetireExtrasWithFirst(t *testing.T) {
	ts := serve(t, "")
	var dials atomic.Int32
	var hold atomic.Bool
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if dials.Add(1) == 1 {
			return nc, nil // the first connection notices at once
		}
		return &slowToNotice{Conn: nc, hold: &hold, closed: make(chan struct{})}, nil
	}
	c := dial(t, ts.addr, client.WithDialer(dialer))
	large := strings.Repeat("r", 128<<10)
	burst(t, tctx(t), c, 16, 500, large, func() bool { return c.Conns() > 1 })
	require.Greater(t, c.Conns(), 1)

	hold.Store(true)
	ts.stop()
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "x"})
	require.ErrorIs(t, err, client.ErrConnClosed, "the first connection died with the server")
	serve(t, ts.addr)
	burst(t, tctx(t), c, 16, 20, large, func() bool { return false })
	hold.Store(false)
}

// countedConn counts what a client connection wrote and notes its Close.
type countedConn struct {
	net.Conn
	wrote  atomic.Int64
	closed chan struct{}
	once   sync.Once
}

// Write counts p before writing it: counted after, a write the server
// already answered could still be uncounted when a loaded host held the
// writer back between the syscall and the count, and a check that no call
// went out on a connection since a snapshot then saw it land later.
func (c *countedConn) Write(p []byte) (int, error) {
	c.wrote.Add(int64(len(p)))
	n, err := c.Conn.Write(p)
	c.wrote.Add(int64(n - len(p)))
	return n, err
}

func (c *countedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// connLog dials TCP connections as countedConns and keeps them in dial
// order (the first connection, then the extras).
type connLog struct {
	mu    sync.Mutex
	conns []*countedConn
}

func (l *connLog) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cc := &countedConn{Conn: nc, closed: make(chan struct{})}
	l.mu.Lock()
	l.conns = append(l.conns, cc)
	l.mu.Unlock()
	return cc, nil
}

func (l *connLog) all() []*countedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*countedConn(nil), l.conns...)
}

// TestRetiredExtraFinishesItsCalls: an extra connection retired while it
// carries calls (the first connection broke and is dialled again) takes
// no new call, answers the ones it has with their own replies, and only
// then closes.
func TestRetiredExtraFinishesItsCalls(t *testing.T) {
	const held = "hold:"
	entered, release := make(chan string, 64), make(chan struct{})
	e := wiretest.NewEcho()
	svc := e.Service()
	plain := svc.Methods[0].Handle
	svc.Methods[0].Handle = func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
		if msg := a.(*wiretest.EchoArgs).Msg; strings.HasPrefix(msg, held) {
			entered <- msg
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return plain(ctx, a)
	}
	s := server.New(server.WithLogger(quiet))
	s.Register(svc)
	addr := serveWith(t, s)

	var log connLog
	c := dial(t, addr, client.WithDialer(log.dial))
	large := strings.Repeat("r", 128<<10)
	burst(t, tctx(t), c, 16, 500, large, func() bool { return c.Conns() > 1 })
	require.Greater(t, c.Conns(), 1)
	spread := log.all()
	before := make([]int64, len(spread))
	for i, cc := range spread {
		before[i] = cc.wrote.Load()
	}

	// Held calls, each with a payload of its own, on whichever
	// connections the spreading picks.
	const calls = 12
	ctx := tctx(t)
	type result struct {
		want, got string
		err       error
	}
	results := make(chan result, calls)
	for i := range calls {
		msg := fmt.Sprintf("%s%02d:%s", held, i, large)
		go func() {
			got, err := echo(ctx, c, &wiretest.EchoArgs{Msg: msg})
			results <- result{msg, got, err}
		}()
	}
	for range calls {
		select {
		case <-entered:
		case <-ctx.Done():
			t.Fatal("the held calls did not all reach the handler")
		}
	}
	// The extras that carry held calls (they wrote a request since).
	var busy []*countedConn
	for i, cc := range spread[1:] {
		if cc.wrote.Load()-before[i+1] >= int64(len(large)) {
			busy = append(busy, cc)
		}
	}
	require.NotEmpty(t, busy, "no held call went out on an extra connection")
	onFirst := spread[0].wrote.Load()-before[0] >= int64(len(large))

	// The first connection breaks; once its reader has seen that (until
	// then a call may still go out on an extra), the next call dials it
	// again and retires the extras.
	require.NoError(t, spread[0].Close())
	require.Eventually(t, func() bool { return client.FirstDown(c) }, testenv.HangGuard(10*time.Second), time.Millisecond)
	got, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "after"})
	require.NoError(t, err)
	assert.Equal(t, "after", got)
	redialled := len(log.all()) > len(spread)
	require.True(t, redialled, "the first connection was not dialled again")
	for _, cc := range busy {
		select {
		case <-cc.closed:
			t.Fatal("a retired extra closed with calls in flight")
		default:
		}
	}
	// Retired extras take no new calls: these go out on fresh
	// connections while the held calls still wait.
	wrote := make([]int64, len(busy))
	for i, cc := range busy {
		wrote[i] = cc.wrote.Load()
	}
	for range 20 {
		requireEcho(t, ctx, c, "fresh")
	}
	for i, cc := range busy {
		assert.Equal(t, wrote[i], cc.wrote.Load(), "a call went out on a retired extra")
	}

	close(release)
	failed := 0
	for range calls {
		select {
		case r := <-results:
			if r.err != nil {
				// Only a call on the broken first connection may fail.
				require.ErrorIs(t, r.err, client.ErrConnClosed)
				require.True(t, onFirst, "a call failed though none was on the first connection: %v", r.err)
				failed++
				continue
			}
			require.Equal(t, r.want, r.got, "a held call got another call's reply")
		case <-ctx.Done():
			t.Fatal("the held calls did not return")
		}
	}
	assert.Less(t, failed, calls, "every held call failed")
	for _, cc := range busy {
		select {
		case <-cc.closed:
		case <-ctx.Done():
			t.Fatal("a retired extra stayed open after its last call")
		}
	}
}

// TestCallOnRetiredExtra: a call that picked an extra connection just
// before the extras were retired (and the idle one closed) goes out on
// the Conn's first connection instead of failing on the closed extra:
// nothing of it was sent.
func TestCallOnRetiredExtra(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  string
	}{
		{"small", "after retirement"},
		{"large", strings.Repeat("x", 128<<10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := server.New(server.WithLogger(quiet))
			s.Register(wiretest.NewEcho().Service())
			addr := serveWith(t, s)
			var log connLog
			c := dial(t, addr, client.WithDialer(log.dial))
			ctx := tctx(t)
			large := strings.Repeat("r", 128<<10)
			burst(t, ctx, c, 16, 500, large, func() bool { return c.Conns() > 1 })
			require.Greater(t, c.Conns(), 1)
			conns := log.all()
			first, extra := conns[0], conns[1]
			sentFirst := first.wrote.Load()

			var res wiretest.EchoResult
			picked, err := client.CallOnRetiredExtra(ctx, c, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: tc.msg}, &res)
			require.True(t, picked)
			require.NoError(t, err)
			require.NotNil(t, res.Success)
			assert.Equal(t, tc.msg, *res.Success)
			assert.GreaterOrEqual(t, first.wrote.Load()-sentFirst, int64(len(tc.msg)), "the call did not go out on the first connection")
			select {
			case <-extra.closed:
			case <-ctx.Done():
				t.Fatal("the retired idle extra stayed open")
			}
			assert.Equal(t, 1, c.Conns(), "retired extras still counted")
		})
	}
}
