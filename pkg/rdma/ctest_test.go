package rdma

import (
	"context"
	"os"
	"os/exec"
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
