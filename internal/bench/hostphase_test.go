package bench

import (
	"bytes"
	"context"
	"errors"
	"runtime"
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
		name      string
		floor     time.Duration // seeded by a first Check, 0: none
		rtts      []time.Duration
		wantRTT   time.Duration
		wantCalls int
		wantFloor time.Duration
	}{
		{name: "first probe sets the floor", rtts: []time.Duration{520 * ns}, wantRTT: 520 * ns, wantCalls: 1, wantFloor: 520 * ns},
		{name: "at the floor", floor: 120 * ns, rtts: []time.Duration{130 * ns}, wantRTT: 130 * ns, wantCalls: 1, wantFloor: 120 * ns},
		{name: "within the factor", floor: 120 * ns, rtts: []time.Duration{300 * ns}, wantRTT: 300 * ns, wantCalls: 1, wantFloor: 120 * ns},
		{name: "slow, then the floor", floor: 120 * ns, rtts: []time.Duration{520 * ns, 540 * ns, 125 * ns}, wantRTT: 125 * ns, wantCalls: 3, wantFloor: 120 * ns},
		{name: "a new floor", floor: 200 * ns, rtts: []time.Duration{110 * ns}, wantRTT: 110 * ns, wantCalls: 1, wantFloor: 110 * ns},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probe, calls := seqProbe(tt.rtts...)
			g := &HostGate{Probe: probe, Wait: time.Hour, Every: time.Microsecond, Factor: 2.5}
			if tt.floor > 0 {
				g.floor = tt.floor
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rtt, _, err := g.Ready(ctx)
			require.NoError(t, err)
			assert.Equal(t, tt.wantRTT, rtt)
			assert.Equal(t, tt.wantCalls, *calls)
			assert.Equal(t, tt.wantFloor, g.Floor())
		})
	}
}

func TestHostGateGivesUp(t *testing.T) {
	probe, calls := seqProbe(100, 900)
	g := &HostGate{Probe: probe, Wait: 20 * time.Millisecond, Every: time.Millisecond, Factor: 2.5}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, ok, err := g.Check(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	rtt, waited, err := g.Ready(ctx)
	require.NoError(t, err, "a host that stays slow is measured anyway, after Wait")
	assert.Equal(t, time.Duration(900), rtt)
	assert.GreaterOrEqual(t, waited, 20*time.Millisecond)
	assert.Greater(t, *calls, 2)

	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	g.Wait = time.Hour
	_, _, err = g.Ready(cctx)
	require.ErrorIs(t, err, context.Canceled)

	boom := errors.New("boom")
	g.Probe = func(context.Context) (time.Duration, error) { return 0, boom }
	_, _, err = g.Ready(ctx)
	require.ErrorIs(t, err, boom)
}

// TestDriverHostNotes: what the rep lines say, and a probe that fails
// turns the gate off once, with the reason, instead of failing the sweep.
func TestDriverHostNotes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	probe, _ := seqProbe(120, 130, 900, 900, 125, 700)
	var log bytes.Buffer
	d := Driver{Log: &log, Gate: &HostGate{Probe: probe, Wait: time.Hour, Every: time.Microsecond, Factor: 2.5}}
	for _, want := range []struct{ before, after string }{
		{" line 120ns", "/130ns"},
		{" line 125ns (waited 0s for the floor)", "/700ns (slow: floor 120ns)"},
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
	assert.Equal(t, " line 900ns (still slow after 0s: floor 120ns)", before)

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
