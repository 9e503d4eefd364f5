package rdma

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCUnit builds and runs the C unit tests (make ctest) against the same
// provider selection, so `go test` covers both halves of the suite.
func TestCUnit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), buildRunTimeout)
	defer cancel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "make", "-s", "-C", wd, "ctest", "O="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "PASS:")
	require.Contains(t, string(out), " 0 failures")
}

// TestCPhases builds the C bench and runs its host-phase probe briefly:
// every window is counted in one of the two phases, each with its medians.
func TestCPhases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), buildRunTimeout)
	defer cancel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "make", "-s", "-C", wd, "phases", "W=20", "O="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	count := func(re string) int {
		m := regexp.MustCompile(re).FindStringSubmatch(string(out))
		require.NotNil(t, m, "%s: %s", re, out)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return n
	}
	fast := count(`\(<= 2x\)\s+(\d+) windows`)
	slow := count(`\(> 2x its best\)\s+(\d+) windows`)
	require.Equal(t, 20, fast+slow, "%s", out)
	require.Positive(t, fast, "the best window is at its own floor: %s", out)
}
