package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/bench"
)

// fakeSweep stands in for the transport: a result for every point the
// options ask for, with latencies that fall below 1 µs for some systems
// (the case where gonum's ±1 padding of a single value crossed zero).
func fakeSweep(o *options) ([]bench.LatencyRow, []bench.ThroughputRow) {
	var lat []bench.LatencyRow
	for _, size := range o.latSizes {
		r := bench.LatencyRow{Placement: o.latP.Name, Size: size, By: map[string]bench.LatencyResult{}}
		for i, s := range o.systems {
			p50 := time.Duration(400+300*i) * time.Nanosecond
			r.By[s] = bench.LatencyResult{Calls: int64(o.calls), P50: p50, P99: 3 * p50, P999: 5 * p50, Mean: p50 + 50}
		}
		lat = append(lat, r)
	}
	var tput []bench.ThroughputRow
	for _, size := range o.tputSizes {
		for _, c := range o.callers {
			r := bench.ThroughputRow{Size: size, Callers: c, By: map[string]bench.ThroughputResult{}}
			for i, s := range o.systems {
				r.By[s] = bench.ThroughputResult{Callers: c, Calls: int64(1000 * (i + 1) * c), Elapsed: o.dur}
			}
			tput = append(tput, r)
		}
	}
	return lat, tput
}

