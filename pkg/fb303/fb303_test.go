package fb303

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fb303/gen/fb303"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serve runs srv on a loopback port until the test ends.
func serve(t *testing.T, srv *server.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, ctx context.Context, addr string, opts ...client.Option) *fb303.FacebookServiceClient {
	t.Helper()
	conn, err := client.Dial(ctx, addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return fb303.NewFacebookServiceClient(conn)
}

func TestFunctions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := server.New(server.WithLogger(quiet))
	started := time.Unix(1_700_000_000, 0)
	reinit, stop := make(chan struct{}, 1), make(chan struct{}, 1)
	Register(srv, WithName("kv"), WithVersion("1.2.3"), withClock(func() time.Time { return started }), WithCountersMaxAge(0),
		WithCounters(func() map[string]int64 { return map[string]int64{"app_widgets": 7} }),
		WithOptions(map[string]string{"mode": "fast"}),
		WithSetOption(func(key, value string) error {
			if key == "readonly" {
				return errors.New("cannot be changed")
			}
			return nil
		}),
		WithReinitialize(func() { reinit <- struct{}{} }),
		WithShutdown(func() { stop <- struct{}{} }),
		WithLogger(quiet))
	c := dial(t, ctx, serve(t, srv))

	name, err := c.GetName(ctx)
	require.NoError(t, err)
	assert.Equal(t, "kv", name)
	v, err := c.GetVersion(ctx)
	require.NoError(t, err)
	assert.Equal(t, "1.2.3", v)
	st, err := c.GetStatus(ctx)
	require.NoError(t, err)
	assert.Equal(t, Alive, st)
	d, err := c.GetStatusDetails(ctx)
	require.NoError(t, err)
	assert.Equal(t, "serving", d)
	since, err := c.AliveSince(ctx)
	require.NoError(t, err)
	assert.Equal(t, started.Unix(), since)
	prof, err := c.GetCpuProfile(ctx, 30)
	require.NoError(t, err)
	assert.Empty(t, prof, "no profile on request")

	// Counters come from the server's real metrics: the calls above, this
	// connection, and the application's own.
	cs, err := c.GetCounters(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), cs[`hatrpc_server_calls_total{function="getName",service="FacebookService",transport="tcp"}`], "%v", keys(cs))
	assert.Equal(t, int64(7), cs["hatrpc_server_calls_total"], "six calls before getCounters, which is counted as it starts")
	assert.Equal(t, int64(1), cs["hatrpc_server_connections"])
	assert.Equal(t, int64(1), cs["hatrpc_server_in_flight"], "getCounters itself")
	assert.Equal(t, int64(6), cs["hatrpc_server_call_duration_seconds_count"])
	assert.Equal(t, int64(7), cs["app_widgets"])
	n, err := c.GetCounter(ctx, "hatrpc_server_calls_total")
	require.NoError(t, err)
	assert.Equal(t, int64(8), n)
	n, err = c.GetCounter(ctx, "no_such_counter")
	require.NoError(t, err)
	assert.Zero(t, n)

	// Options: initial ones, accepted ones, a refused one.
	require.NoError(t, c.SetOption(ctx, "level", "debug"))
	err = c.SetOption(ctx, "readonly", "x")
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "fb303: setOption readonly: cannot be changed", ae.Message)
	o, err := c.GetOption(ctx, "level")
	require.NoError(t, err)
	assert.Equal(t, "debug", o)
	all, err := c.GetOptions(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"mode": "fast", "level": "debug"}, all)

	// reinitialize and shutdown are oneway: their hooks run later.
	require.NoError(t, c.Reinitialize(ctx))
	require.NoError(t, c.Shutdown(ctx))
	for _, ch := range []chan struct{}{reinit, stop} {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("hook not called")
		}
	}
}

func keys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if strings.HasPrefix(k, "hatrpc_server_calls") {
			out = append(out, k)
		}
	}
	return out
}

// TestDefaultsAreSafe: without hooks, setOption is refused and shutdown
// leaves the server serving; option storage is bounded.
func TestDefaultsAreSafe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := server.New(server.WithLogger(quiet))
	Register(srv, WithLogger(quiet))
	c := dial(t, ctx, serve(t, srv))

	name, err := c.GetName(ctx)
	require.NoError(t, err)
	assert.Equal(t, "hatrpc", name)
	err = c.SetOption(ctx, "k", "v")
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "fb303: setOption is disabled on this server", ae.Message)
	all, err := c.GetOptions(ctx)
	require.NoError(t, err)
	assert.Empty(t, all)

	require.NoError(t, c.Shutdown(ctx))
	// A call after the oneway shutdown on the same connection is read
	// after it: the server still answers.
	st, err := c.GetStatus(ctx)
	require.NoError(t, err)
	assert.Equal(t, Alive, st)
	assert.False(t, srv.ShuttingDown())
}

