package testutil

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Python is Debian's interpreter: python3-thrift is installed only for it,
// not for whatever python3 comes first on PATH.
const Python = "/usr/bin/python3"

// PyChecks is how many checks testdata/pyclient.py performs; the test
// asserts the exact count so that a check silently dropped from the script
// shows up.
const PyChecks = 15

// TestdataDir is the absolute path of test/testdata.
func TestdataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// RequireTool fails (not skips: the environment is part of the contract)
// when an external tool the interop tests need is missing.
func RequireTool(t testing.TB, path string) {
	t.Helper()
	_, err := exec.LookPath(path)
	require.NoError(t, err, "interop tests need %s", path)
}

// GenPython runs Debian's thrift compiler on the interop IDL and the
// Pokes IDL (packages interop and pokes) into a fresh temporary directory
// and returns it.
func GenPython(t testing.TB) string {
	t.Helper()
	RequireTool(t, "thrift")
	RequireTool(t, Python)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, idl := range []string{"interop.thrift", "pokes.thrift"} {
		out, err := exec.CommandContext(ctx, "thrift", "--gen", "py", "-out", dir,
			filepath.Join(TestdataDir(), idl)).CombinedOutput()
		require.NoError(t, err, "thrift --gen py %s: %s", idl, out)
	}
	return dir
}

var okLine = regexp.MustCompile(`(?m)^OK (\d+)$`)

// RunPython runs testdata/pyclient.py against addr with the given stack and
// returns the number of checks it passed.
func RunPython(t testing.TB, genDir, addr string, s Stack) int {
	t.Helper()
	return runPyScript(t, "pyclient.py", 2*time.Minute, genDir, addr, s)
}

// runPyScript runs testdata/script GENDIR HOST PORT FRAMING PROTOCOL
// [extra...] and returns the number on the "OK n" line it printed last.
func runPyScript(t testing.TB, script string, limit time.Duration, genDir, addr string, s Stack, extra ...string) int {
	t.Helper()
	host, port, err := splitHostPort(addr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	args := append([]string{filepath.Join(TestdataDir(), script), genDir, host, port, string(s.Framing), string(s.Protocol)}, extra...)
	cmd := exec.CommandContext(ctx, Python, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", script, s, out)
	m := okLine.FindSubmatch(out)
	require.NotNil(t, m, "%s printed no OK line: %s", script, out)
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

var listeningLine = regexp.MustCompile(`^LISTENING (\d+)$`)

// StartPythonServer runs testdata/pyserver.py, Apache's Python
// TSimpleServer with the reference Interop handler, in stack s, and
// returns its loopback address; the process is killed when the test ends.
func StartPythonServer(t testing.TB, genDir string, s Stack) string {
	t.Helper()
	cmd := exec.Command(Python, filepath.Join(TestdataDir(), "pyserver.py"),
		genDir, string(s.Framing), string(s.Protocol))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pyserver %s stderr:\n%s", s, stderr.String())
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		m := listeningLine.FindStringSubmatch(l)
		require.NotNil(t, m, "pyserver %s printed %q (stderr follows)", s, l)
		return net.JoinHostPort("127.0.0.1", m[1])
	case <-time.After(time.Minute):
		t.Fatalf("pyserver %s did not start within a minute", s)
		return ""
	}
}

// OrderCase is the service pyorder.py drives on one connection.
type OrderCase string

const (
	// OrderNotes: notify("5"), notify("6"), then drainNotes() must
	// return ["5", "6"] (the Interop service).
	OrderNotes OrderCase = "notes"
	// OrderPokes: poke(5), poke(6), then pokes() must return 11 (the
	// Pokes service).
	OrderPokes OrderCase = "pokes"
)

// RunPythonOrder runs testdata/pyorder.py against addr with the given
// stack for rounds rounds of case oc on one connection, failing the test
// unless every round found both oneway calls done, in order.
func RunPythonOrder(t testing.TB, genDir, addr string, s Stack, oc OrderCase, rounds int) {
	t.Helper()
	require.Equal(t, rounds, runPyScript(t, "pyorder.py", 5*time.Minute, genDir, addr, s, strconv.Itoa(rounds), string(oc)), "pyorder %s %s", oc, s)
}
