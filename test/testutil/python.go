package testutil

import (
	"context"
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

// GenPython runs Debian's thrift compiler on the interop IDL into a fresh
// temporary directory and returns it.
func GenPython(t testing.TB) string {
	t.Helper()
	RequireTool(t, "thrift")
	RequireTool(t, Python)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "thrift", "--gen", "py", "-out", dir,
		filepath.Join(TestdataDir(), "interop.thrift")).CombinedOutput()
	require.NoError(t, err, "thrift --gen py: %s", out)
	return dir
}

var okLine = regexp.MustCompile(`(?m)^OK (\d+)$`)

// RunPython runs testdata/pyclient.py against addr with the given stack and
// returns the number of checks it passed.
func RunPython(t testing.TB, genDir, addr string, s Stack) int {
	t.Helper()
	host, port, err := splitHostPort(addr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Python, filepath.Join(TestdataDir(), "pyclient.py"),
		genDir, host, port, string(s.Framing), string(s.Protocol))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "pyclient %s: %s", s, out)
	m := okLine.FindSubmatch(out)
	require.NotNil(t, m, "pyclient printed no OK line: %s", out)
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}
