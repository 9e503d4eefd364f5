package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/internal/bench"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if runner.dir != "" {
		_ = os.RemoveAll(runner.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runner builds the runner once for the tests that run it.
var runner struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

func buildRunner(t *testing.T, ctx context.Context) string {
	t.Helper()
	runner.once.Do(func() {
		runner.dir, runner.err = os.MkdirTemp("", "atb-tcp-test-")
		if runner.err == nil {
			runner.out, runner.err = exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(runner.dir, "atb-tcp"), ".").CombinedOutput()
		}
	})
	require.NoError(t, runner.err, "%s", runner.out)
	return filepath.Join(runner.dir, "atb-tcp")
}

// TestRunnerEndToEnd builds the runner and runs a tiny measurement: server
// and client processes per system, pinned and unpinned, and checks the
// table has a number for every system at every point.
func TestRunnerEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildRunner(t, ctx)

	systems := []string{"apache-buffered", "hatrpc"}
	cmd := exec.CommandContext(ctx, bin, "-systems", strings.Join(systems, ","),
		"-sizes", "64,4KiB", "-callers", "1,4", "-calls", "200", "-warmup", "20",
		"-dur", "200ms", "-reps", "1", "-placements", "unpinned,same-cpu")
	stdout, err := cmd.Output()
	require.NoError(t, err)
	table := string(stdout)
	t.Log("\n" + table)

	lines := strings.Split(table, "\n")
	count := func(prefix string) int {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				n++
				assert.NotContains(t, l, " - ", "missing measurement in %q", l)
			}
		}
		return n
	}
	assert.Equal(t, 2, count("unpinned"), "one latency row per size")
	assert.Equal(t, 2, count("same-cpu"))
	// One row per caller count in the throughput table and one in the
	// CPU-per-call table.
	assert.Equal(t, 4, count("64B"), "one throughput and one CPU row per caller count")
	assert.Equal(t, 4, count("4KiB"))
	assert.Contains(t, table, "CPU per call")
	assert.Contains(t, table, "vs apache-buffered")
	for _, s := range systems {
		_, err := bench.Lookup(s)
		require.NoError(t, err)
		assert.Contains(t, table, s+" p50")
	}
}

// TestRunnerBaseline runs a system of another build (the runner is its
// own baseline here) beside this build's in one run: both get a row.
func TestRunnerBaseline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildRunner(t, ctx)
	cmd := exec.CommandContext(ctx, bin, "-systems", "hatrpc,hatrpc@base", "-baseline", bin,
		"-sizes", "64", "-callers", "2", "-calls", "100", "-warmup", "10",
		"-dur", "100ms", "-reps", "1", "-placements", "unpinned")
	stdout, err := cmd.Output()
	require.NoError(t, err)
	table := string(stdout)
	t.Log("\n" + table)
	assert.Contains(t, table, "hatrpc p50")
	assert.Contains(t, table, "hatrpc@base p50")

	out, err := exec.CommandContext(ctx, bin, "-systems", "hatrpc", "-baseline", "/nonexistent/atb-tcp").CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, "atb-tcp: -baseline: stat /nonexistent/atb-tcp: no such file or directory\n", string(out))
}

// TestStreamRunEndToEnd runs stream mode with every stream system that
// needs nothing installed (grpc-stream needs the module cache: `make
// bench-stream`) and checks every point has a number and the goals the
// run holds both sides of are printed.
func TestStreamRunEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildRunner(t, ctx)
	cmd := exec.CommandContext(ctx, bin, "-systems", "hatrpc-stream,raw-tcp-stream,memmove,hatrpc-unary",
		"-stream-sizes", "64,64KiB", "-bytes", "1MiB", "-max-msgs", "2000", "-unary-dur", "100ms", "-reps", "1")
	stdout, err := cmd.Output()
	require.NoError(t, err)
	table := string(stdout)
	t.Log("\n" + table)
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && (f[0] == "64B" || f[0] == "64KiB") {
			assert.Len(t, f, 6, "size, messages and four systems in %q", l)
			assert.NotContains(t, f, "-", "missing measurement in %q", l)
		}
	}
	assert.Regexp(t, `(?m)^ +64B +2000 `, table, "64 B: capped at -max-msgs")
	assert.Regexp(t, `(?m)^ +64KiB +16 `, table, "64 KiB: 1 MiB of them")
	assert.Contains(t, table, "bulk over TCP vs raw TCP floor")
	assert.Contains(t, table, "64 B stream msgs/s vs unary calls/s, 1 caller")
}

func TestStreamFlags(t *testing.T) {
	tests := []struct {
		name    string
		systems []string
		sizes   string
		bytes   string
		wantErr string
	}{
		{"ok", defaultStreamSystems, "64,4KiB,64KiB", "1GiB", ""},
		{"two byte counts", defaultStreamSystems, "64", "1GiB,2GiB", `-bytes "1GiB,2GiB": want one size, e.g. 1GiB`},
		{"bad bytes", defaultStreamSystems, "64", "lots", `-bytes "lots": want one size, e.g. 1GiB`},
		{"bad size", defaultStreamSystems, "64,x", "1GiB", `-stream-sizes: bench: bad number "x": strconv.Atoi: parsing "x": invalid syntax`},
		{"echo system", []string{"hatrpc-stream", "apache-framed"}, "64", "1GiB",
			"bench: bad stream run: apache-framed is not a stream system (have grpc-stream, hatrpc-stream, hatrpc-stream-lanes, hatrpc-unary, memmove, raw-tcp-stream)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := streamDriver(tt.systems, tt.sizes, tt.bytes, 0, time.Second, 1)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, int64(1<<30), d.Bytes)
			assert.Equal(t, []int{64, 4 << 10, 64 << 10}, d.Sizes)
		})
	}
	// Every default system is a registered stream system.
	assert.ElementsMatch(t, bench.StreamSystems(), defaultStreamSystems)
}
