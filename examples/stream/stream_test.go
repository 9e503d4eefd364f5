package stream_test

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func build(t *testing.T, ctx context.Context, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg).CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, out)
	return bin
}

// TestServerAndClient builds the example's programs as the README runs
// them, starts the server, runs the client against it (all three streams,
// both declared exceptions, a unary call) and stops the server with
// SIGTERM.
func TestServerAndClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	serverBin := build(t, ctx, dir, "github.com/hatrpc/hatrpc/examples/stream/server")
	clientBin := build(t, ctx, dir, "github.com/hatrpc/hatrpc/examples/stream/client")

	srv := exec.CommandContext(ctx, serverBin, "-addr", "127.0.0.1:0")
	stdout, err := srv.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer func() { _ = srv.Process.Kill() }()
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "server printed nothing")
	addr, ok := strings.CutPrefix(lines.Text(), "logs server listening on ")
	require.True(t, ok, "unexpected first line %q", lines.Text())

	out, err := exec.CommandContext(ctx, clientBin, "-addr", addr).CombinedOutput()
	require.NoError(t, err, "client: %s", out)
	assert.Equal(t, `upload: 3 chunks, 108 bytes
tail: 0 line 3 of chunk 2
tail: 1 line 4 of chunk 2
tail: 2 line 5 of chunk 3
tail: 3 line 6 of chunk 3
tail: end, trailer lines=4
tail of "nowhere" refused: no such source
big upload refused: quota 1048576 bytes
chat: heard client: hello
chat: heard client: how are the logs?
count: 6 lines
`, string(out))

	// A second client on another source: the first one's lines are not its.
	out, err = exec.CommandContext(ctx, clientBin, "-addr", addr, "-source", "other").CombinedOutput()
	require.NoError(t, err, "client: %s", out)
	assert.Contains(t, string(out), "count: 6 lines\n")

	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	require.True(t, lines.Scan(), "server exited without its goodbye")
	assert.Equal(t, "logs server stopped", lines.Text())
	require.NoError(t, srv.Wait())
}
