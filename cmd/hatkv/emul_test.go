package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var emulAddrRE = regexp.MustCompile(`emulations \(argrpc, herd, pilaf, rfp\) over \S+ served at (\S+)`)

func emulAddr(t *testing.T, out *syncBuffer) string {
	t.Helper()
	var addr string
	require.Eventually(t, func() bool {
		m := emulAddrRE.FindStringSubmatch(out.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, testenv.HangGuard(30*time.Second), 10*time.Millisecond, "no emulation address in:\n%s", out)
	return addr
}

func benchEmulation(t *testing.T, ctx context.Context, addr, kind string, extra ...string) string {
	t.Helper()
	args := append([]string{"bench", "--emulate", kind, "--emul-addr", addr, "-P", "workloada_hatkv",
		"-p", "recordcount=200", "-p", "operationcount=400", "--threads", "3", "--seed", "5"}, extra...)
	out, err := runCmd(ctx, nil, args...)
	require.NoError(t, err, out)
	require.Contains(t, out, "emulation "+kind)
	for _, op := range []string{"READ", "UPDATE", "MULTIREAD", "MULTIUPDATE"} {
		assert.Regexp(t, `(?m)^\s*`+op+`\s+\d+\s+0\s`, out, "%s: a %s row with no errors", kind, op)
	}
	assert.Regexp(t, `INSERT\s+200\s+0\s`, out)
	assert.NotContains(t, out, "operations failed")
	return out
}

// TestBenchEmulate: `serve --emul-listen` and `bench --emulate` for every
// emulation, in one process (two shm devices).
func TestBenchEmulate(t *testing.T) {
	_, out := serveInProcessOutput(t, "--emul-listen", "127.0.0.1:0")
	addr := emulAddr(t, out)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
	defer cancel()
	for _, kind := range []string{"argrpc", "herd", "pilaf", "rfp"} {
		got := benchEmulation(t, ctx, addr, kind, "--emul-polling", "event")
		if kind == "pilaf" {
			assert.Regexp(t, `pilaf: \d+ one-sided GETs, \d+ READs, \d+ retries, 0 answered by RPC`, got)
		}
	}
	_, err := runCmd(ctx, nil, "bench", "--emulate", "grpc", "--emul-addr", addr)
	require.ErrorContains(t, err, "unknown emulation")
	_, err = runCmd(ctx, nil, "bench", "--emulate", "herd")
	require.ErrorContains(t, err, "--emul-addr")
}

// TestBenchEmulateCrossProcess: the emulations between two processes, the
// server a real `hatkv serve` child (shm maps its segment across).
func TestBenchEmulateCrossProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join([]string{"serve", "--db", t.TempDir(),
		"--listen", "127.0.0.1:0", "--sync", "nosync", "--emul-listen", "127.0.0.1:0"}, "\x1f"))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe() // closing it ends the child
	require.NoError(t, err)
	out := &syncBuffer{}
	cmd.Stderr = out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = out.Write([]byte(sc.Text() + "\n"))
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(testenv.HangGuard(20 * time.Second)):
			t.Error("serve child did not stop on SIGINT")
		}
		_ = stdin.Close()
		_ = cmd.Wait()
		assert.Contains(t, out.String(), "hatkv: stopped")
	})
	addr := emulAddr(t, out)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
	defer cancel()
	for _, kind := range []string{"argrpc", "herd", "pilaf", "rfp"} {
		benchEmulation(t, ctx, addr, kind)
	}
}

// TestBenchEmulateInterrupted: Ctrl-C in `bench --emulate` ends the phase
// with its partial results printed and written, and bench succeeds, as
// over HatRPC (it used to fail with "run phase interrupted" and write
// nothing).
func TestBenchEmulateInterrupted(t *testing.T) {
	_, out := serveInProcessOutput(t, "--emul-listen", "127.0.0.1:0")
	addr := emulAddr(t, out)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
	defer cancel()
	dir := t.TempDir()
	csvPath, jsonPath := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json")
	runStarted := regexp.MustCompile(`\[run\]\s+\S+s [1-9]\d* ops`)
	got, err := runCmdUntil(ctx, func(out string) bool { return runStarted.MatchString(out) },
		"bench", "--emulate", "herd", "--emul-addr", addr, "-P", "workloadc", "-p", "recordcount=50",
		"--threads", "2", "--emul-polling", "event", "--progress", "on", "--phase", "both", "--duration", "1m",
		"--csv", csvPath, "--json", jsonPath)
	require.NoError(t, err, got)
	assert.Regexp(t, `INSERT\s+50\s+0\s`, got, "the whole load phase")
	assert.Contains(t, got, "(interrupted: partial results)")
	assert.Regexp(t, `(?m)^\s*READ\s+[1-9]\d*\s`, got, "the partial run table is printed")
	assert.Contains(t, got, "hatkv bench: interrupted; partial results written to "+csvPath+", "+jsonPath)

	var results []phaseResult
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &results))
	require.Len(t, results, 2)
	assert.Equal(t, "load", results[0].Phase)
	assert.False(t, results[0].Interrupted)
	assert.Equal(t, "run", results[1].Phase)
	assert.True(t, results[1].Interrupted)
	assert.Positive(t, results[1].Report.Operations)
	c, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	assert.Contains(t, string(c), "run (interrupted),OVERALL,")
}
