package fastpath

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestLoadOf: the load the tree decides by leaves the lanes' polling
// out: a lane spinning a process's one core full is no load.
func TestLoadOf(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name            string
		cpu, spun, wall time.Duration
		cores           int
		want            float64
	}{
		{"no polling: the CPU share", 15 * ms, 0, 10 * ms, 2, 0.75},
		{"one core spun full: none", 10 * ms, 10 * ms, 10 * ms, 1, 0},
		{"one core, spun a third", 9 * ms, 3 * ms, 10 * ms, 1, 0.6},
		{"two cores, one spinning, one working", 20 * ms, 10 * ms, 10 * ms, 2, 0.5},
		{"spun estimated past the CPU: none, not below", 5 * ms, 6 * ms, 10 * ms, 2, 0},
		{"no wall time: none", 5 * ms, 0, 0, 2, 0},
		{"no cores: none", 5 * ms, 0, 10 * ms, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, loadOf(tc.cpu, tc.spun, tc.wall, tc.cores), 1e-9)
		})
	}
}

// TestTunerLeavesPollingOut: a process burning CPU shows load, and none
// while its lane's polling accounts for all of its CPU time.
func TestTunerLeavesPollingOut(t *testing.T) {
	burn := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for x := 0; ; x++ {
			select {
			case <-burn:
				return
			default:
			}
		}
	}()
	defer func() { close(burn); <-done }()
	a := &spinRec{}
	ua := RegisterAdaptive(a)
	defer ua()
	w := &waitRec{}
	uw := CountWaits(w)
	require.Eventually(t, func() bool { return Polling().Load > 0 },
		testenv.HangGuard(10*time.Second), tunePeriod, "a goroutine burning CPU is load")
	uw()
	// The lane reports twice the process's CPU time as its polling
	// (read a moment after the tuner reads the CPU time, it is no less).
	base := cpuTime()
	w = &waitRec{spun: func() time.Duration { return 2 * (cpuTime() - base) }}
	uw = CountWaits(w)
	defer uw()
	require.Eventually(t, func() bool { return Polling().Load == 0 },
		testenv.HangGuard(10*time.Second), tunePeriod, "polling is no load")
}

func TestNextPeriod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cur     time.Duration
		d       int
		changed bool
		want    time.Duration
	}{
		{"spin held: doubles", tunePeriod, DecideSpin, false, 2 * tunePeriod},
		{"spin held again: doubles", 4 * tunePeriod, DecideSpin, false, 8 * tunePeriod},
		{"spin held at the bound: stays", tuneMaxPeriod, DecideSpin, false, tuneMaxPeriod},
		{"spin held near the bound: capped", tuneMaxPeriod - time.Millisecond, DecideSpin, false, tuneMaxPeriod},
		{"changed to spin: back to the start", tuneMaxPeriod, DecideSpin, true, tunePeriod},
		{"short spin held: the start", 4 * tunePeriod, DecideShort, false, tunePeriod},
		{"block held: the start", tunePeriod, DecideBlock, false, tunePeriod},
		{"changed at the start: stays", tunePeriod, DecideBlock, true, tunePeriod},
		{"unset: the start", 0, DecideSpin, false, tunePeriod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, nextPeriod(tc.cur, tc.d, tc.changed))
		})
	}
}

// TestTunerBacksOff: while DecideSpin holds the tuner ticks less often
// (each tick wakes a thread that preempts a spinning poller), and a lane
// that comes cuts a backed-off period short, so the tuner sees it within
// tunePeriod.
func TestTunerBacksOff(t *testing.T) {
	a := &spinRec{}
	ua := RegisterAdaptive(a)
	defer ua()
	// An idle test process decides DecideSpin tick after tick; a loaded
	// host may flip a decision now and then, which only delays this.
	require.Eventually(t, func() bool { return tune.period.Load() > int64(tunePeriod) },
		testenv.HangGuard(10*time.Second), tunePeriod, "the period grows while the decision holds")
	resets := tune.resets.Load()
	w := &waitRec{}
	uw := CountWaits(w)
	defer uw()
	require.Eventually(t, func() bool { return tune.resets.Load() > resets || tune.period.Load() == int64(tunePeriod) },
		testenv.HangGuard(10*time.Second), time.Millisecond, "a new lane brings the period back to tunePeriod")
	require.LessOrEqual(t, tune.period.Load(), int64(tuneMaxPeriod))
}

// What explain tells a user about the tuner (hints' tuner_spin trigger)
// names the figures Decide and the spins use: a changed constant that
// leaves the text behind fails here.
func TestTunerSpinExplained(t *testing.T) {
	pct := fmt.Sprintf("%.0f%%", saturated*100)
	for _, tc := range []struct {
		name    string
		polling hints.Polling
		want    []string
	}{
		{"adaptive", hints.PollAdaptive, []string{
			hints.FormatDuration(tunePeriod) + " ", hints.FormatDuration(tuneMaxPeriod) + " ",
			hints.FormatDuration(AdaptiveSpin) + " while fewer lanes wait", hints.FormatDuration(ShortSpin) + " while no more lanes wait",
			"under " + pct, "more lanes than cores, only while fewer goroutines queue",
		}},
		{"busy", hints.PollBusy, []string{
			"spins " + hints.FormatDuration(BusySpin) + " before blocking", "more lanes waiting in C than cores",
			"at " + pct + " or more", "more lanes than cores with as many goroutines queued",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := hints.TableFor(hints.Set{Polling: tc.polling}, hints.Env{Side: hints.SideClient, Transport: hints.TransportSHM, Cores: 2})
			i := slices.IndexFunc(tb.Adapts, func(a hints.Adapt) bool { return a.What == hints.AdaptTunerSpin })
			require.GreaterOrEqual(t, i, 0, "a %s table adapts tuner_spin", tc.name)
			for _, w := range tc.want {
				require.Contains(t, tb.Adapts[i].Trigger, w)
			}
		})
	}
}
