package main

import (
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/internal/bench"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunnerEndToEnd builds the runner and runs a tiny sweep (separate
// server and client processes) and checks every output file.
func TestRunnerEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Minute)) // a hang guard: the build alone takes minutes under emulation
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "atb")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	res := filepath.Join(dir, "out")
	// Every engine system of the provider under test (shm, or verbs on
	// ibv: every protocol, rfp-fetch and planned) and hatrpc.
	systems := append(bench.EngineSystems(), "hatrpc")
	cmd := exec.CommandContext(ctx, bin, "-systems", strings.Join(systems, ","),
		"-lat-sizes", "64,4K", "-tput-sizes", "512", "-callers", "1,4", "-calls", "100", "-warmup", "10",
		"-dur", "100ms", "-reps", "1", "-host-wait", "0", "-out", res)
	cmd.Env = append(os.Environ(), "HATRPC_PROVIDER="+fastpathtest.Provider())
	stdout, err := cmd.Output()
	require.NoError(t, err)
	t.Log("\n" + string(stdout))
	assert.Contains(t, string(stdout), "### Goals")

	read := func(name string) [][]string {
		f, err := os.Open(filepath.Join(res, name))
		require.NoError(t, err)
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		require.NoError(t, err)
		return recs
	}
	assert.Len(t, read("latency.csv"), 1+len(systems)*2, "a row per system and size")
	assert.Len(t, read("throughput.csv"), 1+len(systems)*2, "a row per system and caller count")
	for _, f := range []string{"latency.svg", "throughput-512B.svg", "report.md"} {
		st, err := os.Stat(filepath.Join(res, f))
		require.NoError(t, err)
		assert.Positive(t, st.Size(), f)
	}

	// Old build against new in one run: the binary is its own baseline
	// here; the @base system's processes run it as the plain system.
	res = filepath.Join(dir, "paired")
	// With the host check: every rep's line says what the cache line's
	// round trip was before and after it, unless the probe could not run
	// here (then the sweep says so once and goes on).
	stamps := filepath.Join(dir, "stamps")
	cmd = exec.CommandContext(ctx, bin, "-systems", "hatrpc,hatrpc@base", "-baseline", bin,
		"-lat-sizes", "64", "-tput-sizes", "", "-calls", "100", "-warmup", "10", "-reps", "2", "-host-wait", "1s", "-out", res,
		"-stamps", stamps)
	cmd.Env = append(os.Environ(), "HATRPC_PROVIDER="+fastpathtest.Provider())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	_, err = cmd.Output()
	require.NoError(t, err, stderr.String())
	reps := 0
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(line, "latency ") {
			reps++
			if !strings.Contains(stderr.String(), "host check off: ") {
				assert.Regexp(t, ` line [0-9.]+[nµ]s.*/[0-9.]+[nµ]s`, line)
			}
		}
	}
	assert.Equal(t, 4, reps, "two systems, two reps")
	// -stamps: a window a repetition, each system's (the baseline's
	// processes are this binary too), read back by -role tail.
	f, err := os.Open(stamps)
	require.NoError(t, err)
	wins, err := bench.ReadStamps(f)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	require.Len(t, wins, 4)
	for _, w := range wins {
		assert.Contains(t, []string{"hatrpc", "hatrpc@base"}, w.System)
		assert.Less(t, w.Begin, w.End)
	}
	trace := filepath.Join(dir, "perf.txt")
	require.NoError(t, os.WriteFile(trace, []byte("  atb 1/1 [000] 1.000000000: sched:sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=R ==> next_comm=b next_pid=2 next_prio=120\n"), 0o644))
	tail, err := exec.CommandContext(ctx, bin, "-role", "tail", "-stamps", stamps, "-perf-script", trace).CombinedOutput()
	require.NoError(t, err, "%s", tail)
	assert.Contains(t, string(tail), "hatrpc 64B: 2 repetitions")
	assert.Contains(t, string(tail), "hatrpc@base 64B: 2 repetitions")
	tail, err = exec.CommandContext(ctx, bin, "-role", "tail", "-stamps", stamps).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(tail), "-role tail needs -stamps and -perf-script")
	// Stamps that cannot all be written fail the run, not only a line.
	cmd = exec.CommandContext(ctx, bin, "-systems", "hatrpc", "-lat-sizes", "64", "-tput-sizes", "", "-calls", "50",
		"-warmup", "5", "-reps", "1", "-host-wait", "0", "-out", filepath.Join(dir, "full"), "-stamps", "/dev/full")
	cmd.Env = append(os.Environ(), "HATRPC_PROVIDER="+fastpathtest.Provider())
	full, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", full)
	assert.Contains(t, string(full), "-stamps: write /dev/full: no space left on device")

	rows := read("latency.csv")
	require.Len(t, rows, 3, "a row per system")
	for i, want := range []string{"hatrpc", "hatrpc@base"} {
		assert.Equal(t, want, rows[i+1][0])
		p50, err := strconv.ParseFloat(rows[i+1][3], 64)
		require.NoError(t, err)
		assert.Positive(t, p50, want)
	}
}

func TestPlacementFlag(t *testing.T) {
	tests := []struct {
		name, cpus     string
		server, client string
		wantErr        string
	}{
		{name: "unpinned", cpus: "0,1"},
		{name: "split-cpu", cpus: "0,1", server: "0", client: "1"},
		{name: "same-cpu", cpus: "2,3", server: "2", client: "2"},
		{name: "both", cpus: "0,1", wantErr: `unknown placement "both" (unpinned, same-cpu, split-cpu)`},
		{name: "split-cpu,unpinned", cpus: "0,1", wantErr: `placement "split-cpu,unpinned": one of unpinned, same-cpu, split-cpu, not a list (atb runs each kind of run in one placement)`},
		{name: "unpinned", cpus: "0", wantErr: `-cpus "0": want two different CPU numbers, e.g. 0,1`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.cpus, func(t *testing.T) {
			p, err := placement(tt.name, tt.cpus)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.name, p.Name)
			assert.Equal(t, tt.server, p.ServerCPU)
			assert.Equal(t, tt.client, p.ClientCPU)
		})
	}
}