func TestOptionBounds(t *testing.T) {
	srv := server.New(server.WithLogger(quiet))
	defer srv.Close()
	s := New(srv, WithSetOption(func(string, string) error { return nil }))
	ctx := context.Background()
	tests := []struct {
		name, key, value, err string
	}{
		{"long key", strings.Repeat("k", MaxOptionKey+1), "v", "fb303: option key or value too long"},
		{"long value", "k", strings.Repeat("v", MaxOptionValue+1), "fb303: option key or value too long"},
		{"fits", strings.Repeat("k", MaxOptionKey), strings.Repeat("v", MaxOptionValue), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.SetOption(ctx, tt.key, tt.value)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tt.err, ae.Message)
		})
	}
	for i := len(s.opts); i < MaxOptions; i++ {
		require.NoError(t, s.SetOption(ctx, fmt.Sprint("opt", i), "v"))
	}
	var ae *proto.ApplicationException
	require.ErrorAs(t, s.SetOption(ctx, "one-too-many", "v"), &ae)
	assert.Equal(t, "fb303: too many options", ae.Message)
	require.NoError(t, s.SetOption(ctx, "opt1", "changed"), "an existing key may change")
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	srv := server.New(server.WithLogger(quiet))
	warn := New(srv, WithStatus(func() (fb303.FbStatus, string) { return Warning, "disk 95% full" }))
	st, err := warn.GetStatus(ctx)
	require.NoError(t, err)
	assert.Equal(t, Warning, st)
	d, err := warn.GetStatusDetails(ctx)
	require.NoError(t, err)
	assert.Equal(t, "disk 95% full", d)

	require.NoError(t, srv.Close())
	for _, s := range []*Service{warn, New(srv)} {
		st, err = s.GetStatus(ctx)
		require.NoError(t, err)
		assert.Equal(t, Stopping, st, "a server shutting down says so, whatever the application says")
		d, err = s.GetStatusDetails(ctx)
		require.NoError(t, err)
		assert.Equal(t, "shutting down: finishing the calls in flight", d)
	}
}

// TestCountersSnapshot: within the snapshot's age the counters are not
// gathered again (a getCounters loop costs one gathering a second); after
// it they are.
func TestCountersSnapshot(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	srv := server.New(server.WithLogger(quiet), server.WithRegistry(reg))
	defer srv.Close()
	ticks := prometheus.NewCounter(prometheus.CounterOpts{Name: "ticks_total", Help: "test"})
	reg.MustRegister(ticks)
	var now atomic.Int64
	s := New(srv, withClock(func() time.Time { return time.Unix(0, now.Load()) }))
	read := func() int64 {
		n, err := s.GetCounter(ctx, "ticks_total")
		require.NoError(t, err)
		return n
	}
	require.Zero(t, read())
	ticks.Add(5)
	now.Store(int64(DefaultCountersMaxAge - 1))
	assert.Zero(t, read(), "the snapshot is still fresh")
	now.Store(int64(DefaultCountersMaxAge))
	assert.Equal(t, int64(5), read(), "a new snapshot once it is a second old")
	ticks.Add(1)
	now.Store(0)
	assert.Equal(t, int64(6), read(), "a clock that went back does not keep a snapshot forever")
}

// TestIgnoredCallsLogBounded: any client may call shutdown and
// reinitialize; a flood of them logs at most a line per second each, with
// the count of the calls it stands for.
func TestIgnoredCallsLogBounded(t *testing.T) {
	srv := server.New(server.WithLogger(quiet))
	defer srv.Close()
	var buf bytes.Buffer
	s := New(srv, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	ctx := context.Background()
	const n = 10000
	start := time.Now()
	for range n {
		require.NoError(t, s.Shutdown(ctx))
		require.NoError(t, s.Reinitialize(ctx))
	}
	secs := int(time.Since(start)/time.Second) + 1
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// Each message: its first line, then at most one a second.
	assert.LessOrEqual(t, len(lines), 2*(secs+1), "%d lines in %d s", len(lines), secs)
	assert.Contains(t, lines[0], "fb303: shutdown requested and ignored")
	assert.Contains(t, lines[1], "fb303: reinitialize requested; nothing to do")
	assert.False(t, srv.ShuttingDown())
}
