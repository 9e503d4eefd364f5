package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireOtherUIDEnv makes TestOtherUIDClient fail, rather than pass with
// nothing checked, when the test process cannot run a client as another
// user (it needs root).
const requireOtherUIDEnv = "HATRPC_REQUIRE_OTHER_UID"

// nobody is the uid and gid the client runs as.
const nobody = 65534

// TestOtherUIDClient: a client run as another user than the server's. shm
// cannot join them (the kernel refuses to map the server's segments), so
// with the default auto the client's calls succeed over TCP, saying so in
// one log line (and the server counts them as TCP calls); with
// --transport shm the call fails with an error naming the cause. The
// server offers shm whatever the host (--transport shm).
func TestOtherUIDClient(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv(requireOtherUIDEnv) != "" {
			t.Fatalf("%s is set, but running a client as uid %d needs root (euid %d)", requireOtherUIDEnv, nobody, os.Geteuid())
		}
		t.Logf("not root (euid %d): no client can be run as another user; set %s to make this a failure", os.Geteuid(), requireOtherUIDEnv)
		return
	}
	addr, out := serveInProcessOutput(t, "--transport", "shm", "--debug-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`debug: (http://\S+)/metrics`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
	defer cancel()
	defer http.DefaultClient.CloseIdleConnections()

	// The test binary's directory is root's own (0700): the client runs a
	// copy that the other user may execute.
	bin := testBinaryCopy(t, "hatkv-otheruid-", 0o755)
	dir := filepath.Dir(bin)

	asNobody := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, "-test.run=^$")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join(args, "\x1f"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		stdin, err := cmd.StdinPipe() // the child exits when it closes
		require.NoError(t, err)
		defer stdin.Close()
		var outb syncBuffer
		cmd.Stdout, cmd.Stderr = &outb, &outb
		err = cmd.Run()
		return outb.String(), err
	}
	tcpCalls := func(fn string) float64 {
		return scrapeLabelled(t, ctx, m[1]+"/metrics", `hatrpc_server_calls_total{function="`+fn+`",service="HatKV",transport="tcp"}`)
	}

	got, err := asNobody("put", "k", "f=v", "--addr", addr)
	require.NoError(t, err, got)
	got, err = asNobody("get", "k", "--addr", addr)
	require.NoError(t, err, got)
	assert.Contains(t, got, "f=v")
	assert.Equal(t, 1, strings.Count(got, "hatrpc: fast path unavailable; calls go over TCP"), got)
	assert.Contains(t, got, "shm needs client and server to run as the same user")
	assert.Equal(t, 1.0, tcpCalls("Put"))
	assert.Equal(t, 1.0, tcpCalls("Get"))

	got, err = asNobody("get", "k", "--addr", addr, "--transport", "shm")
	require.Error(t, err, got)
	assert.Contains(t, got, "client: shm ")
	assert.Contains(t, got, "setup failed")
	assert.Contains(t, got, "rdma: bad peer attributes (shm needs client and server to run as the same user, or use --transport tcp/auto)")
	assert.Equal(t, 1.0, tcpCalls("Get"), "an insisted shm call does not go over TCP")
}

// scrapeLabelled reads one series (name with labels, as exposed) from a
// /metrics URL; 0 when absent.
func scrapeLabelled(t *testing.T, ctx context.Context, url, series string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err, line)
			return f
		}
	}
	return 0
}

// testBinaryCopy copies the test binary into a new directory of the given
// mode, removed when the test ends: the binary's own directory is its
// user's (0700), so another user can run only such a copy.
func testBinaryCopy(t *testing.T, prefix string, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, mode))
	bin := filepath.Join(dir, "hatkv.test")
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	return bin
}
