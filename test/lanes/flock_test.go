package lanes_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix/mixserver"
	"github.com/hatrpc/hatrpc/test/testenv"
)

type shared struct {
	slowStarted chan struct{}
	gets        atomic.Int64
}

func (s *shared) Get(_ context.Context, key []byte) ([]byte, error) {
	s.gets.Add(1)
	return bytes.Repeat(key, 4), nil
}

func (s *shared) Slow(ctx context.Context, ms int64) (int64, error) {
	s.slowStarted <- struct{}{}
	select {
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return ms, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func startShared(t *testing.T) (*server.Server, *shared, string) {
	t.Helper()
	h := &shared{slowStarted: make(chan struct{}, 16)}
	srv := server.New(server.WithRDMA(fastpathtest.Provider()), server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	mixserver.RegisterShared(srv, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case <-done:
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Error("Serve did not return")
		}
	})
	return srv, h, ln.Addr().String()
}

// TestFlockSharesQPs: with qp_sharing on, the callers of every Conn of the
// process go through one FLOCK handle; every response reaches its caller.
func TestFlockSharesQPs(t *testing.T) {
	_, h, addr := startShared(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	const conns, callers, calls = 4, 64, 100
	cs := make([]*client.Conn, conns)
	for i := range cs {
		c, err := client.Dial(ctx, addr, client.WithRDMA(fastpathtest.Provider()))
		require.NoError(t, err)
		defer c.Close()
		cs[i] = c
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := mix.NewSharedClient(cs[g%conns])
			for i := 0; i < calls; i++ {
				key := []byte(fmt.Sprintf("g%03d-%04d", g, i))
				got, err := c.Get(ctx, key)
				if err == nil && !bytes.Equal(got, bytes.Repeat(key, 4)) {
					err = fmt.Errorf("caller %d got %q for %q", g, got, key)
				}
				if err != nil {
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
	require.Equal(t, int64(callers*calls), h.gets.Load())
	var viaFlock uint64
	for _, c := range cs {
		for _, s := range c.LaneStats() {
			require.Equal(t, "Shared:get", s.Function)
			require.Equal(t, 0, s.Lanes, "shared calls open no lanes of their own")
			viaFlock += s.Requests["flock"]
		}
	}
	require.Equal(t, uint64(callers*calls), viaFlock)
}

// TestFlockServerGone: calls waiting in the shared handle fail when the
// server closes, and do not hang.
func TestFlockServerGone(t *testing.T) {
	srv, h, addr := startShared(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	conn, err := client.Dial(ctx, addr, client.WithRDMA(fastpathtest.Provider()))
	require.NoError(t, err)
	defer conn.Close()
	c := mix.NewSharedClient(conn)
	_, err = c.Get(ctx, []byte("warm"))
	require.NoError(t, err)
	errc := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			_, err := c.Slow(ctx, 60_000)
			errc <- err
		}()
	}
	for i := 0; i < 3; i++ {
		select {
		case <-h.slowStarted:
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Fatal("slow calls did not start")
		}
	}
	require.NoError(t, srv.Close())
	for i := 0; i < 3; i++ {
		select {
		case err := <-errc:
			require.Error(t, err)
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Fatal("a call through FLOCK hangs after the server closed")
		}
	}
}
