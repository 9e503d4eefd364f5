package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type proc struct {
	cmd    *exec.Cmd
	addr   string
	output *syncBuffer
	exited chan struct{}
}

// startServeProcess runs `hatkv serve` in a child process (the re-executed
// test binary) with the IDL defaults, i.e. kv.sync=always.
func startServeProcess(t *testing.T, db string) *proc {
	return startServeProcessOn(t, db, "127.0.0.1:0")
}

// startServeProcessOn is startServeProcess listening on listen.
func startServeProcessOn(t *testing.T, db, listen string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join([]string{"serve", "--db", db, "--listen", listen}, "\x1f"))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe() // held open for the child's lifetime
	require.NoError(t, err)
	t.Cleanup(func() { _ = stdin.Close() })
	p := &proc{cmd: cmd, output: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.output
	require.NoError(t, cmd.Start())
	addr := make(chan string, 1)
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = p.output.Write([]byte(line + "\n"))
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		_ = cmd.Wait()
	})
	select {
	case p.addr = <-addr:
		return p
	case <-p.exited:
		t.Fatalf("serve exited before listening:\n%s", p.output.String())
	case <-time.After(testenv.HangGuard(60 * time.Second)):
		t.Fatalf("serve did not start:\n%s", p.output.String())
	}
	return nil
}

// wait waits for the process to exit and returns its exit error.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(testenv.HangGuard(60 * time.Second)):
		t.Fatal("server process did not exit")
	}
	return p.cmd.Wait()
}

func TestServeProcessLifecycle(t *testing.T) {
	tests := []struct {
		name     string
		sig      syscall.Signal
		graceful bool
	}{
		{"SIGTERM shuts down gracefully", syscall.SIGTERM, true},
		{"SIGINT shuts down gracefully", syscall.SIGINT, true},
		{"SIGKILL loses no acknowledged write", syscall.SIGKILL, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
			defer cancel()
			db := t.TempDir()
			p := startServeProcess(t, db)
			for _, k := range []string{"a", "b", "c"} {
				out, err := runCmd(ctx, nil, "put", "key-"+k, "f="+k, "--addr", p.addr)
				require.NoError(t, err, out)
			}
			require.NoError(t, p.cmd.Process.Signal(tt.sig))
			err := p.wait(t)
			if tt.graceful {
				require.NoError(t, err, "exit status 0 after %v:\n%s", tt.sig, p.output.String())
				assert.Contains(t, p.output.String(), "shutting down")
				assert.Contains(t, p.output.String(), "hatkv: stopped")
			} else {
				var ee *exec.ExitError
				require.True(t, errors.As(err, &ee), "killed: %v", err)
			}

			p2 := startServeProcess(t, db)
			out, err := runCmd(ctx, nil, "scan", "--addr", p2.addr)
			require.NoError(t, err, out)
			assert.Contains(t, out, "key-a\n  f=a\nkey-b\n  f=b\nkey-c\n  f=c\n(3 records)")
			require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, p2.wait(t))
		})
	}
}

// hatkv serves on a unix socket file: clients reach it with --addr
// unix:PATH, a server killed leaves the file, which the next one takes
// over, and a graceful stop removes it.
func TestServeUnixSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
	defer cancel()
	db, sock := t.TempDir(), filepath.Join(t.TempDir(), "hatkv.sock")
	p := startServeProcessOn(t, db, "unix:"+sock)
	require.Equal(t, "unix:"+sock, p.addr)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	out, err := runCmd(ctx, nil, "put", "k", "f=v", "--addr", p.addr)
	require.NoError(t, err, out)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.wait(t)
	_, err = os.Stat(sock)
	require.NoError(t, err, "a killed server leaves its socket file")

	p2 := startServeProcessOn(t, db, "unix:"+sock)
	out, err = runCmd(ctx, nil, "get", "k", "--addr", p2.addr)
	require.NoError(t, err, out)
	assert.Contains(t, out, "f=v")
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p2.wait(t))
	_, err = os.Stat(sock)
	require.ErrorIs(t, err, os.ErrNotExist, "a stopped server removes its socket file")
}

// TestBenchProcessSIGINT: a real Ctrl-C (SIGINT to the bench process)
// writes the partial results and exits 0.
func TestBenchProcessSIGINT(t *testing.T) {
	addr := serveInProcess(t)
	dir := t.TempDir()
	jsonPath := dir + "/r.json"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join([]string{"bench", "--addr", addr, "-P", "workloadc",
		"-p", "recordcount=20", "--phase", "both", "--duration", "2m", "--json", jsonPath}, "\x1f"))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(testenv.HangGuard(60 * time.Second))
	for !strings.Contains(out.String(), "== load phase ==") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Contains(t, out.String(), "== load phase ==", "the run phase started")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status 0 after SIGINT:\n%s", out.String())
	case <-time.After(testenv.HangGuard(60 * time.Second)):
		_ = cmd.Process.Kill()
		t.Fatalf("bench did not stop on SIGINT:\n%s", out.String())
	}
	assert.Contains(t, out.String(), "hatkv bench: interrupted; partial results written to "+jsonPath)
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"interrupted": true`)
	// The signal lands after the load phase ended: while the run phase
	// runs or, on a slow machine, before it began. Either way the run
	// phase is there, interrupted.
	var results []phaseResult
	require.NoError(t, json.Unmarshal(b, &results))
	require.Len(t, results, 2, "%s", b)
	assert.Equal(t, "load", results[0].Phase)
	assert.Equal(t, "run", results[1].Phase)
	assert.True(t, results[1].Interrupted)
}
