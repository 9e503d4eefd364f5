package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape reads the unlabelled metric name from a /metrics URL.
func scrape(t *testing.T, ctx context.Context, url, name string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(string(body))
	require.NotNil(t, m, "%s not in /metrics", name)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// TestClientsKilledMidCall: client processes killed with SIGKILL in the
// middle of their calls leave nothing on the server — no FLOCK peer, lane
// or connection — and the server serves the next client on the fast path.
func TestClientsKilledMidCall(t *testing.T) {
	addr, out := serveInProcessOutput(t, "--debug-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`debug: (http://\S+)/metrics`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	metrics := m[1] + "/metrics"
	// Hang guards, not speed bounds: ten client processes starting at
	// once under emulation (the ibv suite) take well over a minute to
	// all attach on a loaded host.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	defer http.DefaultClient.CloseIdleConnections()
	_, err := runCmd(ctx, nil, "bench", "--addr", addr, "-P", "workloadb", "-p", "recordcount=100", "--phase", "load")
	require.NoError(t, err)

	const clients = 10
	var procs []*exec.Cmd
	outs := make([]*syncBuffer, clients)
	for i := 0; i < clients; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join([]string{"bench", "--addr", addr, "-P", "workloadb",
			"-p", "recordcount=100", "-p", "target=400", "--phase", "run", "--duration", "4m", "--threads", "2", "--progress", "off"}, "\x1f"))
		outs[i] = &syncBuffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		stdin, err := cmd.StdinPipe() // held open: the child lives until killed
		require.NoError(t, err)
		defer stdin.Close()
		require.NoError(t, cmd.Start())
		procs = append(procs, cmd)
	}
	// Every client is attached and calling. Each calls at most 400 times
	// a second (target): under emulation, ten clients calling flat out
	// left the later ones' fast-path setups too little CPU to finish
	// within the server's setup timeout, and they attached only after
	// minutes of retries.
	if !assert.Eventually(t, func() bool {
		return scrape(t, ctx, metrics, "hatrpc_server_flock_peers") == clients
	}, testenv.HangGuard(3*time.Minute), 20*time.Millisecond, "clients did not attach") {
		dumpAttach(t, ctx, metrics, out, outs, procs)
		t.FailNow()
	}
	time.Sleep(100 * time.Millisecond) // mid-call
	for _, p := range procs {
		require.NoError(t, p.Process.Signal(os.Kill))
	}
	for _, p := range procs {
		_ = p.Wait()
	}
	require.Eventually(t, func() bool {
		return scrape(t, ctx, metrics, "hatrpc_server_flock_peers") == 0 &&
			scrape(t, ctx, metrics, "hatrpc_server_lanes") == 0 &&
			scrape(t, ctx, metrics, "hatrpc_server_connections") == 0
	}, testenv.HangGuard(30*time.Second), 20*time.Millisecond, "the server still holds what killed clients had")
	o, err := runCmd(ctx, nil, "put", "after", "f=v", "--addr", addr, "--transport", transportOfServer(out.String()))
	require.NoError(t, err, o)
	require.Eventually(t, func() bool { return scrape(t, ctx, metrics, "hatrpc_server_flock_peers") == 0 },
		testenv.HangGuard(30*time.Second), 20*time.Millisecond, "the CLI's handle did not leave with it")
}

// dumpAttach logs what a failed attach leaves to look at: the server's
// fast-path series, its output and each client's.
func dumpAttach(t *testing.T, ctx context.Context, metrics string, server *syncBuffer, clients []*syncBuffer, procs []*exec.Cmd) {
	get := func(url string) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	for _, l := range strings.Split(get(metrics), "\n") {
		if strings.HasPrefix(l, "hatrpc_server_") && !strings.Contains(l, "_bucket") && !strings.HasSuffix(l, " 0") {
			t.Log(l)
		}
	}
	t.Logf("server:\n%s", server.String())
	t.Logf("server goroutines:\n%s", get(strings.TrimSuffix(metrics, "/metrics")+"/debug/pprof/goroutine?debug=1"))
	// SIGQUIT: each client prints its goroutines and exits.
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGQUIT)
	}
	for i, p := range procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(testenv.HangGuard(30 * time.Second)):
		}
		t.Logf("client %d:\n%s", i, clients[i].String())
	}
}

// transportOfServer is the lane transport the server reported ("tcp + shm
// lanes": shm), so the check insists on the fast path the server has.
func transportOfServer(out string) string {
	if m := regexp.MustCompile(`tcp \+ (\w+) lanes`).FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return "auto"
}
