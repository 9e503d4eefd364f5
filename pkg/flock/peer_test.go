package flock

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// activeSeries counts the flock_active_qps series (one per sender).
func activeSeries(t *testing.T, m *Metrics) int {
	t.Helper()
	return len(m.Snapshot().ActiveQPs)
}

// echoOnce makes one call and checks its answer.
func echoOnce(ctx context.Context, c *Conn, i int) error {
	req := []byte(fmt.Sprintf("call-%08d", i))
	resp, err := c.Call(ctx, hEcho, req)
	if err != nil {
		return err
	}
	if !bytes.Equal(resp, reversed(req)) {
		return fmt.Errorf("call %d: got %q", i, resp)
	}
	return nil
}

// TestPeerLifecycle: senders that come, call and go leave nothing behind
// on the server, whether they say goodbye (Peer.Close, as the runtime does
// when the liveness link closes) or just vanish (their QPs are destroyed:
// the server's next write to them fails and it tears them down itself).
// More cycles than the device has QPs for, so a leak fails the dial.
func TestPeerLifecycle(t *testing.T) {
	tests := []struct {
		name   string
		cycles int
		vanish bool
	}{
		// One device holds server and client QPs (8 per cycle) in a table
		// of 1,024: 160 cycles need the released ones back.
		{"peer-close", 160, false},
		{"sender-vanishes", 160, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := openDev(t)
			m := NewMetrics()
			s := newServer(t, d, WithMetrics(m), WithWorkers(2))
			s.Handle(hEcho, echo)
			for i := 0; i < tc.cycles; i++ {
				c, p := dial(t, d, s, WithQPs(4))
				// A time limit per cycle: how long 160 take depends on the
				// machine's load.
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				require.NoError(t, echoOnce(ctx, c, i))
				cancel()
				require.NoError(t, c.Close())
				if !tc.vanish {
					require.NoError(t, p.Close())
					select {
					case <-p.Done():
					default:
						t.Fatal("Done open after Close")
					}
				} else {
					// A vanished sender is found by the next write to it:
					// the dispatcher's sleep epoch at the latest, written
					// each time it goes back to sleep — made to happen now
					// (an idle dispatcher would look again within
					// idleSlice, too slow for 160 cycles on a loaded box).
					waitVanished(t, s, p, i)
				}
			}
			eventually(t, func() bool { return s.Peers() == 0 }, "peers left")
			assert.Equal(t, 0.0, metricValue(t, m.peers))
			assert.Equal(t, 0.0, metricValue(t, m.qps))
			assert.Equal(t, 0, activeSeries(t, m), "per-peer metric series left")
		})
	}
}

// waitVanished nudges the dispatcher until the vanished sender p is torn
// down; each cycle has its own time limit (the machine may be loaded).
func waitVanished(t *testing.T, s *Server, p *Peer, cycle int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		s.nudge()
		select {
		case <-p.Done():
			require.Error(t, p.Err())
			return
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cycle %d: vanished sender never torn down", cycle)
		}
	}
}

// TestDeadSenderDoesNotDelayOthers: a sender that dies mid-stream is torn
// down while another keeps calling; none of the survivor's calls fails.
func TestDeadSenderDoesNotDelayOthers(t *testing.T) {
	d := openDev(t)
	s := newServer(t, d, WithWorkers(2))
	s.Handle(hEcho, echo)
	ctx := tctx(t)
	alive, _ := dial(t, d, s)
	dead, dp := dial(t, d, s)
	require.NoError(t, echoOnce(ctx, dead, 0))
	require.NoError(t, dead.Close())
	for i := 0; ; i++ {
		require.NoError(t, echoOnce(ctx, alive, i), "survivor's call %d", i)
		if s.Peers() == 1 {
			break
		}
		s.nudge() // the dispatcher writes its epoch to both when it sleeps again
	}
	<-dp.Done()
	require.Error(t, dp.Err())
	for i := 0; i < 100; i++ {
		require.NoError(t, echoOnce(ctx, alive, i))
	}
}

// TestIdleServerParks: once its last sender left, neither the request
// dispatcher nor the QP scheduler runs (an idle server costs no CPU); a
// new sender wakes both.
func TestIdleServerParks(t *testing.T) {
	d := openDev(t)
	s := newServer(t, d)
	s.Handle(hEcho, echo)
	ctx := tctx(t)
	c, p := dial(t, d, s)
	require.NoError(t, echoOnce(ctx, c, 0))
	require.NoError(t, c.Close())
	require.NoError(t, p.Close())
	// Parked means the loop counters stand still: sample until two
	// samples 50 ms apart agree (it takes one spin window to park).
	still := func() bool {
		polls, rounds := s.pollSeq.Load(), s.schedRounds.Load()
		time.Sleep(50 * time.Millisecond)
		return polls == s.pollSeq.Load() && rounds == s.schedRounds.Load()
	}
	eventually(t, still, "dispatcher or QP scheduler still running with no sender")
	// and it stays parked
	require.True(t, still())
	c2, _ := dial(t, d, s)
	require.NoError(t, echoOnce(ctx, c2, 1))
}

// TestPeerCloseUnderLoad: a sender torn down while its callers are busy —
// requests in its ring, responses being posted, renewals arriving — frees
// its resources without disturbing the server; its callers fail (once the
// runtime aborts them, as the closed link makes it) and another sender
// works throughout.
func TestPeerCloseUnderLoad(t *testing.T) {
	for _, mode := range []struct {
		name string
		srv  []Option
	}{{"inline", nil}, {"workers", []Option{WithWorkers(4)}}} {
		t.Run(mode.name, func(t *testing.T) {
			d := openDev(t)
			s := newServer(t, d, append([]Option{WithCredits(4)}, mode.srv...)...)
			s.Handle(hEcho, echo)
			// The guard is against a stuck call, not a slow machine. (It
			// caught Peer.Close stuck 20 s in ibv_dereg_mr on rxe under
			// load: rings were deregistered before the QPs that still held
			// them; see destroyQPsFirst.)
			ctx, progress := progressCtx(t, 10*testTimeout)
			other, _ := dial(t, d, s)
			for round := 0; round < 5; round++ {
				c, p := dial(t, d, s, WithQPs(2))
				started := make(chan struct{}, 16)
				errs := make(chan error, 16)
				for g := 0; g < 16; g++ {
					go func() {
						cl := c.NewCaller()
						var err error
						for i := 0; err == nil; i++ {
							_, err = cl.Call(ctx, hEcho, []byte(fmt.Sprintf("g%02d-%06d", g, i)))
							if err == nil {
								progress()
							}
							if i == 2 {
								started <- struct{}{}
							}
						}
						errs <- err
					}()
				}
				for g := 0; g < 16; g++ {
					<-started
				}
				require.NoError(t, p.Close())
				c.Abort() // what the runtime does when the link closes
				// so no leader waits out the transport's retries to a
				// server that is gone
				for _, l := range c.qps {
					assert.Equal(t, rdma.QPError, l.qp.State())
				}
				for g := 0; g < 16; g++ {
					require.Error(t, <-errs)
					progress()
				}
				require.NoError(t, c.Close())
				require.NoError(t, echoOnce(ctx, other, round))
				progress()
			}
			assert.Equal(t, 1, s.Peers())
		})
	}
}
