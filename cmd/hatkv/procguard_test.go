package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// probeProcEnv makes the test binary the attacker of probeProc.
const probeProcEnv = "HATKV_TEST_PROBE_PROC"

// probeProc is a same-uid process trying the server's /proc entries: it
// opens every memfd in /proc/<pid>/fd and reads the first page of a shared
// segment through /proc/<pid>/mem. It prints "fd=<errno or ok:N> mem=<errno
// or ok:N>" (N memfds opened, bytes read).
func probeProc(pid string) int {
	res := func(err error, n int) string {
		var en syscall.Errno
		switch {
		case errors.As(err, &en):
			return unixErrName(en)
		case err != nil:
			return "error"
		}
		return "ok:" + strconv.Itoa(n)
	}
	dir := "/proc/" + pid + "/fd"
	var fdErr error
	opened := 0
	ents, err := os.ReadDir(dir)
	fdErr = err
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(p); err != nil || !strings.HasPrefix(target, "/memfd:hatrpc-shm") {
			continue
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			fdErr = err
			continue
		}
		f.Close()
		opened++
	}
	if err == nil && opened == 0 && fdErr == nil {
		fdErr = errors.New("no memfd listed")
	}
	read, memErr := readShared(pid)
	fmt.Printf("PROBE fd=%s mem=%s\n", res(fdErr, opened), res(memErr, read))
	return 0
}

// readShared reads the first page of the first hatrpc segment mapped by pid
// through /proc/pid/mem.
func readShared(pid string) (int, error) {
	mem, err := os.Open("/proc/" + pid + "/mem")
	if err != nil {
		return 0, err
	}
	defer mem.Close()
	maps, err := os.Open("/proc/" + pid + "/maps")
	if err != nil {
		return 0, err
	}
	defer maps.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/memfd:hatrpc-shm") {
			continue
		}
		lo, _, _ := strings.Cut(f[0], "-")
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return 0, err
		}
		page := make([]byte, os.Getpagesize())
		return mem.ReadAt(page, int64(start))
	}
	return 0, errors.New("no hatrpc segment mapped")
}

func unixErrName(e syscall.Errno) string {
	switch e {
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	}
	return "errno" + strconv.Itoa(int(e))
}

// TestServerProcClosed: a same-uid process cannot reach a shm server's
// segments or memory through /proc: the server makes itself non-dumpable
// when it opens shm, so /proc/<pid>/fd and /proc/<pid>/mem refuse it
// (EACCES or EPERM), while its shm clients still map its segments (the fd
// broker, pkg/rdma). With --dumpable (the opt-out) the same probe opens
// the segments and reads the memory. Run as root, server, client and
// attacker are all uid 65534 (root would pass /proc's checks).
func TestServerProcClosed(t *testing.T) {
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	bin := testBinaryCopy(t, "hatkv-procguard-", 0o777)
	dir := filepath.Dir(bin)

	// start runs a child; stop ends a server (closing its stdin), finish
	// waits for a command to end by itself.
	start := func(ctx context.Context, env []string, args ...string) (cmd *exec.Cmd, out *syncBuffer, stop, finish func()) {
		t.Helper()
		cmd = exec.CommandContext(ctx, bin, "-test.run=^$")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if args != nil {
			cmd.Env = append(cmd.Env, childArgsEnv+"="+strings.Join(args, "\x1f"))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		stdin, err := cmd.StdinPipe() // the child exits when it closes
		require.NoError(t, err)
		out = &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		return cmd, out, func() { stdin.Close(); _ = cmd.Wait() }, func() { _ = cmd.Wait(); stdin.Close() }
	}
	for _, tc := range []struct {
		name   string
		flags  []string
		closed bool
	}{
		{"default", nil, true},
		{"dumpable", []string{"--dumpable"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
			defer cancel()
			args := append([]string{"serve", "--db", filepath.Join(dir, tc.name), "--listen", "127.0.0.1:0",
				"--sync", "nosync", "--verify", "meta", "--transport", "shm"}, tc.flags...)
			srv, out, stop, _ := start(ctx, nil, args...)
			defer stop()
			var addr string
			require.Eventually(t, func() bool {
				m := listeningRE.FindStringSubmatch(out.String())
				if m != nil {
					addr = m[1]
				}
				return m != nil
			}, testenv.HangGuard(time.Minute), 10*time.Millisecond, "serve: %s", out)
			// A shm client of the same user opens the server's segments
			// (and so the server its device): through /proc/<pid>/fd with
			// --dumpable, through the server's fd broker without.
			cl, cout, _, finish := start(ctx, nil, "put", "k", "f=v", "--addr", addr, "--transport", "shm")
			finish()
			require.True(t, cl.ProcessState.Success(), "shm client: %s", cout)

			_, pout, _, finish := start(ctx, []string{probeProcEnv + "=" + strconv.Itoa(srv.Process.Pid)})
			finish()
			m := regexp.MustCompile(`PROBE fd=(\S+) mem=(\S+)`).FindStringSubmatch(pout.String())
			require.NotNil(t, m, "probe said %q", pout)
			t.Logf("probe of the server's /proc: fd=%s mem=%s", m[1], m[2])
			if tc.closed {
				assert.Regexp(t, `^(EACCES|EPERM)$`, m[1], "/proc/<server>/fd")
				assert.Regexp(t, `^(EACCES|EPERM)$`, m[2], "/proc/<server>/mem")
			} else {
				assert.Regexp(t, `^ok:[1-9]`, m[1], "/proc/<server>/fd of a dumpable server")
				assert.Regexp(t, `^ok:[1-9]`, m[2], "/proc/<server>/mem of a dumpable server")
			}
		})
	}
}
