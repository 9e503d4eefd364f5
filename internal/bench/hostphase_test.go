package bench

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seqProbe answers the round trips in rtts, one a probe, repeating the last.
func seqProbe(rtts ...time.Duration) (func(context.Context) (time.Duration, error), *int) {
	n := new(int)
	return func(context.Context) (time.Duration, error) {
		i := min(*n, len(rtts)-1)
		*n++
		return rtts[i], nil
	}, n
}

func TestHostGateReady(t *testing.T) {
	const ns = time.Nanosecond
	tests := []struct {
		name        string
		seen        []time.Duration // earlier probes
		rtts        []time.Duration
		wantRTT     time.Duration
		wantCalls   int
		wantTypical time.Duration
	}{
		{name: "the first probe is typical", rtts: []time.Duration{520 * ns}, wantRTT: 520 * ns, wantCalls: 1, wantTypical: 520 * ns},
		{name: "typical", seen: []time.Duration{120 * ns, 130 * ns}, rtts: []time.Duration{125 * ns}, wantRTT: 125 * ns, wantCalls: 1, wantTypical: 120 * ns},
		{name: "within the factor", seen: []time.Duration{120 * ns, 120 * ns}, rtts: []time.Duration{290 * ns}, wantRTT: 290 * ns, wantCalls: 1, wantTypical: 120 * ns},
		// The slow probes count too: a phase that lasts moves the reference.
		{name: "slow, then typical", seen: []time.Duration{120 * ns, 125 * ns, 130 * ns}, rtts: []time.Duration{520 * ns, 540 * ns, 125 * ns},
			wantRTT: 125 * ns, wantCalls: 3, wantTypical: 125 * ns},
		// One probe on hyperthreads of one core (~50 ns) is no reference:
		// the usual ~120 ns stays typical after it.
		{name: "a fast outlier", seen: []time.Duration{120 * ns, 125 * ns, 50 * ns, 130 * ns}, rtts: []time.Duration{122 * ns},
			wantRTT: 122 * ns, wantCalls: 1, wantTypical: 120 * ns},
		// A noisy stretch (2026-11-29): most probes at the ~215 ns level or
		// slow put the median at 215 ns, and 535 ns passed as within 2.5
		// times it; the first quartile stays at the usual level.
		{name: "a noisy stretch", seen: slices.Concat(slices.Repeat([]time.Duration{130 * ns}, 5),
			slices.Repeat([]time.Duration{215 * ns}, 6), slices.Repeat([]time.Duration{525 * ns}, 4)),
			rtts: []time.Duration{535 * ns, 230 * ns}, wantRTT: 230 * ns, wantCalls: 2, wantTypical: 130 * ns},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probe, calls := seqProbe(tt.rtts...)
			g := &HostGate{Probe: probe, Wait: time.Hour, Every: time.Microsecond, Factor: 2.5, seen: slices.Clone(tt.seen)}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rtt, _, ok, err := g.Ready(ctx)
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, tt.wantRTT, rtt)
			assert.Equal(t, tt.wantCalls, *calls)
			assert.Equal(t, tt.wantTypical, g.Typical())
		})
	}
}

