package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The host of a VM moves its vCPUs, and for seconds at a time the two CPUs
// a benchmark runs on can be placed far apart: one cache line's round trip
// between them triples (measured on this project's VM, 2026-11-28, with
// `make -C pkg/rdma phases`: 160-180 ns, then 480-560 ns for 1-20 s), and
// everything that moves lines between the two processes slows with it
// (shm SEND/RECV 64 B ~480 -> ~980 ns, in 950 of 951 such windows). A
// latency repetition taken in such a phase measures the host, not the
// system, so the driver waits for the line to come back to its usual
// round trip before each measurement (HostGate), and logs the round trip
// before and after it.

// ErrNoLineProbe is returned when a line round trip cannot be measured
// here (fewer than two CPUs to pin to, or a single P).
var ErrNoLineProbe = errors.New("bench: cannot measure a cache line's round trip between two CPUs here")

// lineProbeLimit bounds one probe (and the context's deadline, if
// sooner): a probe whose two threads cannot both run (a CPU taken by other
// load) gives up instead of spinning on. A variable for the tests, which
// run on loaded machines.
var lineProbeLimit = 2 * time.Second

// LineRTT measures one cache line's round trip between a thread pinned to
// CPU a and one pinned to CPU b: the least mean of five chunks of trips/5
// round trips, so one preemption does not decide it.
func LineRTT(ctx context.Context, a, b, trips int) (time.Duration, error) {
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 || a == b {
		return 0, ErrNoLineProbe
	}
	chunk := max(trips/5, 1)
	var l struct {
		ping atomic.Uint64
		_    [120]byte // the two words on lines of their own
		pong atomic.Uint64
		_    [120]byte
		stop atomic.Bool
	}
	deadline := time.Now().Add(lineProbeLimit)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	echoErr := make(chan error, 1)
	go func() {
		// Exiting while locked ends the thread, so its pinning does not
		// reach the runtime's other goroutines.
		runtime.LockOSThread()
		if err := pinThread(b); err != nil {
			echoErr <- err
			return
		}
		echoErr <- nil
		for i := uint64(1); i <= uint64(chunk*5); i++ {
			for l.ping.Load() != i {
				if l.stop.Load() {
					return
				}
			}
			l.pong.Store(i)
		}
	}()
	type result struct {
		best time.Duration
		err  error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := <-echoErr; err != nil {
			res <- result{err: err}
			return
		}
		if err := pinThread(a); err != nil {
			l.stop.Store(true)
			res <- result{err: err}
			return
		}
		best := time.Duration(0)
		i := uint64(0)
		for c := 0; c < 5; c++ {
			t0 := time.Now()
			for range chunk {
				i++
				l.ping.Store(i)
				for n := 0; l.pong.Load() != i; n++ {
					if n&0xffff != 0xffff {
						continue
					}
					err := ctx.Err()
					if err == nil && time.Now().After(deadline) {
						err = fmt.Errorf("bench: line probe between CPUs %d and %d: no answer by %v", a, b, deadline.Format(time.TimeOnly))
					}
					if err != nil {
						l.stop.Store(true)
						res <- result{err: err}
						return
					}
				}
			}
			if m := time.Since(t0) / time.Duration(chunk); best == 0 || m < best {
				best = m
			}
		}
		res <- result{best: best}
	}()
	r := <-res
	return r.best, r.err
}

func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bench: pin a probe thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// HostGate holds a measurement until the host is out of a slow phase:
// the line's round trip within Factor of its typical value (the first
// quartile of the last probes), or Wait passed.
type HostGate struct {
	Probe  func(ctx context.Context) (time.Duration, error)
	Wait   time.Duration // longest wait per measurement
	Every  time.Duration // pause between probes while waiting
	Factor float64       // slow: more than Factor times the typical round trip

	seen []time.Duration // the last gateHistory probes, oldest first
}

// gateHistory is how many probes the typical round trip is taken from.
const gateHistory = 64

// DefaultHostWait is the longest a measurement waits. Slow phases
// measured here lasted 1-20 s and took ~10 % of the time; a sweep has
// hundreds of measurements, so the wait stays bounded well below its
// -timeout even when the host stays slow.
const DefaultHostWait = 10 * time.Second

// NewHostGate probes the line between CPUs a and b with 2000 round trips
// (well under a millisecond normally). The probe's means sit at four
// levels here: ~50 ns (now and then: the two vCPUs on one core's
// hyperthreads), ~115-135, ~190-235 and 470-730 ns, the last the slow
// phase. The least seen is no reference (a run that once saw 50 ns would
// then wait on every normal probe), nor is the median: in a noisy stretch
// (2026-11-29 00:05) most probes were at ~215 ns or slow, the median rose
// to ~215 ns, and probes of 513-535 ns passed as within 2.5 times it. The
// first quartile stays at the usual level until three quarters of the
// history has left it (670 probes then: p25 131 ns, median 143; 4 % at
// ~50 ns, 11 % slow, and a repetition measured after a slow probe took
// 2.0 times its system's best, after a ~215 ns one 1.29, after a ~130 ns
// one 1.25): slow is more than 2.5 times it.
func NewHostGate(a, b int, wait time.Duration) *HostGate {
	return &HostGate{
		Probe:  func(ctx context.Context) (time.Duration, error) { return LineRTT(ctx, a, b, 2000) },
		Wait:   wait,
		Every:  100 * time.Millisecond,
		Factor: 2.5,
	}
}

// Typical is the first quartile of the last probes (0 before the first).
func (g *HostGate) Typical() time.Duration {
	if len(g.seen) == 0 {
		return 0
	}
	s := slices.Clone(g.seen)
	slices.Sort(s)
	return s[len(s)/4]
}

// Check probes once and reports the round trip and whether it is
// typical (within Factor of Typical, this probe included).
func (g *HostGate) Check(ctx context.Context) (time.Duration, bool, error) {
	rtt, err := g.Probe(ctx)
	if err != nil {
		return 0, false, err
	}
	if len(g.seen) == gateHistory {
		g.seen = append(g.seen[:0], g.seen[1:]...)
	}
	g.seen = append(g.seen, rtt)
	return rtt, float64(rtt) <= g.Factor*float64(g.Typical()), nil
}

// Ready probes until the line's round trip is typical or Wait has passed, and
// returns the last round trip, how long it waited (0: the first probe was
// typical) and whether the last probe was typical (false: Wait ran out).
func (g *HostGate) Ready(ctx context.Context) (rtt, waited time.Duration, ok bool, err error) {
	start := time.Now()
	for first := true; ; first = false {
		rtt, ok, err = g.Check(ctx)
		if first && (ok || err != nil) {
			return rtt, 0, ok, err
		}
		waited = time.Since(start)
		if err != nil || ok || waited >= g.Wait {
			return rtt, waited, ok, err
		}
		t := time.NewTimer(g.Every)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return rtt, waited, false, ctx.Err()
		}
	}
}
