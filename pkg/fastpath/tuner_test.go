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
