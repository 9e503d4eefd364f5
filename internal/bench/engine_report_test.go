package bench

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

func TestEngineReport(t *testing.T) {
	eager := Engine{Proto: rdma.ProtoEager}.Name()
	imm := Engine{Proto: rdma.ProtoDirectWriteIMM}.Name()
	planned := Engine{Planned: true}.Name()
	systems := []string{eager, imm, planned, Subject}
	lat := []LatencyRow{{Placement: "unpinned", Size: 64, By: map[string]LatencyResult{
		eager:   {P50: 3 * time.Microsecond, P99: 9 * time.Microsecond, Mean: 4 * time.Microsecond},
		imm:     {P50: 2 * time.Microsecond, P99: 8 * time.Microsecond, Mean: 3 * time.Microsecond},
		planned: {P50: 2100 * time.Nanosecond, P99: 8 * time.Microsecond, P999: 31 * time.Microsecond, Mean: 3 * time.Microsecond},
		Subject: {P50: 12 * time.Microsecond, P99: 50 * time.Microsecond, Mean: 14 * time.Microsecond},
	}}}
	sec := func(calls int64) ThroughputResult { return ThroughputResult{Calls: calls, Elapsed: time.Second} }
	tput := []ThroughputRow{
		{Size: 128 << 10, Callers: 1, By: map[string]ThroughputResult{eager: sec(9000), imm: sec(10000), planned: sec(9000), Subject: sec(1000)}},
		{Size: 128 << 10, Callers: 8, By: map[string]ThroughputResult{eager: sec(4000), imm: sec(3000), planned: sec(3000), Subject: sec(1000)}},
	}

	var b bytes.Buffer
	require.NoError(t, WriteLatencyCSV(&b, systems, lat))
	recs, err := csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 5)
	assert.Equal(t, []string{"system", "protocol", "size", "p50_us", "p99_us", "mean_us"}, recs[0][:6])
	// 64 B for one caller: RFP on shared memory, Direct-WriteIMM on NICs.
	wantProto := "rfp"
	if EnginePrefix() == "verbs" {
		wantProto = "direct_write_imm"
	}
	assert.Equal(t, []string{planned, wantProto, "64", "2.10", "8.00", "3.00", "busy", providerOfPrefix(EnginePrefix()), "31.00"}, recs[3])

	b.Reset()
	require.NoError(t, WriteThroughputCSV(&b, systems, tput))
	recs, err = csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 9)
	assert.Equal(t, []string{"system", "size", "clients", "calls_per_s", "mb_per_s"}, recs[0][:5])
	assert.Equal(t, []string{Subject, "131072", "1", "1000.00", "131.07", "tcp", "-", "tcp"}, recs[4])

	b.Reset()
	require.NoError(t, WriteLatencyCSV(&b, systems, lat))
	gotSys, gotLat, err := ReadLatencyCSV(&b)
	require.NoError(t, err)
	assert.Equal(t, systems, gotSys)
	assert.Equal(t, lat, gotLat, "CSV round trip")
	b.Reset()
	b.WriteString("system,protocol,size,p50_us,p99_us,mean_us,polling,provider\n" + planned + ",rfp,64,2.10,8.00,3.00,busy,shm\n")
	_, old, err := ReadLatencyCSV(&b)
	require.NoError(t, err, "a CSV from before the p999_us column")
	assert.Equal(t, LatencyResult{P50: 2100 * time.Nanosecond, P99: 8 * time.Microsecond, Mean: 3 * time.Microsecond}, old[0].By[planned])
	b.Reset()
	require.NoError(t, WriteThroughputCSV(&b, systems, tput))
	gotSys, gotTput, err := ReadThroughputCSV(&b)
	require.NoError(t, err)
	assert.Equal(t, systems, gotSys)
	for i := range tput {
		for s, v := range tput[i].By {
			assert.InDelta(t, v.OpsPerSec(), gotTput[i].By[s].OpsPerSec(), 0.5, "%s", s)
		}
	}
	_, _, err = ReadLatencyCSV(strings.NewReader("a,b\n1,2\n"))
	assert.Error(t, err)

	b.Reset()
	WriteEngineVerdicts(&b, lat, tput)
	v := b.String()
	assert.Contains(t, v, "planned 2.10 µs")
	assert.Contains(t, v, "c1 10.0x (direct_write_imm) ok; c8 4.0x (eager) MISS: **MISS**")
	assert.Contains(t, v, "1 of 3 cells; misses: 128KiB c1 0.90, 128KiB c8 0.75")

	for name, f := range map[string]func(*bytes.Buffer) error{
		"latency":    func(w *bytes.Buffer) error { return PlotLatency(w, systems, lat) },
		"throughput": func(w *bytes.Buffer) error { return PlotThroughput(w, systems, tput, 128<<10) },
	} {
		b.Reset()
		require.NoError(t, f(&b), name)
		assert.True(t, strings.HasPrefix(b.String(), "<?xml"), name)
		assert.Contains(t, b.String(), planned, name)
	}
	assert.Error(t, PlotThroughput(&b, systems, tput, 512), "no points at 512 B")

	b.Reset()
	WriteEngineLatencyTable(&b, systems, lat)
	assert.Contains(t, b.String(), "| 1.05 (direct_write_imm) ok |")
	b.Reset()
	WriteEngineThroughputTable(&b, systems, tput, 128<<10)
	assert.Contains(t, b.String(), "| planned / best fixed | 0.90 (direct_write_imm) MISS | 0.75 (eager) MISS |")
	assert.Contains(t, b.String(), "| planned / same protocol | 0.90 | - |", "c8 plans rfp, which has no row here")
}

