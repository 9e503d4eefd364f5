package lanes_test

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// attachRaw sends an attach hello as a hostile client would and returns
// the connection (never bootstrapped) and whether the server granted it.
func attachRaw(t *testing.T, addr, tr, fn string, size int64) (net.Conn, bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	hello := &wire.Hello{Version: wire.Version, Caps: wire.CapFraming | wire.CapAttach | wire.CapSHM | wire.CapRDMA,
		Host: fastpath.HostID(), Attach: &wire.Attach{Transport: tr, Function: fn, RequestSize: size, ResponseSize: size}}
	b, err := codec.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Call, 0, hello)
	require.NoError(t, err)
	_, err = nc.Write(b)
	require.NoError(t, err)
	msg, err := wire.ReadMessage(bufio.NewReader(nc), wire.Format{Proto: proto.Binary}, nil, nil)
	require.NoError(t, err)
	mh, err := wire.ParseMsgHeader(proto.Binary, msg)
	require.NoError(t, err)
	return nc, mh.Type == proto.Reply
}

// TestPendingSetupExpires: a granted attach that is never bootstrapped
// gives its pending slot back after the setup timeout, so a client that
// stalls cannot hold the budget.
func TestPendingSetupExpires(t *testing.T) {
	lim := server.DefaultLaneLimits
	lim.Pending = 1
	lim.SetupTimeout = time.Second
	_, addr := mixServer(t, true, server.WithLaneLimits(lim))
	_, tr := insisted(t)
	start := time.Now()
	stalled, ok := attachRaw(t, addr, tr, "Mix:crunch", 1<<10)
	require.True(t, ok, "first attach refused")
	defer stalled.Close()
	// The server's timer starts after start, so an answer that came back
	// before start+SetupTimeout was given while the slot was still held.
	nc, ok := attachRaw(t, addr, tr, "Mix:crunch", 1<<10)
	nc.Close()
	if time.Since(start) < lim.SetupTimeout {
		require.False(t, ok, "a second setup granted beyond the pending budget")
	}
	// The slot comes back only when the server's timer fires; the bound
	// only keeps a slot that never comes back from hanging the test.
	require.Eventually(t, func() bool {
		nc, ok := attachRaw(t, addr, tr, "Mix:crunch", 1<<10)
		nc.Close()
		return ok
	}, testenv.HangGuard(30*time.Second), 20*time.Millisecond, "the stalled setup kept its pending slot")
}

// TestAttachFlood: one client floods the server with lane attaches it
// never completes — for unknown functions and with absurd sizes — while
// another client works. The worker's calls all succeed (over TCP while
// the budget is taken, if need be); the unknown ones are refused outright;
// once the flood's connections are gone, the fast path is fully usable.
func TestAttachFlood(t *testing.T) {
	// The setups granted must stay pending for the whole flood, however
	// slowly it runs (an emulated VM takes seconds), or expired ones would
	// free slots for more grants than the budget.
	lim := server.DefaultLaneLimits
	lim.SetupTimeout = 10 * time.Minute
	lim.Pending = 32 // what the flood meets before the buffers' budget
	srv, addr := mixServer(t, true, server.WithLaneLimits(lim))
	_, tr := insisted(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()

	var flood []net.Conn
	granted := 0
	for i := 0; i < 100; i++ {
		_, ok := attachRaw(t, addr, tr, "Nope:nothing", 0)
		require.False(t, ok, "unknown function granted")
		nc, ok := attachRaw(t, addr, tr, "Mix:crunch", 1<<62)
		flood = append(flood, nc)
		if ok {
			granted++
		}
	}
	// All from one local user, who may take all but a quarter of the
	// pending places (the rest stay for other users: lanesource.go).
	pending := lim.Pending
	assert.Equal(t, pending-pending/4, granted, "granted setups beyond one user's share of the pending budget")

	// Meanwhile another client works.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctx, addr, client.WithRDMA(fastProvider))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for i := 0; i < 50; i++ {
				if _, err := mix.NewMixClient(c).Ping(ctx, []byte("x")); err != nil {
					errs <- err
					return
				}
				if _, err := mix.NewSharedClient(c).Get(ctx, []byte("k")); err != nil {
					errs <- err
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
	for _, nc := range flood {
		nc.Close()
	}
	// The budget comes back: a fresh client gets the fast path again.
	fastBefore := serverMetric(t, srv, "hatrpc_server_calls_total", "shm", "rdma")
	require.Eventually(t, func() bool { return serverMetric(t, srv, "hatrpc_server_connections") == 0 },
		testenv.HangGuard(20*time.Second), 5*time.Millisecond)
	c, err := client.Dial(ctx, addr, client.WithRDMA(fastProvider))
	require.NoError(t, err)
	defer c.Close()
	_, err = mix.NewMixClient(c).Ping(ctx, []byte("x"))
	require.NoError(t, err)
	_, err = mix.NewSharedClient(c).Get(ctx, []byte("k"))
	require.NoError(t, err)
	assert.Equal(t, fastBefore+2, serverMetric(t, srv, "hatrpc_server_calls_total", "shm", "rdma"))
	require.NoError(t, c.FastPathErr())
}
