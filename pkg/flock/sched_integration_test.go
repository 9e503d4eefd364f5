package flock

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// load runs g callers on c until stop closes, each sending size-byte
// requests; it returns the callers.
func load(t *testing.T, c *Conn, g, size int, stop chan struct{}, wg *sync.WaitGroup, errs chan<- error) []*Caller {
	ctx := tctx(t)
	cls := make([]*Caller, g)
	for i := range cls {
		cls[i] = c.NewCaller()
		wg.Add(1)
		go func(cl *Caller) {
			defer wg.Done()
			req := make([]byte, size)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := cl.Call(ctx, hEcho, req); err != nil {
					errs <- err
					return
				}
			}
		}(cls[i])
	}
	return cls
}

func TestTornMessageNeverDelivered(t *testing.T) {
	d := openDev(t)
	s := newServer(t, d)
	var calls atomic.Int32
	s.Handle(hEcho, func(ctx context.Context, req []byte) ([]byte, error) {
		calls.Add(1)
		return echo(ctx, req)
	})
	c, p := dial(t, d, s, WithQPs(1))
	ring := &p.qps[0].req
	msg := encodeMessage(header{canary: 0x1234}, []entry{{caller: 999, seq: 1, handler: hEcho, data: []byte("torn")}})
	good := binary.LittleEndian.Uint64(msg[len(msg)-8:])
	binary.LittleEndian.PutUint64(msg[len(msg)-8:], 0x4321)
	copy(ring.b[ctlLen:], msg)

	time.Sleep(30 * time.Millisecond)
	require.Zero(t, calls.Load(), "a message with a bad trailing canary was delivered")
	require.Zero(t, load64(ring.b, ctlHead), "the ring head moved past a torn message")

	store64(ring.b, ctlLen+uint64(len(msg))-8, good)
	eventually(t, func() bool { return calls.Load() == 1 }, "completed message not delivered")
	slot := alignUp(uint64(len(msg)), msgAlign)
	eventually(t, func() bool { return load64(ring.b, ctlHead) == slot }, "head not advanced")
	eventually(t, func() bool { return c.Stats().Stale == 1 }, "response to the unknown caller not dropped")
	// The injected message used the ring space the client would have used
	// next; account for it so the real sender stays in step.
	c.qps[0].w.tail = slot
	resp, err := c.Call(tctx(t), hEcho, []byte("after"))
	require.NoError(t, err)
	require.Equal(t, []byte("retfa"), resp)
	require.Equal(t, int32(2), calls.Load())
}