func TestMergeKeepsBest(t *testing.T) {
	a := []LatencyRow{{Size: 64, By: map[string]LatencyResult{"x": {P50: 3}, "y": {P50: 1}}}}
	b := []LatencyRow{{Size: 64, By: map[string]LatencyResult{"x": {P50: 2}, "y": {P50: 5}}}, {Size: 4, By: map[string]LatencyResult{"x": {P50: 7}}}}
	m := MergeLatency(a, b)
	require.Len(t, m, 2)
	assert.Equal(t, time.Duration(2), m[0].By["x"].P50)
	assert.Equal(t, time.Duration(1), m[0].By["y"].P50)
	assert.Equal(t, time.Duration(3), a[0].By["x"].P50, "inputs untouched")

	sec := func(calls int64) ThroughputResult { return ThroughputResult{Calls: calls, Elapsed: time.Second} }
	ta := []ThroughputRow{{Size: 512, Callers: 8, By: map[string]ThroughputResult{"x": sec(10), "y": sec(30)}}}
	tb := []ThroughputRow{{Size: 512, Callers: 8, By: map[string]ThroughputResult{"x": sec(20), "y": sec(5)}}}
	tm := MergeThroughput(ta, tb)
	require.Len(t, tm, 1)
	assert.Equal(t, int64(20), tm[0].By["x"].Calls)
	assert.Equal(t, int64(30), tm[0].By["y"].Calls)
}

// TestRatioText: a ratio that two decimals would round onto its goal is
// shown to three, so a miss never reads as the goal itself.
func TestRatioText(t *testing.T) {
	tests := []struct {
		ratio, goal float64
		want        string
	}{
		{0.8996, 0.9, "0.8996"},
		{0.899, 0.9, "0.899"},
		{0.9, 0.9, "0.90"},
		{0.9012, 0.9, "0.901"},
		{0.95, 0.9, "0.95"},
		{1.2049, 1.2, "1.205"},
		{1.204, 1.2, "1.204"},
		{1.41, 1.2, "1.41"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ratioText(tt.ratio, tt.goal), "%v against %v", tt.ratio, tt.goal)
	}
}
