package echo_test

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
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

// TestServerAndClient builds the two example programs the way the README
// tells a newcomer to run them, starts the server, runs the client against
// it and stops the server with SIGTERM.
func TestServerAndClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(3*time.Minute))
	defer cancel()
	dir := t.TempDir()
	serverBin := build(t, ctx, dir, "github.com/hatrpc/hatrpc/examples/echo/server")
	clientBin := build(t, ctx, dir, "github.com/hatrpc/hatrpc/examples/echo/client")

	for _, lanes := range []string{"off", fastpathtest.Provider()} {
		t.Run("rdma="+lanes, func(t *testing.T) { runExample(t, ctx, serverBin, clientBin, lanes) })
	}
}

func runExample(t *testing.T, ctx context.Context, serverBin, clientBin, lanes string) {
	srv := exec.CommandContext(ctx, serverBin, "-addr", "127.0.0.1:0", "-rdma", lanes)
	stdout, err := srv.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer func() { _ = srv.Process.Kill() }()
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "server printed nothing")
	addr, ok := strings.CutPrefix(lines.Text(), "echo server listening on ")
	require.True(t, ok, "unexpected first line %q", lines.Text())

	tests := []struct {
		msg  string
		want []string
	}{
		{"hello", []string{"echo: hello", "empty message refused: nothing to echo", "echoBytes: 1048576 bytes round trip ok"}},
		{"ünïcode ✓", []string{"echo: ünïcode ✓"}},
	}
	// The plan tables of echo.thrift: latency goal → busy polling and
	// Direct-WriteIMM for echo; throughput with 1 MiB payloads → Direct-
	// WriteIMM while under-subscribed. Over TCP the table is one TCP row.
	transport := fastpathtest.Transport()
	if lanes == "off" {
		transport = "tcp"
	}
	tests[0].want = append(tests[0].want,
		"plan echo: transport="+transport+" polling=busy",
		"plan echoBytes: transport="+transport+" polling=busy")
	if transport == "tcp" {
		tests[0].want = append(tests[0].want, "  0-... tcp - busy")
	} else {
		tests[0].want = append(tests[0].want, "  0-128 lane direct_write_imm busy inline", "  129-... lane direct_write_imm busy")
	}
	for _, tt := range tests {
		out, err := exec.CommandContext(ctx, clientBin, "-addr", addr, "-msg", tt.msg, "-rdma", lanes).CombinedOutput()
		require.NoError(t, err, "client: %s", out)
		for _, w := range tt.want {
			assert.Contains(t, string(out), w+"\n")
		}
	}

	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	require.True(t, lines.Scan(), "server exited without its goodbye")
	assert.Equal(t, "echo server stopped", lines.Text())
	require.NoError(t, srv.Wait())
}
