package rdma

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCProtoUnit builds and runs the engine's C unit tests (proto.mk), so
// `go test` covers the C state machines without the Go wrapper too.
func TestCProtoUnit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), buildRunTimeout)
	defer cancel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "make", "-s", "-C", wd, "-f", "proto.mk", "proto-ctest", "O="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "test_proto: ok")
}
