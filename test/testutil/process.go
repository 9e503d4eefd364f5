package testutil

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

// ChildEnv is the variable that turns a re-executed test binary into a
// helper process; its value names the helper's role.
const ChildEnv = "HATRPC_TEST_CHILD"

// Child is a helper process: the test binary re-executed with ChildEnv set.
// It talks to the parent by lines on stdout and stops when stdin closes.
type Child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	waited chan error
}

// StartChild re-executes the running test binary in role with extra
// environment entries ("K=V"). TestMain must dispatch on ChildEnv before
// running tests.
func StartChild(t testing.TB, role string, env ...string) *Child {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	// -test.run matches nothing so that a child that ignores ChildEnv would
	// at least not recurse into the tests.
	cmd := exec.Command(self, "-test.run", "^$")
	cmd.Env = append(append(os.Environ(), ChildEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &Child{cmd: cmd, stdin: stdin, lines: make(chan string, 16), waited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.waited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.Done()
	})
	return c
}

// Done is closed-equivalent: it yields the exit status once the child has
// exited and its output has been read.
func (c *Child) Done() <-chan error {
	return c.waited
}

// Expect waits for the next stdout line and checks its prefix; it returns
// the rest of the line. timeout guards against a hang only, so it is scaled
// (testenv.HangGuard).
func (c *Child) Expect(t testing.TB, prefix string, timeout time.Duration) string {
	t.Helper()
	timeout = testenv.HangGuard(timeout)
	select {
	case line, ok := <-c.lines:
		require.True(t, ok, "child exited while waiting for %q", prefix)
		rest, found := strings.CutPrefix(line, prefix)
		require.True(t, found, "child said %q, want prefix %q", line, prefix)
		return strings.TrimSpace(rest)
	case <-time.After(timeout):
		require.FailNow(t, "timeout", "child did not say %q within %v", prefix, timeout)
		return ""
	}
}

// Kill sends SIGKILL: the child gets no chance to close anything, the
// kernel drops its sockets.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
}

// CloseStdin tells a well-behaved child to finish.
func (c *Child) CloseStdin() error { return c.stdin.Close() }

// WaitExit waits for the child's exit; timeout is a hang guard, scaled
// (testenv.HangGuard).
func (c *Child) WaitExit(t testing.TB, timeout time.Duration) error {
	t.Helper()
	timeout = testenv.HangGuard(timeout)
	select {
	case err := <-c.waited:
		c.waited <- err // keep Done usable for the cleanup
		return err
	case <-time.After(timeout):
		require.FailNow(t, "timeout", "child did not exit within %v", timeout)
		return nil
	}
}

// ChildMain is what TestMain calls first: when the binary runs as a child
// it runs roles[role] and exits; otherwise it returns and the tests run.
func ChildMain(roles map[string]func(ctx context.Context, out io.Writer, in io.Reader) error) {
	role := os.Getenv(ChildEnv)
	if role == "" {
		return
	}
	f, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	if err := f(ctx, os.Stdout, os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RaiseNoFile raises the soft RLIMIT_NOFILE to the hard limit (children
// inherit it) and returns the new soft limit.
func RaiseNoFile(t testing.TB) uint64 {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur < lim.Max {
		old := lim.Cur
		lim.Cur = lim.Max
		require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
		t.Cleanup(func() {
			lim.Cur = old
			_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		})
	}
	return lim.Cur
}

// MemSnapshot is the process state the fault tests bound.
type MemSnapshot struct {
	HeapInuse  uint64
	Goroutines int
}

func (m MemSnapshot) String() string {
	return fmt.Sprintf("heap in use %.1f MiB, %d goroutines", float64(m.HeapInuse)/(1<<20), m.Goroutines)
}

// Snapshot measures after two GCs so that garbage does not count.
func Snapshot() MemSnapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return MemSnapshot{HeapInuse: ms.HeapInuse, Goroutines: runtime.NumGoroutine()}
}

// WaitSettled polls until the goroutine count is at most max or timeout
// passes, and returns the last snapshot. timeout is a hang guard, scaled
// (testenv.HangGuard); the caller asserts on the snapshot.
func WaitSettled(maxGoroutines int, timeout time.Duration) MemSnapshot {
	deadline := time.Now().Add(testenv.HangGuard(timeout))
	for {
		s := Snapshot()
		if s.Goroutines <= maxGoroutines || time.Now().After(deadline) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
}
