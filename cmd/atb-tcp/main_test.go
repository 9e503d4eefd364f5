package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/internal/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunnerEndToEnd builds the runner and runs a tiny measurement: server
// and client processes per system, pinned and unpinned, and checks the
// table has a number for every system at every point.
func TestRunnerEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "atb-tcp")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

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
