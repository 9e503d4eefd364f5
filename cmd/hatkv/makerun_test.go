//go:build linux

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// openPTY opens a pseudo-terminal pair: the master (the terminal's side,
// where typed keys go in) and the slave (what the program runs on).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	require.NoError(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0), "unlockpt")
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	require.NoError(t, err, "ptsname")
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	return m, s
}

// TestMakeRunCtrlC: `make run` in a terminal, stopped with Ctrl-C (typed
// into a pseudo-terminal, so the kernel signals the terminal's foreground
// process group, as for a person), shuts hatkv down gracefully and ends
// with status 0, as the README and scripts/run.sh say. (make used to end
// by the SIGINT it got too: status 130.)
func TestMakeRunCtrlC(t *testing.T) {
	root := testenv.RepoRoot(t)
	master, slave := openPTY(t)
	defer master.Close()
	cmd := exec.Command("make", "-s", "-C", root, "run",
		"RUN_ARGS=--db "+filepath.Join(t.TempDir(), "data")+" --listen 127.0.0.1:0")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own with the pty as its controlling terminal: make
	// is its foreground process group, as in a shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	slave.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()

	lines := make(chan string, 64)
	var out strings.Builder
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	ready := time.After(testenv.HangGuard(5 * time.Minute)) // make deps and go build first
	for listening := false; !listening; {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "make run ended before serving:\n%s", out.String())
			out.WriteString(l + "\n")
			listening = strings.Contains(l, "listening on 127.0.0.1:")
		case <-ready:
			t.Fatalf("hatkv did not start:\n%s", out.String())
		}
	}
	_, err := master.Write([]byte{3}) // Ctrl-C
	require.NoError(t, err)
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(testenv.HangGuard(2 * time.Minute)):
		t.Fatalf("make run did not end after Ctrl-C:\n%s", out.String())
	}
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
				break
			}
			out.WriteString(l + "\n")
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			done = true
		}
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		t.Fatalf("make run ended with %v after Ctrl-C (want status 0):\n%s", ee.ProcessState, out.String())
	}
	require.NoError(t, werr)
	assert.Contains(t, out.String(), "hatkv: stopped")
}