func TestCreditsNeverExceedGrant(t *testing.T) {
	d := openDev(t)
	m := NewMetrics()
	s := newServer(t, d, WithCredits(4), WithMetrics(m))
	s.Handle(hEcho, echo)
	c, p := dial(t, d, s, WithQPs(4), WithMetrics(m))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	load(t, c, 64, 32, stop, &wg, errs)
	deadline := time.Now().Add(200 * time.Millisecond)
	samples := 0
	for time.Now().Before(deadline) {
		for q := 0; q < c.QPs(); q++ {
			g, r := p.Credits(q)
			require.LessOrEqual(t, r, g, "qp %d received more requests than granted", q)
		}
		samples++
		time.Sleep(200 * time.Microsecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, s.Violations())
	granted := metricValue(t, m.creditsGranted)
	require.Greater(t, granted, 10.0, "credits were never renewed")
	st := c.Stats()
	t.Logf("%d samples, %d requests, %.0f renewals granted, %.0f declined", samples, st.Requests, granted,
		metricValue(t, m.creditsDeclined))
	var total uint64
	for q := 0; q < c.QPs(); q++ {
		g, r := p.Credits(q)
		require.LessOrEqual(t, r, g)
		total += r
	}
	require.Equal(t, st.Requests, total)
}

func TestQPSchedulerLimitsAndDormant(t *testing.T) {
	const maxAQP, senders, qps = 10, 5, 4
	d := openDev(t)
	m := NewMetrics()
	s := newServer(t, d, WithMaxActiveQPs(maxAQP), WithSchedInterval(5*time.Millisecond), WithMetrics(m))
	s.Handle(hEcho, echo)
	conns := make([]*Conn, senders)
	peers := make([]*Peer, senders)
	// Every change of the active flags happens under schedMu, one
	// redistribution at a time; reading them under it too sees each
	// round whole (reading peer by peer without it could count a QP the
	// round moved from one sender to another twice).
	activeSum := func() int {
		s.schedMu.Lock()
		defer s.schedMu.Unlock()
		n := 0
		for _, p := range peers {
			if p != nil {
				n += len(p.ActiveQPs())
			}
		}
		return n
	}
	for i := range conns {
		conns[i], peers[i] = dial(t, d, s, WithQPs(qps), WithMetrics(m))
		require.LessOrEqual(t, activeSum(), maxAQP)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	load(t, conns[0], 16, 64, stop, &wg, errs)
	load(t, conns[1], 16, 64, stop, &wg, errs)
	// On this shared machine a busy sender can go a whole interval without
	// a renewal (and so count as dormant for one round), so the busy ones
	// are judged by the most QPs they held.
	// Sample for at least 200ms, and on a loaded machine until both busy
	// senders have been seen with more than one QP (or testTimeout).
	maxBusy := [2]int{}
	start := time.Now()
	for time.Since(start) < 200*time.Millisecond || (min(maxBusy[0], maxBusy[1]) <= 1 && time.Since(start) < testTimeout) {
		require.LessOrEqual(t, activeSum(), maxAQP)
		for i := range maxBusy {
			maxBusy[i] = max(maxBusy[i], len(peers[i].ActiveQPs()))
		}
		time.Sleep(200 * time.Microsecond)
	}
	for i := 2; i < senders; i++ {
		require.Equal(t, []int{0}, peers[i].ActiveQPs(), "dormant sender %d", i)
		eventually(t, func() bool { return len(conns[i].ActiveQPs()) == 1 }, "client view of a dormant sender")
	}
	for i := range maxBusy {
		require.Greater(t, maxBusy[i], 1, "busy sender %d", i)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, s.Violations())
	require.Equal(t, 1.0, metricValue(t, m.activeQPs.WithLabelValues("4")))
	t.Logf("busy senders held up to %v QPs; declined renewals %.0f", maxBusy,
		metricValue(t, m.creditsDeclined))
}

func TestGoroutineSchedulerSeparatesLargeFromSmall(t *testing.T) {
	d := openDev(t)
	m := NewMetrics()
	s := newServer(t, d, WithMetrics(m))
	s.Handle(hEcho, func(context.Context, []byte) ([]byte, error) { return []byte("ok"), nil })
	c, _ := dial(t, d, s, WithQPs(4), WithSchedInterval(5*time.Millisecond), WithMetrics(m))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	small := load(t, c, 12, 64, stop, &wg, errs)
	large := load(t, c, 4, 16<<10, stop, &wg, errs)
	qpsOf := func(cls []*Caller) map[int]bool {
		out := map[int]bool{}
		for _, cl := range cls {
			out[cl.QP()] = true
		}
		return out
	}
	// Judge the scheduler at a settled point, not at a fixed time: on a
	// loaded machine the first rounds may not have run yet, the server may
	// briefly deactivate QPs (a busy sender that sent no renewal in one of
	// its intervals counts as dormant), which forces every caller onto the
	// QPs left, and a caller takes a new assignment only with its next
	// call. Settled: every QP active, at least two assignment rounds done,
	// no round ran while sampling, and every caller on the QP the last
	// round assigned it (no migration pending). The scheduler must then
	// keep small and large callers on different QPs.
	all := make([]*Caller, 0, len(small)+len(large))
	all = append(append(all, small...), large...)
	var sq, lq map[int]bool
	settled, pending := 0, 0
	separated := func() bool {
		if len(c.ActiveQPs()) != c.QPs() {
			return false
		}
		r := c.rounds.Load()
		if r < 2 {
			return false
		}
		pending = 0
		for _, cl := range all {
			if cl.qp.Load() != cl.assigned.Load() {
				pending++
			}
		}
		sm, lg := qpsOf(small), qpsOf(large)
		if pending > 0 || c.rounds.Load() != r || len(c.ActiveQPs()) != c.QPs() {
			return false
		}
		settled++
		sq, lq = sm, lg
		for q := range sq {
			if lq[q] {
				return false
			}
		}
		return true
	}
	ok := false
	for deadline := time.Now().Add(testTimeout); !ok && time.Now().Before(deadline); {
		if ok = separated(); !ok {
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, settled, "the assignment never settled (%d migrations pending at the last sample)", pending)
	require.True(t, ok, "a QP carries small and large callers at every settled point (last: small %v, large %v)",
		sq, lq)
	require.Positive(t, c.Stats().Migrations)
	require.Equal(t, float64(c.Stats().Migrations), metricValue(t, m.migrations))
	t.Logf("small callers on %v, large on %v after %d settled samples, %d rounds, %d migrations", sq, lq,
		settled, c.rounds.Load(), c.Stats().Migrations)
}

// A renewal on a QP the server has deactivated is declined; the sender
// learns it from the decline (or from the inactive flag every response on
// that QP carries), never gets more credits there, and its callers move to
// an active QP.
func TestDeclinedRenewalDeactivates(t *testing.T) {
	const credits = 4
	d := openDev(t)
	m := NewMetrics()
	s := newServer(t, d, WithCredits(credits), WithSchedInterval(0), WithMetrics(m))
	s.Handle(hEcho, echo)
	c, p := dial(t, d, s, WithQPs(2), WithSchedInterval(0), WithMetrics(m))
	// Server side only: the sender is not told, so it finds out by asking.
	p.qps[1].active.Store(false)
	// Act as QP 1's leader (nobody else uses it yet) and ask for credits.
	l := c.qps[1]
	l.addRenewal()
	require.NoError(t, l.w.post(tctx(t)))
	eventually(t, func() bool { return metricValue(t, m.creditsDeclined) == 1 }, "renewal not declined")
	eventually(t, func() bool { return len(c.ActiveQPs()) == 1 }, "sender not told")
	require.Equal(t, []int{0}, c.ActiveQPs())
	require.Equal(t, uint64(1), l.answered.Load())

	ctx := tctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	cls := []*Caller{c.NewCaller(), c.NewCaller()}
	require.Equal(t, 1, cls[1].QP())
	for _, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := cl.Call(ctx, hEcho, []byte{byte(i)}); err != nil {
					// Seen once on ibv (CI, 2026-11-25) and not since:
					// the state of a hang, taken while it lasts.
					if errors.Is(err, context.DeadlineExceeded) {
						buf := make([]byte, 1<<20)
						t.Logf("caller on QP %d, call %d: %v; client %+v active %v; goroutines:\n%s",
							cl.QP(), i, err, c.Stats(), c.ActiveQPs(), buf[:runtime.Stack(buf, true)])
					}
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
	require.Equal(t, 0, cls[1].QP())
	require.Positive(t, c.Stats().Migrations)
	g, r := p.Credits(1)
	require.Equal(t, uint64(credits), g, "a deactivated QP got more credits")
	require.Zero(t, r)
	require.Zero(t, s.Violations())
}

func TestClosedConn(t *testing.T) {
	d := openDev(t)
	s := newServer(t, d)
	s.Handle(hEcho, echo)
	c, _ := dial(t, d, s)
	_, err := c.Call(tctx(t), hEcho, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = c.Call(tctx(t), hEcho, []byte("x"))
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, c.Close(), ErrClosed)
}
