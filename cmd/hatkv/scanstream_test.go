package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

// scrapeSum sums the series of name (any labels) at a /metrics URL.
func scrapeSum(t *testing.T, ctx context.Context, url, name string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^`+name+`(?:\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		sum += v
	}
	return sum
}

// TestScanClientKilledMidStream: a `hatkv scan --all` process killed with
// SIGKILL while its stream waits on it (it stopped reading: its output is
// not read) leaves nothing on the server: the stream's handler ends, the
// connection goes, a write commits and `check` finds the store clean.
func TestScanClientKilledMidStream(t *testing.T) {
	dir := t.TempDir()
	addr, out := serveInProcessOutput(t, "--db", dir, "--debug-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`debug: (http://\S+)/metrics`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	metrics := m[1] + "/metrics"
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(3*time.Minute))
	defer cancel()
	defer http.DefaultClient.CloseIdleConnections()
	o, err := runCmd(ctx, nil, "bench", "--addr", addr, "-P", "workloadb", "-p", "recordcount=5000", "--phase", "load", "--progress", "off")
	require.NoError(t, err, o)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join([]string{"scan", "--all", "--addr", addr, "--transport", "tcp"}, "\x1f"))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // held open: the child lives until killed
	require.NoError(t, err)
	defer stdin.Close()
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The first record arrived; from now on nobody reads the child's
	// output, so it blocks writing and stops reading its stream.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "user"), line)
	require.Equal(t, 1.0, scrapeSum(t, ctx, metrics, "hatrpc_server_streams_open"))

	require.NoError(t, cmd.Process.Signal(os.Kill))
	_ = cmd.Wait()
	require.Eventually(t, func() bool {
		return scrapeSum(t, ctx, metrics, "hatrpc_server_streams_open") == 0 &&
			scrapeSum(t, ctx, metrics, "hatrpc_server_connections") == 0
	}, testenv.HangGuard(time.Minute), 20*time.Millisecond, "the server still holds the killed client's stream")
	o, err = runCmd(ctx, nil, "put", "after", "f=v", "--addr", addr)
	require.NoError(t, err, o)
	o, err = runCmd(ctx, nil, "check", "--db", dir)
	require.NoError(t, err, o)
	o, err = runCmd(ctx, nil, "scan", "--all", "--count", "1", "--addr", addr)
	require.NoError(t, err, o)
	require.Contains(t, o, "after\n  f=v\n(1 records)")
}
