package lanes_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/fdcheck"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix/mixserver"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(envAttackAddr) != "" {
		os.Exit(runAttacker())
	}
	if os.Getenv(fdcheck.Env) != "" {
		os.Exit(fdcheck.ChildMain())
	}
	goleak.VerifyTestMain(m)
}

type handler struct {
	mu    sync.Mutex
	notes []string
	infos map[string]string // function -> transport seen by the interceptor
}

func (h *handler) Ping(_ context.Context, data []byte) ([]byte, error) { return data, nil }

// Crunch's work grows with the payload, as in the mix benchmark.
func (h *handler) Crunch(_ context.Context, data []byte) (int64, error) {
	s := sha256.Sum256(data)
	return int64(binary.BigEndian.Uint64(s[:8])), nil
}

func (h *handler) Status(context.Context) (string, error) { return "ok", nil }

func (h *handler) Note(_ context.Context, msg string) error {
	h.mu.Lock()
	h.notes = append(h.notes, msg)
	h.mu.Unlock()
	return nil
}

func start(t *testing.T) (*server.Server, *handler, string) {
	t.Helper()
	h := &handler{infos: map[string]string{}}
	ic := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		h.mu.Lock()
		h.infos[info.Method.Name] = info.Transport
		h.mu.Unlock()
		return next(ctx, args)
	}
	srv := server.New(server.WithRDMA(fastpathtest.Provider()), server.WithInterceptors(ic),
		server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	mixserver.RegisterMix(srv, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		select {
		case <-done:
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Error("Serve did not return")
		}
	})
	return srv, h, ln.Addr().String()
}

// replies reads hatrpc_server_lane_replies_total by function and protocol.
func replies(t *testing.T, srv *server.Server) map[string]float64 {
	mfs, err := srv.Registry().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "hatrpc_server_lane_replies_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			lbl := map[string]string{}
			for _, l := range m.GetLabel() {
				lbl[l.GetName()] = l.GetValue()
			}
			if v := m.GetCounter().GetValue(); v > 0 {
				out[lbl["function"]+"/"+lbl["protocol"]] = v
			}
		}
	}
	return out
}

// TestMixPlannedProtocols runs the latency function and the throughput
// function concurrently over shm and checks from both sides' counters that
// each ran on its own lanes with the protocols its hints plan, while the
// TCP-pinned function stayed on TCP.
func TestMixPlannedProtocols(t *testing.T) {
	srv, h, addr := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	conn, err := client.Dial(ctx, addr, client.WithRDMA(fastpathtest.Provider()), client.WithHints(&mix.MixHints))
	require.NoError(t, err)
	defer conn.Close()
	c := mix.NewMixClient(conn)

	small := bytes.Repeat([]byte{7}, 64)
	big := bytes.Repeat([]byte{3, 1, 4, 1, 5}, 128<<10/5)
	want := sha256.Sum256(big)
	const pings, crunches = 200, 40
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < pings; i++ {
			got, err := c.Ping(ctx, small)
			if err == nil && !bytes.Equal(got, small) {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < crunches; i++ {
			sum, err := c.Crunch(ctx, big)
			if err == nil && sum != int64(binary.BigEndian.Uint64(want[:8])) {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err := c.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, "ok", st)
	require.NoError(t, c.Note(ctx, "hello"))
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.notes) == 1
	}, testenv.HangGuard(10*time.Second), 5*time.Millisecond)

	// Client side: requests by the planned protocols, each function on
	// lanes of its own (note: oneway, on a lane too).
	stats := map[string]client.LaneStats{}
	for _, s := range conn.LaneStats() {
		stats[s.Function] = s
	}
	// ping's 64 B requests, planned for latency by an under-subscribed
	// client: Direct-WriteIMM on a NIC (Fig. 6) and on shm (where the
	// planner's RFP is for busy endpoints; lanes are event-capable:
	// fastpath.PlanSide).
	require.Equal(t, map[string]uint64{"direct_write_imm": pings}, stats["Mix:ping"].Requests)
	// crunch's 128 KiB requests, throughput over-subscribed: Read-RNDV on
	// shm, RFP (Fig. 6's choice) on a NIC.
	require.Equal(t, map[string]uint64{onTransport("read_rndv", "rfp"): crunches}, stats["Mix:crunch"].Requests)
	require.NotContains(t, stats, "Mix:status", "status is pinned to TCP")
	require.GreaterOrEqual(t, stats["Mix:ping"].Lanes, 1)
	require.GreaterOrEqual(t, stats["Mix:crunch"].Lanes, 1)
	for _, fn := range []string{"Mix:ping", "Mix:crunch"} {
		require.Equal(t, fastpathtest.Transport(), stats[fn].Transport)
	}
	// Server side (over-subscribed on any machine: concurrency = 1024):
	// ping answers by Direct-WriteIMM (latency); crunch's 8-byte results
	// are small, so Direct-WriteIMM as well. A lane counts a reply once
	// it is out, maybe just after its client has it (rdma.AfterReply).
	wantReplies := map[string]float64{"ping/direct_write_imm": pings, "crunch/direct_write_imm": crunches}
	assert.Eventually(t, func() bool { return maps.Equal(wantReplies, replies(t, srv)) }, testenv.HangGuard(time.Minute), time.Millisecond)
	require.Equal(t, wantReplies, replies(t, srv))
	h.mu.Lock()
	require.Equal(t, map[string]string{"ping": fastpathtest.Transport(), "crunch": fastpathtest.Transport(), "status": "tcp", "note": fastpathtest.Transport()}, h.infos)
	h.mu.Unlock()

	require.Equal(t, fastpathtest.Transport(), conn.Plan("Mix:ping").Transport.String())
	require.Equal(t, "tcp", conn.Plan("Mix:status").Transport.String())
}

// TestServiceLevelHintsOnly: with both sides told to use service-level
// hints only, crunch no longer gets its throughput plan (RFP for its large
// requests) but the service's default.
func TestServiceLevelHintsOnly(t *testing.T) {
	h := &handler{infos: map[string]string{}}
	srv := server.New(server.WithRDMA(fastpathtest.Provider()), server.WithServiceLevelHints(),
		server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	mixserver.RegisterMix(srv, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		require.NoError(t, srv.Close())
		<-done
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	conn, err := client.Dial(ctx, ln.Addr().String(), client.WithRDMA(fastpathtest.Provider()), client.WithHints(&mix.MixHints),
		client.WithServiceLevelHints())
	require.NoError(t, err)
	defer conn.Close()
	c := mix.NewMixClient(conn)
	big := bytes.Repeat([]byte{9}, 128<<10)
	for i := 0; i < 5; i++ {
		_, err := c.Crunch(ctx, big)
		require.NoError(t, err)
	}
	_, err = c.Status(ctx)
	require.NoError(t, err)
	st := conn.LaneStats()
	byFn := map[string]map[string]uint64{}
	for _, s := range st {
		byFn[s.Function] = s.Requests
	}
	require.Equal(t, map[string]uint64{"direct_write_imm": 5}, byFn["Mix:crunch"])
	require.Equal(t, map[string]uint64{"direct_write_imm": 1}, byFn["Mix:status"],
		"status is no longer pinned to TCP (a tiny request: Direct-WriteIMM)")
	require.Equal(t, fastpathtest.Transport(), conn.Plan("Mix:status").Transport.String())
}

// onTransport picks the expectation of the design space the test runs in
// (pkg/hints plans shm and NICs differently).
func onTransport(shm, rdma string) string {
	if fastpathtest.Transport() == "rdma" {
		return rdma
	}
	return shm
}