// TestReportEveryFlagCombination runs what the driver writes after a sweep
// (CSV, plots, report.md) for the shapes of sweep the flags allow: one
// size, one caller, one system, one repetition, no throughput sweep, no
// latency sweep. Every one yields its tables and every plot, or the flags
// are refused up front with what is wrong.
func TestReportEveryFlagCombination(t *testing.T) {
	eng := bench.EngineSystems()
	self, err := os.Executable() // an executable file, for -baseline
	require.NoError(t, err)
	t.Cleanup(func() { _ = bench.SetBaseline("") })
	tests := []struct {
		name      string
		args      []string
		wantErr   string
		wantPlots []string
	}{
		{name: "single latency size (the panic)", args: []string{"-lat-sizes", "64"},
			wantPlots: []string{"latency.svg", "throughput-512B.svg", "throughput-128KiB.svg"}},
		{name: "single size, single caller, one rep", args: []string{"-lat-sizes", "64", "-tput-sizes", "64", "-callers", "1", "-reps", "1"},
			wantPlots: []string{"latency.svg", "throughput-64B.svg"}},
		{name: "single system", args: []string{"-systems", bench.Subject, "-lat-sizes", "64", "-callers", "1"},
			wantPlots: []string{"latency.svg", "throughput-512B.svg", "throughput-128KiB.svg"}},
		{name: "issue 21's sweep", args: []string{"-systems", eng[0] + "," + eng[1] + ",hatrpc-lanes", "-lat-sizes", "64,256", "-callers", "1", "-reps", "3"},
			wantPlots: []string{"latency.svg", "throughput-512B.svg", "throughput-128KiB.svg"}},
		{name: "no throughput sweep", args: []string{"-lat-sizes", "4,64", "-tput-sizes", ""},
			wantPlots: []string{"latency.svg"}},
		{name: "no latency sweep", args: []string{"-lat-sizes", "", "-tput-sizes", "1K", "-callers", "8"},
			wantPlots: []string{"throughput-1KiB.svg"}},
		{name: "duplicates collapse", args: []string{"-lat-sizes", "64,64B", "-callers", "4,4", "-systems", bench.Subject + "," + bench.Subject},
			wantPlots: []string{"latency.svg", "throughput-512B.svg", "throughput-128KiB.svg"}},
		{name: "defaults", args: nil,
			wantPlots: []string{"latency.svg", "throughput-512B.svg", "throughput-128KiB.svg"}},

		{name: "nothing to measure", args: []string{"-lat-sizes", "", "-tput-sizes", ""},
			wantErr: "-lat-sizes and -tput-sizes are both empty: nothing to measure"},
		{name: "no callers", args: []string{"-callers", ""},
			wantErr: "-callers is empty: the throughput sweep (-tput-sizes 512,128K) needs at least one caller count"},
		{name: "zero size", args: []string{"-lat-sizes", "0,64"}, wantErr: `-lat-sizes "0,64": 0 is not positive`},
		{name: "negative callers", args: []string{"-callers", "-1"}, wantErr: `-callers "-1": -1 is not positive`},
		{name: "bad number", args: []string{"-tput-sizes", "big"}, wantErr: `-tput-sizes: bench: bad number "big": strconv.Atoi: parsing "big": invalid syntax`},
		{name: "no systems", args: []string{"-systems", ","}, wantErr: "-systems is empty: name at least one of " + strings.Join(append(eng, bench.Subject), ", ")},
		{name: "unknown system", args: []string{"-systems", "nosuch"}, wantErr: `bench: unknown system "nosuch"`},
		{name: "zero reps", args: []string{"-reps", "0"}, wantErr: "-reps 0: want at least 1"},
		{name: "zero calls", args: []string{"-calls", "0"}, wantErr: "-calls 0: a latency run needs at least one recorded call"},
		{name: "zero calls without latency sweep", args: []string{"-calls", "0", "-lat-sizes", ""},
			wantPlots: []string{"throughput-512B.svg", "throughput-128KiB.svg"}},
		{name: "negative warmup", args: []string{"-warmup", "-1"}, wantErr: "-warmup -1: want 0 or more"},
		{name: "negative warmup-for", args: []string{"-warmup-for", "-1ms"}, wantErr: "-warmup-for -1ms: want 0 or more"},
		{name: "zero dur", args: []string{"-dur", "0s"}, wantErr: "-dur 0s: want a positive duration"},
		{name: "bad placement", args: []string{"-lat-placement", "both"}, wantErr: `unknown placement "both" (unpinned, same-cpu, split-cpu)`},
		{name: "bad role", args: []string{"-role", "x"}, wantErr: `unknown -role "x"`},
		{name: "negative host-wait", args: []string{"-host-wait", "-1s"}, wantErr: "-host-wait -1s: want 0 or more"},
		{name: "one cpu twice", args: []string{"-cpus", "1,1"}, wantErr: `-cpus "1,1": want two different CPU numbers, e.g. 0,1`},
		{name: "cpus not numbers", args: []string{"-cpus", "a,b"}, wantErr: `-cpus "a,b": want two different CPU numbers, e.g. 0,1`},
		{name: "no host check", args: []string{"-host-wait", "0", "-lat-sizes", "64", "-tput-sizes", ""}, wantPlots: []string{"latency.svg"}},
		{name: "baseline system without a baseline", args: []string{"-systems", "hatrpc,hatrpc@base"},
			wantErr: "bench: no baseline binary (-baseline) for a system named *@base: hatrpc@base"},
		{name: "missing baseline", args: []string{"-baseline", "/nonexistent/atb"},
			wantErr: "-baseline: stat /nonexistent/atb: no such file or directory"},
		{name: "baseline not a program", args: []string{"-baseline", os.DevNull}, wantErr: "-baseline: /dev/null: not an executable file"},
		{name: "baseline of nothing", args: []string{"-systems", "@base", "-baseline", self}, wantErr: `bench: unknown system "@base"`},
		{name: "old against new", args: []string{"-systems", eng[0] + ",hatrpc-lanes,hatrpc-lanes@base," + eng[0] + "@base", "-baseline", self,
			"-lat-sizes", "64", "-tput-sizes", "512", "-callers", "1"},
			wantPlots: []string{"latency.svg", "throughput-512B.svg"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("atb", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o, err := parseFlags(fs, tt.args)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				if !strings.HasPrefix(tt.wantErr, "bench: unknown") {
					assert.Equal(t, tt.wantErr, err.Error())
				}
				return
			}
			require.NoError(t, err)
			lat, tput := fakeSweep(o)
			dir := t.TempDir()
			var stdout, logw bytes.Buffer
			require.NoError(t, write(dir, o.systems, lat, tput, o.tputSizes, time.Second, &stdout, &logw))
			assert.Empty(t, logw.String(), "no plot skipped")
			rep := stdout.String()
			if len(o.latSizes) > 0 {
				assert.Contains(t, rep, "### 1-caller latency")
			} else {
				assert.NotContains(t, rep, "### 1-caller latency")
			}
			for _, size := range o.tputSizes {
				assert.Contains(t, rep, "### Throughput, "+bench.SizeLabel(size)+" payload\n\n| "+bench.SizeLabel(size)+": calls/s |")
			}
			for _, sys := range o.systems {
				assert.Contains(t, rep, "\n| "+sys+" ", "a row for every system, a baseline's too")
			}
			files, err := filepath.Glob(filepath.Join(dir, "*.svg"))
			require.NoError(t, err)
			var got []string
			for _, f := range files {
				got = append(got, filepath.Base(f))
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				assert.Contains(t, string(b), "<svg", f)
			}
			assert.ElementsMatch(t, tt.wantPlots, got)
			for _, f := range []string{"latency.csv", "throughput.csv", "report.md"} {
				_, err := os.Stat(filepath.Join(dir, f))
				assert.NoError(t, err, f)
			}

			// -from redraws the same plots from the CSV files alone.
			again := t.TempDir()
			stdout.Reset()
			require.NoError(t, regenerateTo(dir, again, &stdout, &logw))
			assert.Empty(t, logw.String())
			for _, p := range tt.wantPlots {
				_, err := os.Stat(filepath.Join(again, p))
				assert.NoError(t, err, p)
			}
		})
	}
}

// TestPlotSkippedWithMessage: a plot with nothing to draw (every system's
// p50 is zero) is skipped with a line saying so; the tables are written.
func TestPlotSkippedWithMessage(t *testing.T) {
	lat := []bench.LatencyRow{{Placement: "unpinned", Size: 64, By: map[string]bench.LatencyResult{bench.Subject: {}}}}
	dir := t.TempDir()
	var stdout, logw bytes.Buffer
	require.NoError(t, write(dir, []string{bench.Subject}, lat, nil, nil, 0, &stdout, &logw))
	assert.Equal(t, "atb: skipped plot latency.svg: bench: nothing measured to plot\n", logw.String())
	assert.Contains(t, stdout.String(), "### 1-caller latency")
	_, err := os.Stat(filepath.Join(dir, "report.md"))
	assert.NoError(t, err)
}
