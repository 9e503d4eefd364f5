package flock

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

var errWrongAnswer = errors.New("answer is not the reversed request")

// A client dispatcher waiting longer than its spin window for slow handlers
// sleeps on the doorbell, and the server's wake-ups reach it: the sleeps
// and the wake-ups both happen, and every call gets its own answer. Run
// for both ways of sharing a QP.
func TestDispatcherSleepsAndIsWoken(t *testing.T) {
	for _, tc := range sharingModes {
		t.Run(tc.name, func(t *testing.T) {
			d := openDev(t)
			m := NewMetrics()
			s := newServer(t, d, append([]Option{WithMetrics(m)}, tc.opts...)...)
			s.Handle(hEcho, func(ctx context.Context, req []byte) ([]byte, error) {
				time.Sleep(2 * time.Millisecond) // well past the dispatcher's spin window
				return echo(ctx, req)
			})
			c, _ := dial(t, d, s, append([]Option{WithQPs(2), WithMetrics(m)}, tc.opts...)...)
			ctx := tctx(t)
			const g, n = 4, 15
			inParallel(t, g, func(i int) error {
				for j := 0; j < n; j++ {
					req := binary.BigEndian.AppendUint32(nil, uint32(i<<16|j))
					resp, err := c.Call(ctx, hEcho, req)
					if err == nil && !bytes.Equal(reversed(req), resp) {
						err = errWrongAnswer
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
			require.NoError(t, c.Close()) // stops the dispatcher: its counters are ours to read
			require.Positive(t, c.bell.sleeps, "the dispatcher never slept")
			require.Positive(t, c.bell.wakes, "no wake-up reached the client")
			require.Positive(t, metricValue(t, m.sleeps))
			require.Positive(t, metricValue(t, m.wakeups))
			require.LessOrEqual(t, c.bell.wakes, c.bell.sleeps+uint64(len(c.qps)*bellRecvs))
			t.Logf("%d sleeps, %d woken by the server", c.bell.sleeps, c.bell.wakes)
		})
	}
}

// An idle server's dispatcher sleeps on the doorbell instead of napping
// every millisecond, and a sender's next request wakes it: every call after
// an idle spell is answered, the server slept, and the wake-ups came from
// the sender. A sender that connects while the dispatcher sleeps is served
// too (it is told the epoch when the dispatcher wakes for it).
func TestIdleServerSleepsAndIsWoken(t *testing.T) {
	for _, tc := range sharingModes {
		t.Run(tc.name, func(t *testing.T) {
			d := openDev(t)
			m := NewMetrics()
			s := newServer(t, d, append([]Option{WithMetrics(m), withIdleSleep(5 * time.Millisecond)}, tc.opts...)...)
			s.Handle(hEcho, echo)
			c, _ := dial(t, d, s, append([]Option{WithQPs(2)}, tc.opts...)...)
			ctx := tctx(t)
			call := func(c *Conn, i int) {
				req := binary.BigEndian.AppendUint32(nil, uint32(i))
				resp, err := c.Call(ctx, hEcho, req)
				require.NoError(t, err)
				require.Equal(t, reversed(req), resp)
			}
			for i := 0; i < 5; i++ {
				before := metricValue(t, m.sleeps)
				eventually(t, func() bool { return metricValue(t, m.sleeps) > before }, "the idle server never slept")
				call(c, i)
			}
			require.Positive(t, metricValue(t, m.wakeups), "no sender woke the server")
			// A newcomer while the dispatcher sleeps.
			before := metricValue(t, m.sleeps)
			eventually(t, func() bool { return metricValue(t, m.sleeps) > before }, "the idle server never slept")
			c2, _ := dial(t, d, s, append([]Option{WithQPs(1)}, tc.opts...)...)
			call(c2, 99)
			call(c, 100)
		})
	}
}

// The adaptive spin: halves each spell that ends in a sleep, doubles back
// when a spin pays, stays within [minSpin, spinWindow], and a spell that
// already gave up does not halve again or count as paid.
func TestSpinnerAdapts(t *testing.T) {
	tests := []struct {
		name   string
		events string // g: a spell gives up (then a message comes); p: a spin pays
		want   time.Duration
	}{
		{"fresh", "", spinWindow},
		{"one sleep", "g", spinWindow / 2},
		{"three sleeps", "ggg", spinWindow / 8},
		{"floor", "gggggggggg", minSpin},
		{"paid back", "ggp", spinWindow / 2},
		{"ceiling", "ppp", spinWindow},
		{"floor then pays", "ggggggggggp", 2 * minSpin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp := newSpinner()
			for _, e := range tc.events {
				require.True(t, sp.spinning(0, time.Now()))
				if e == 'g' {
					sp.giveUp()
					sp.giveUp() // the same spell: no second halving
					require.False(t, sp.spinning(1<<20, time.Now()), "spinning after giving up")
				}
				sp.found(1) // a message ends the spell
			}
			require.Equal(t, tc.want, sp.window)
		})
	}
}

// A writer whose QP broke fails every post at once and drops what was
// queued for it: a dead sender's wake-ups and sleep epochs do not pile up.
func TestBrokenWriterDropsQueued(t *testing.T) {
	broken := &QPError{QP: 0, Err: errWrongAnswer}
	w := ringWriter{broken: broken}
	for i := 0; i < 3; i++ {
		w.wrs = append(w.wrs, rdma.SendWR{WRID: w.nextID()})
		require.ErrorIs(t, w.post(context.Background()), errWrongAnswer)
		require.Empty(t, w.wrs)
	}
}

// TestManyPeersIdleServerSleeps: with more senders than maxBellPeers an
// idle server still goes to sleep on the doorbell (once the rings have
// been quiet long enough to pay for the epoch writes) instead of napping
// every millisecond for as long as the senders stay: its dispatcher stands
// still, and every sender's next call wakes it.
func TestManyPeersIdleServerSleeps(t *testing.T) {
	d := openDev(t)
	m := NewMetrics()
	s := newServer(t, d, WithMetrics(m))
	s.Handle(hEcho, echo)
	// 129 dials and 258 calls take 7 s on rxe under emulation, and 30 s
	// when the host is busy: the guard is against a lost wake-up (no
	// call completing), not a slow machine.
	ctx, progress := progressCtx(t, 10*testTimeout)
	const senders = 2*maxBellPeers + 1
	conns := make([]*Conn, senders)
	for i := range conns {
		conns[i], _ = dial(t, d, s, WithQPs(1))
		require.NoError(t, echoOnce(ctx, conns[i], i))
		progress()
	}
	still := func() bool {
		polls := s.pollSeq.Load()
		time.Sleep(50 * time.Millisecond)
		return polls == s.pollSeq.Load()
	}
	eventually(t, still, "the dispatcher of an idle server with many senders never stands still")
	before := metricValue(t, m.sleeps)
	require.Positive(t, before, "the dispatcher never slept")
	for i, c := range conns {
		require.NoError(t, echoOnce(ctx, c, senders+i))
		progress()
	}
	eventually(t, still, "the dispatcher did not go back to sleep")
}
