package flock

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

const hEcho, hFail = 1, 2

// echo answers with the request reversed, so a response routed to the
// wrong caller or built from the wrong request is detected.
func echo(_ context.Context, req []byte) ([]byte, error) {
	out := make([]byte, len(req))
	for i, b := range req {
		out[len(req)-1-i] = b
	}
	return out, nil
}

func reversed(b []byte) []byte { out, _ := echo(nil, b); return out }

func TestCallsManyGoroutines(t *testing.T) {
	tests := []struct {
		name    string
		g, n    int
		maxSize int
		opts    []Option
		srv     []Option
		// wrap: the request ring must have wrapped (skip messages);
		// headReads: senders must have READ a ring head.
		wrap, headReads bool
		twoDevices      bool
	}{
		{"256x100-flock4", 256, 100, 2048, []Option{WithQPs(4)}, nil, false, false, false},
		{"128x50-flock4-two-devices", 128, 50, 2048, []Option{WithQPs(4)}, nil, false, false, true},
		{"64x100-flock1-small-rings", 64, 100, 512, []Option{WithQPs(1), WithRingSize(16 << 10), WithMaxMessage(4 << 10)},
			[]Option{WithRingSize(16 << 10), WithMaxMessage(4 << 10)}, true, false, false},
		{"64x50-tiny-rings-many-credits", 64, 50, 200, []Option{WithQPs(1), WithRingSize(4096), WithMaxMessage(2048)},
			[]Option{WithRingSize(4096), WithMaxMessage(2048), WithCredits(1024)}, true, true, false},
		{"64x50-worker-pool", 64, 50, 1024, []Option{WithQPs(3)}, []Option{WithWorkers(4)}, false, false, false},
		{"16x100-mutex", 16, 100, 1024, []Option{WithQPs(2), withMutexSharing()}, []Option{withMutexSharing()}, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := openDev(t)
			m := NewMetrics()
			s := newServer(t, d, append([]Option{WithCredits(8), WithMetrics(m)}, tc.srv...)...)
			var seen sync.Map // token -> count
			s.Handle(hEcho, func(ctx context.Context, req []byte) ([]byte, error) {
				v, _ := seen.LoadOrStore(string(req[:8]), new(atomic.Int32))
				v.(*atomic.Int32).Add(1)
				return echo(ctx, req)
			})
			cd := d
			if tc.twoDevices {
				cd = openDev(t)
			}
			c, p := dialFrom(t, d, cd, s, append([]Option{WithMetrics(m)}, tc.opts...)...)
			n := tc.n
			if testenv.Race && tc.g*tc.n > 10000 {
				// 256x100 takes 15-30 s under -race on a loaded 2-core
				// machine; a quarter of the calls keeps all 256 goroutines
				// contending.
				n = tc.n / 4
			}
			// Time is judged by progress, not a fixed deadline: how long the
			// whole run takes depends on the machine's load; a caller that
			// never gets its response still fails it (testTimeout after the
			// last call that completed).
			ctx, progress := progressCtx(t, 10*testTimeout)
			var wg sync.WaitGroup
			errs := make(chan error, tc.g)
			for g := 0; g < tc.g; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := c.NewCaller()
					r := rand.New(rand.NewPCG(uint64(g), 7))
					for i := 0; i < n; i++ {
						req := make([]byte, 8+r.IntN(tc.maxSize))
						binary.LittleEndian.PutUint32(req, uint32(g))
						binary.LittleEndian.PutUint32(req[4:], uint32(i))
						for j := 8; j < len(req); j++ {
							req[j] = byte(r.Uint32())
						}
						resp, err := cl.Call(ctx, hEcho, req)
						if err != nil {
							if cause := context.Cause(ctx); cause != nil {
								err = fmt.Errorf("%w (%v)", err, cause)
							}
							errs <- fmt.Errorf("g%d call %d: %w", g, i, err)
							return
						}
						progress()
						if !bytes.Equal(resp, reversed(req)) {
							errs <- fmt.Errorf("g%d call %d: wrong response", g, i)
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
			count := 0
			seen.Range(func(_, v any) bool {
				count++
				require.Equal(t, int32(1), v.(*atomic.Int32).Load(), "request handled more than once")
				return true
			})
			require.Equal(t, tc.g*n, count)
			st := c.Stats()
			require.Equal(t, uint64(tc.g*n), st.Requests)
			require.Zero(t, s.Violations())
			if tc.wrap {
				ring := &p.qps[0].req
				require.Greater(t, load64(ring.b, ctlHead), ring.size, "request ring never wrapped")
			}
			if tc.headReads {
				require.Positive(t, metricValue(t, m.headReads), "no sender ever READ a ring head")
			}
			t.Logf("messages %d requests %d (%.2f requests/message) migrations %d", st.Messages, st.Requests,
				float64(st.Requests)/float64(st.Messages), st.Migrations)
		})
	}
}

func TestCallErrors(t *testing.T) {
	d := openDev(t)
	s := newServer(t, d)
	s.Handle(hFail, func(context.Context, []byte) ([]byte, error) { return nil, errors.New("boom") })
	c, _ := dial(t, d, s)
	ctx := tctx(t)
	_, err := c.Call(ctx, hFail, []byte("x"))
	var he *HandlerError
	require.ErrorAs(t, err, &he)
	require.Equal(t, "boom", he.Msg)
	_, err = c.Call(ctx, 99, []byte("x"))
	require.ErrorIs(t, err, ErrNoHandler)
	_, err = c.Call(ctx, hFail, make([]byte, 64<<10))
	require.ErrorIs(t, err, ErrTooLarge)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Call(cctx, hFail, []byte("x"))
	require.ErrorIs(t, err, context.Canceled)
	_ = time.Now
}

func TestMetricsExposed(t *testing.T) {
	d := openDev(t)
	m := NewMetrics()
	// No periodic redistribution: once the load ends the QP scheduler
	// may find the sender dormant and leave it one QP (on a slow machine
	// it did, before the gauge was read), so the count is fixed to check.
	s := newServer(t, d, WithMetrics(m), WithSchedInterval(0))
	s.Handle(hEcho, echo)
	c, p := dial(t, d, s, WithQPs(2), WithMetrics(m))
	ctx := tctx(t)
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.NewCaller()
			for i := 0; i < 40; i++ {
				_, err := cl.Call(ctx, hEcho, []byte("metrics"))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	// The names Prometheus sees are checked in flockmetrics.
	snap := m.Snapshot()
	require.ElementsMatch(t, []string{"client", "server"}, slices.Collect(maps.Keys(snap.Sides)))
	clientObs, clientSum := snap.Sides["client"].Degree.Count, snap.Sides["client"].Degree.Sum
	st := c.Stats()
	require.Equal(t, st.Messages, clientObs)
	require.Equal(t, float64(st.Requests), clientSum)
	require.Equal(t, []int{0, 1}, p.ActiveQPs())
	require.Equal(t, 2.0, metricValue(t, m.activeQPs.WithLabelValues("0")))
}

// Callers that give up (deadline or cancellation) while their requests
// wait in the combining queue or in flight, mixed with callers that wait:
// the queue never waits on a caller that left, every waiting caller gets
// its own answer, and nothing stays counted as outstanding.
func TestCallsGivenUpMidQueue(t *testing.T) {
	tests := []struct {
		name string
		srv  []Option
	}{
		{"handlers inline", nil},
		{"worker pool", []Option{WithWorkers(8)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := openDev(t)
			s := newServer(t, d, append([]Option{WithCredits(16)}, tc.srv...)...)
			s.Handle(hEcho, func(ctx context.Context, req []byte) ([]byte, error) {
				time.Sleep(20 * time.Microsecond) // keep requests queued behind each other
				return echo(ctx, req)
			})
			c, _ := dial(t, d, s, WithQPs(2))
			ctx := tctx(t)
			const g, n = 48, 60
			var gaveUp, answered atomic.Int64
			inParallel(t, g, func(i int) error {
				cl := c.NewCaller()
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				for j := 0; j < n; j++ {
					req := binary.BigEndian.AppendUint64(nil, uint64(i)<<32|uint64(j))
					cctx, cancel := ctx, context.CancelFunc(func() {})
					if i%2 == 0 { // half the callers give up after 0-200 µs
						cctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
					}
					resp, err := cl.Call(cctx, hEcho, req)
					cancel()
					switch {
					case err == nil:
						if !bytes.Equal(reversed(req), resp) {
							return fmt.Errorf("caller %d call %d: answer %x for request %x", i, j, resp, req)
						}
						answered.Add(1)
					case i%2 == 0 && errors.Is(err, context.DeadlineExceeded):
						gaveUp.Add(1)
					default:
						return fmt.Errorf("caller %d call %d: %w", i, j, err)
					}
				}
				return nil
			})
			require.Equal(t, int64(g*n), answered.Load()+gaveUp.Load())
			require.Positive(t, gaveUp.Load(), "no call gave up: the test proves nothing")
			// Late answers to the calls given up still arrive and are
			// counted off; after that nothing is outstanding.
			eventually(t, func() bool { return c.outstanding.Load() == 0 }, "calls still outstanding")
			resp, err := c.Call(ctx, hEcho, []byte("after"))
			require.NoError(t, err)
			require.Equal(t, reversed([]byte("after")), resp)
			t.Logf("%d answered, %d given up", answered.Load(), gaveUp.Load())
		})
	}
}