// TestHostGateHistory: the typical round trip follows the last probes, so a
// host that settles at another level is not waited on for ever: once three
// quarters of the history is at the new level.
func TestHostGateHistory(t *testing.T) {
	probe, _ := seqProbe(100)
	g := &HostGate{Probe: probe, Factor: 2.5}
	ctx := context.Background()
	for range gateHistory {
		_, ok, err := g.Check(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	}
	g.Probe, _ = seqProbe(500)
	slow := 0
	for range gateHistory {
		_, ok, err := g.Check(ctx)
		require.NoError(t, err)
		if !ok {
			slow++
		}
	}
	assert.Equal(t, gateHistory*3/4-1, slow, "slow while more than a quarter of the history is at the old level")
	assert.Len(t, g.seen, gateHistory)
	assert.Equal(t, time.Duration(500), g.Typical())
}

func TestHostGateGivesUp(t *testing.T) {
	probe, calls := seqProbe(100, 900)
	g := &HostGate{Probe: probe, Wait: 20 * time.Millisecond, Every: time.Millisecond, Factor: 2.5}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, ok, err := g.Check(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	for range 60 { // a run's worth of typical probes
		g.seen = append(g.seen, 100)
	}
	rtt, waited, ok, err := g.Ready(ctx)
	require.NoError(t, err, "a host that stays slow is measured anyway, after Wait")
	assert.False(t, ok, "still slow when Wait ran out")
	assert.Equal(t, time.Duration(900), rtt)
	assert.GreaterOrEqual(t, waited, 20*time.Millisecond)
	assert.Greater(t, *calls, 2)

	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	g.seen = []time.Duration{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}
	g.Wait = time.Hour
	_, _, _, err = g.Ready(cctx)
	require.ErrorIs(t, err, context.Canceled)

	boom := errors.New("boom")
	g.Probe = func(context.Context) (time.Duration, error) { return 0, boom }
	_, _, _, err = g.Ready(ctx)
	require.ErrorIs(t, err, boom)
}

// TestDriverHostNotes: what the rep lines say, and a probe that fails
// turns the gate off once, with the reason, instead of failing the sweep.
func TestDriverHostNotes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log bytes.Buffer
	probe, _ := seqProbe(120, 130, 900, 900, 125, 700)
	gate := &HostGate{Probe: probe, Wait: time.Hour, Every: time.Microsecond, Factor: 2.5, seen: []time.Duration{125, 125, 125, 125}}
	d := Driver{Log: &log, Gate: gate}
	for _, want := range []struct{ before, after string }{
		{" line 120ns", "/130ns"},
		{" line 125ns (waited 0s for a typical one)", "/700ns (slow: typical 125ns)"},
	} {
		before, err := d.hostReady(ctx)
		require.NoError(t, err)
		after, err := d.hostAfter(ctx)
		require.NoError(t, err)
		assert.Equal(t, want.before, before)
		assert.Equal(t, want.after, after)
	}

	d.Gate.Wait = 0
	d.Gate.Probe, _ = seqProbe(900)
	before, err := d.hostReady(ctx)
	require.NoError(t, err)
	assert.Equal(t, " line 900ns (still slow after 0s: typical 125ns)", before)

	d.Gate.Probe = func(context.Context) (time.Duration, error) { return 0, ErrNoLineProbe }
	before, err = d.hostReady(ctx)
	require.NoError(t, err)
	assert.Empty(t, before)
	assert.Nil(t, d.Gate)
	assert.Contains(t, log.String(), "host check off: "+ErrNoLineProbe.Error())
	after, err := d.hostAfter(ctx)
	require.NoError(t, err)
	assert.Empty(t, after)
}

// TestLineRTT measures the real thing between CPUs 0 and 1 (CI has two),
// under a limit a loaded machine does not reach.
func TestLineRTT(t *testing.T) {
	old := lineProbeLimit
	lineProbeLimit = 2 * time.Minute
	defer func() { lineProbeLimit = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if runtime.NumCPU() < 2 || runtime.GOMAXPROCS(0) < 2 {
		_, err := LineRTT(ctx, 0, 1, 100)
		require.ErrorIs(t, err, ErrNoLineProbe)
		return
	}
	rtt, err := LineRTT(ctx, 0, 1, 1000)
	require.NoError(t, err)
	assert.Positive(t, rtt)
	_, err = LineRTT(ctx, 1, 1, 100)
	require.ErrorIs(t, err, ErrNoLineProbe, "one CPU is no pair")
	_, err = LineRTT(ctx, 0, 4096, 100)
	require.Error(t, err, "a CPU that is not there cannot be pinned to")
}
