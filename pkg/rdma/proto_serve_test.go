package rdma

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeCallsAfterReply: AfterReply's function runs once per reply,
// before the handler sees the next request. On an endpoint that spins it
// runs once the reply is out: each run waits for the client to have the
// reply it follows, which would never come if it ran first. On one that
// sleeps it runs before the reply (the client still waits), and the
// reply and the next wait stay one crossing.
func TestServeCallsAfterReply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		poll   Polling
		spin   time.Duration
		splits bool
		block  bool // BlockWaits(true) after the spin is set
	}{
		{"busy", PollBusy, 0, true, false},
		{"event spinning", PollEvent, time.Millisecond, true, false},
		{"event sleeping", PollEvent, 0, false, false},
		// A spin set, waits blocked (a lane carrying a client stream):
		// the endpoint sleeps, as one without a spin.
		{"event spinning, waits blocked", PollEvent, time.Millisecond, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testEPConfig(tc.poll)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			srv.SetSpin(tc.spin)
			if tc.block {
				srv.BlockWaits(true)
			}
			const n = 20
			var (
				replied atomic.Int32
				got     = make(chan struct{}, n)
				mu      sync.Mutex
				events  []string
				bad     []string
			)
			note := func(f string, a ...any) {
				mu.Lock()
				events = append(events, fmt.Sprintf(f, a...))
				mu.Unlock()
			}
			i := 0
			stop := serveCalls(t, srv, func(req []byte) ([]byte, Protocol) {
				note("h%d", i)
				return req, ProtoDirectWriteIMM
			}, AfterReply(func() {
				if tc.splits {
					select {
					case <-got:
					case <-time.After(testTimeout):
					}
				}
				if r := replied.Load(); r != int32(i+boolInt(tc.splits)) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("after %d: the client had %d replies", i, r))
					mu.Unlock()
				}
				note("a%d", i)
				i++
			}))
			for j := 0; j < n; j++ {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				req := []byte{byte(j), 1, 2}
				resp, err := cli.Call(ctx, ProtoDirectWriteIMM, req)
				cancel()
				require.NoError(t, err)
				require.Equal(t, req, resp)
				replied.Add(1)
				got <- struct{}{}
			}
			stop()
			var want []string
			for j := 0; j < n; j++ {
				want = append(want, fmt.Sprintf("h%d", j), fmt.Sprintf("a%d", j))
			}
			require.Empty(t, bad)
			require.Equal(t, want, events)
			if tc.splits {
				require.Equal(t, n, srv.splits, "each reply its own crossing")
			} else {
				require.Zero(t, srv.splits, "reply and wait in one crossing")
			}
		})
	}
}

// TestServeCallsAfterFailedReply: the function runs after a reply that
// fails too (here one over the endpoint's largest message), and the loop
// returns the failure.
func TestServeCallsAfterFailedReply(t *testing.T) {
	for _, spin := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprint("spin ", spin), func(t *testing.T) {
			cfg := testEPConfig(PollEvent)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			srv.SetSpin(spin)
			var afters atomic.Int32
			errc := make(chan error, 1)
			go func() {
				errc <- srv.ServeCalls(context.Background(), nil, func([]byte) ([]byte, Protocol) {
					return make([]byte, cfg.MaxMessage+1), ProtoEager
				}, AfterReply(func() { afters.Add(1) }))
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := cli.Call(ctx, ProtoEager, []byte("x"))
			require.Error(t, err, "no reply can come")
			select {
			case err := <-errc:
				require.ErrorIs(t, err, ErrInvalid)
			case <-time.After(testTimeout):
				t.Fatal("ServeCalls did not return")
			}
			require.Equal(t, int32(1), afters.Load())
		})
	}
}

// TestBlockWaits: BlockWaits makes an event endpoint's long waits park
// (its goroutine no longer spins in C) whatever SetSpin asks meanwhile,
// and BlockWaits(false) restores the spinning of the spin asked for last;
// a busy endpoint polls whatever it is told, and never parks.
func TestBlockWaits(t *testing.T) {
	type step struct {
		op      string // "spin", "block", "unblock"
		spin    time.Duration
		spins   bool // the endpoint spins after the step
		blocked bool // WaitsBlocked after the step
	}
	for _, tc := range []struct {
		name  string
		poll  Polling
		steps []step
		last  time.Duration // the spin SetSpin asked for last
	}{
		{"block, spin set meanwhile, unblock", PollEvent, []step{
			{"spin", time.Millisecond, true, false}, {"block", 0, false, true},
			{"spin", 2 * time.Millisecond, false, true}, {"block", 0, false, true},
			{"unblock", 0, true, false}, {"unblock", 0, true, false}}, 2 * time.Millisecond},
		{"spin cleared meanwhile", PollEvent, []step{
			{"spin", time.Millisecond, true, false}, {"block", 0, false, true},
			{"spin", 0, false, true}, {"unblock", 0, false, false}}, 0},
		{"busy", PollBusy, []step{{"block", 0, true, true}, {"unblock", 0, true, false}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, newPD(t, openTest(t)), testEPConfig(tc.poll))
			for i, s := range tc.steps {
				switch s.op {
				case "spin":
					e.SetSpin(s.spin)
				case "block":
					e.BlockWaits(true)
				case "unblock":
					e.BlockWaits(false)
				}
				require.Equal(t, s.spins, e.spins.Load(), "step %d (%s)", i, s.op)
				require.Equal(t, s.blocked, e.WaitsBlocked(), "step %d (%s)", i, s.op)
				require.Equal(t, s.blocked && tc.poll == PollEvent, e.park.Load(), "step %d (%s)", i, s.op)
			}
			require.Equal(t, tc.last, e.spin)
		})
	}
}
