//go:build cgo && linux

package client_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// heldEcho serves echo over lanes with every call held in its handler
// until release is closed; arrived counts the calls held. A message
// starting with "big:" is answered with its rest repeated to bigReply
// bytes.
func heldEcho(t *testing.T, arrived *atomic.Int32, release <-chan struct{}) string {
	t.Helper()
	e := wiretest.NewEcho()
	svc := e.Service()
	plain := svc.Methods[0].Handle
	svc.Methods[0].Handle = func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
		arrived.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if msg, ok := strings.CutPrefix(a.(*wiretest.EchoArgs).Msg, "big:"); ok {
			big := strings.Repeat(msg, bigReply/len(msg))
			return &wiretest.EchoResult{Success: &big}, nil
		}
		return plain(ctx, a)
	}
	s := server.New(server.WithLogger(quiet), server.WithRDMA(fastpathtest.Provider()))
	s.Register(svc)
	return serveWith(t, s)
}

// bigReply is larger than a FLOCK message (fastpath.FlockMaxMessage): it
// travels in parts.
const bigReply = 200 << 10

// TestLanesShareBeyondCores: with qp_sharing=auto and no declared sizes, a
// function keeps a lane of its own for as many concurrent callers as there
// are cores, and the callers past them go through FLOCK; every caller gets
// its own reply. All calls are held in the handler until every one has
// arrived, so the number of concurrent callers is exact.
func TestLanesShareBeyondCores(t *testing.T) {
	cores := runtime.NumCPU()
	cases := []struct {
		name    string
		callers int
		msg     func(i int) string
		want    func(i int) string
		// flock: the fewest calls that must have gone through FLOCK
		// (racing callers may send a few more there, never fewer).
		flock int
	}{
		{"as many callers as cores: lanes only", cores, small, small, 0},
		{"callers past the cores share", cores + 6, small, small, 6},
		{"shared calls with replies in parts", cores + 3,
			func(i int) string { return fmt.Sprintf("big:%04d", i) },
			func(i int) string { return strings.Repeat(fmt.Sprintf("%04d", i), bigReply/4) }, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var arrived atomic.Int32
			release := make(chan struct{})
			addr := heldEcho(t, &arrived, release)
			c := dial(t, addr)
			m := methodWith(hints.Set{}) // qp_sharing=auto, no payload sizes
			ctx := tctx(t)
			errs := make(chan error, tc.callers)
			for i := range tc.callers {
				go func() {
					var res wiretest.EchoResult
					err := c.Call(ctx, m, &wiretest.EchoArgs{Msg: tc.msg(i)}, &res)
					if err == nil && (res.Success == nil || *res.Success != tc.want(i)) {
						err = fmt.Errorf("caller %d got another reply", i)
					}
					errs <- err
				}()
			}
			require.Eventually(t, func() bool { return int(arrived.Load()) == tc.callers },
				waitFor, pollEvery, "calls held: %d of %d", arrived.Load(), tc.callers)
			close(release)
			collect(ctx, t, errs, tc.callers)
			st := c.LaneStats()
			require.Len(t, st, 1)
			assert.LessOrEqual(t, st[0].Lanes, cores, "dedicated lanes past the cores")
			var total uint64
			for _, n := range st[0].Requests {
				total += n
			}
			assert.Equal(t, uint64(tc.callers), total, "every call counted once: %v", st[0].Requests)
			assert.GreaterOrEqual(t, st[0].Requests["flock"], uint64(tc.flock), "%v", st[0].Requests)
			if tc.flock == 0 {
				assert.Zero(t, st[0].Requests["flock"], "callers within the cores stay on lanes")
			}
		})
	}
}

// TestLanesShareLargeRequest: a request too large for FLOCK from a caller
// past the cores goes on a lane of the function, beyond the dedicated ones.
func TestLanesShareLargeRequest(t *testing.T) {
	cores := runtime.NumCPU()
	var arrived atomic.Int32
	release := make(chan struct{})
	addr := heldEcho(t, &arrived, release)
	c := dial(t, addr)
	m := methodWith(hints.Set{})
	ctx := tctx(t)
	large := strings.Repeat("L", 100<<10) // over fastpath.FlockMaxMessage
	errs := make(chan error, cores+1)
	call := func(msg string) {
		var res wiretest.EchoResult
		err := c.Call(ctx, m, &wiretest.EchoArgs{Msg: msg}, &res)
		if err == nil && (res.Success == nil || *res.Success != msg) {
			err = fmt.Errorf("%.10q: another reply", msg)
		}
		errs <- err
	}
	for i := range cores {
		go call(small(i))
	}
	require.Eventually(t, func() bool { return int(arrived.Load()) == cores }, waitFor, pollEvery)
	go call(large)
	require.Eventually(t, func() bool { return int(arrived.Load()) == cores+1 }, waitFor, pollEvery)
	close(release)
	collect(ctx, t, errs, cores+1)
	st := c.LaneStats()
	require.Len(t, st, 1)
	assert.Equal(t, cores+1, st[0].Lanes, "the large call opened a lane past the dedicated ones")
	assert.Zero(t, st[0].Requests["flock"], "%v", st[0].Requests)
}

func small(i int) string { return fmt.Sprintf("call-%04d", i) }

// collect takes n callers' results from errs, each nil, within ctx.
func collect(ctx context.Context, t *testing.T, errs <-chan error, n int) {
	t.Helper()
	for range n {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("calls did not return")
		}
	}
}

// How long the tests wait for held calls to arrive, and how often they look.
// waitFor is a hang guard, so it scales (testenv.HangGuard).
var (
	waitFor   = testenv.HangGuard(10 * time.Second)
	pollEvery = time.Millisecond
)
