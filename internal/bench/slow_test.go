package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// TestOverCounts: calls are counted past each of SlowEdges, a value at an
// edge not (buckets are 8 ns wide there, so 5.01 µs is past 5).
func TestOverCounts(t *testing.T) {
	tests := []struct {
		name string
		vals []time.Duration
		want [len(SlowEdges)]int64
	}{
		{"none", []time.Duration{time.Microsecond, 2 * time.Microsecond}, [3]int64{}},
		{"at the edges", []time.Duration{5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond}, [3]int64{2, 1, 0}},
		{"past each", []time.Duration{5010 * time.Nanosecond, 10020 * time.Nanosecond, 20040 * time.Nanosecond, time.Millisecond}, [3]int64{4, 3, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistogram()
			for _, v := range tt.vals {
				require.NoError(t, h.RecordValue(int64(v)))
			}
			assert.Equal(t, tt.want, overCounts(h))
		})
	}
}

// TestSlowRates: the tail goal's line says in how many repetitions the
// lanes met it and sets the host's floors beside them (a floor with work
// with its own ratio and count), and is followed by the lanes', the best
// engine system's and the floors' interruptions per millisecond of calls,
// summed over repetitions; a row read from a CSV has none.
func TestSlowRates(t *testing.T) {
	imm := Engine{Proto: rdma.ProtoDirectWriteIMM}.Name()
	eager := Engine{Proto: rdma.ProtoEager}.Name()
	lanes := Hat{Lanes: true}.Name()
	padded := Floor{Work: 800 * time.Nanosecond}.Name()
	row := LatencyRow{Placement: "unpinned", Size: 64, By: map[string]LatencyResult{
		imm:       {P50: 1000 * time.Nanosecond},
		eager:     {P50: 1100 * time.Nanosecond},
		lanes:     {P50: 1400 * time.Nanosecond, P999: 14 * time.Microsecond},
		padded:    {P50: 1300 * time.Nanosecond, P999: 13 * time.Microsecond},
		FloorName: {P50: 500 * time.Nanosecond, P999: 2 * time.Microsecond},
	}}
	// rep is a repetition of p50 1 µs and the given p99.9 in µs.
	rep := func(calls int64, ms int, p999 time.Duration, over ...int64) LatencyResult {
		return LatencyResult{Calls: calls, Elapsed: time.Duration(ms) * time.Millisecond, Over: [3]int64(over),
			P50: time.Microsecond, P999: p999 * time.Microsecond}
	}
	for i := range 2 {
		row.addSlow(lanes, rep(3000, 4, 10, 3, 2, 1))
		row.addSlow(imm, rep(3000, 3, 2, 1, 0, 0))
		row.addSlow(eager, rep(3000, 3, 2, 9, 9, 9)) // not the best engine system: not shown
		row.addSlow(FloorName, rep(3000, 2, 2, 1, 1, 0))
		row.addSlow(padded, rep(3000, 4, 5+time.Duration(i), 2, 2, 1)) // 5× is within, 6× not
	}
	row.addSlow(lanes, rep(3000, 4, 4, 0, 0, 0))
	row.addSlow("ucx-sm", LatencyResult{Calls: 3000}) // no Elapsed: not measured

	var b bytes.Buffer
	writeLanesGoals(&b, []LatencyRow{row}, nil)
	assert.Equal(t, "- 64B lanes p99.9 ≤ 5× their p50: 14.00 / 1.40 µs, 10.0×, ≤ 5× in 1 of 3 repetitions "+
		"(the host's floor-shm: p50 0.50, p99.9 2.00 µs; floor-shm+800ns: p50 1.30, p99.9 13.00 µs, 10.0×, ≤ 5× in 1 of 2 repetitions): **MISS**\n"+
		"  - calls over 5 / 10 / 20 µs per ms of calls, all repetitions: hatrpc-lanes 0.50 / 0.33 / 0.17 (9000 calls, 12.0 ms); "+
		"shm-direct_write_imm 0.33 / 0.00 / 0.00 (6000 calls, 6.0 ms); floor-shm 0.50 / 0.50 / 0.00 (6000 calls, 4.0 ms); "+
		"floor-shm+800ns 0.50 / 0.50 / 0.25 (6000 calls, 8.0 ms)\n", b.String())
	_, ok := row.Slow["ucx-sm"]
	assert.False(t, ok, "a result without Elapsed adds nothing")
	assert.Equal(t, SlowTally{LatencyResult: LatencyResult{Calls: 9000, Elapsed: 12 * time.Millisecond, Over: [3]int64{6, 4, 2}}, Reps: 3, Within: 1}, row.Slow[lanes])

	row.Slow = nil
	b.Reset()
	writeLanesGoals(&b, []LatencyRow{row}, nil)
	assert.Equal(t, "- 64B lanes p99.9 ≤ 5× their p50: 14.00 / 1.40 µs, 10.0× "+
		"(the host's floor-shm: p50 0.50, p99.9 2.00 µs; floor-shm+800ns: p50 1.30, p99.9 13.00 µs, 10.0×): **MISS**\n", b.String(),
		"no tallies (a row read from a CSV): no counts, no rates")
}
