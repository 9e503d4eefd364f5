package crosstest_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/testcert"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/crosstest"
	tt "github.com/hatrpc/hatrpc/test/crosstest/gen/thrifttest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// cellTimeout bounds one cell; every call of it is under it too.
const cellTimeout = 2 * time.Minute

// apacheGoChecks is how many checks apacheChecks passes, by multiplexing.
func apacheGoChecks(multiplexed bool) int {
	if multiplexed {
		return 26
	}
	return 25
}

// pythonChecks is how many checks crossclient.py passes in one cell.
func pythonChecks(multiplexed bool) int {
	if multiplexed {
		return 43
	}
	return 42
}

// keys is a throwaway server certificate, as a Go keypair and as the one
// PEM file (key and certificate) Python's TSSLServerSocket takes.
type keys struct {
	cert   tls.Certificate
	pyfile string
}

func makeKeys(t *testing.T) keys {
	t.Helper()
	dir := t.TempDir()
	f := testcert.Write(t, dir, "crosstest")
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	require.NoError(t, err)
	key, err := os.ReadFile(f.Key)
	require.NoError(t, err)
	crt, err := os.ReadFile(f.Cert)
	require.NoError(t, err)
	py := filepath.Join(dir, "server.pem")
	require.NoError(t, os.WriteFile(py, append(key, crt...), 0o600))
	return keys{cert: cert, pyfile: py}
}

// startHat runs HatRPC's ThriftTest server, TLS or not, on a loopback
// port until the test ends.
func startHat(t *testing.T, k keys, ssl bool) string {
	t.Helper()
	var opts []server.Option
	if ssl {
		opts = append(opts, server.WithTLS(&tls.Config{Certificates: []tls.Certificate{k.cert}, MinVersion: tls.VersionTLS12}))
	}
	return serveHat(t, &crosstest.Handler{}, opts...)
}

func serveHat(t *testing.T, h crosstest.Handlers, opts ...server.Option) string {
	t.Helper()
	return serveHatOn(t, h, "127.0.0.1:0", opts...)
}

// serveHatOn runs the server on addr (host:port, or unix:PATH) until the
// test ends and returns the address it listens on.
func serveHatOn(t *testing.T, h crosstest.Handlers, addr string, opts ...server.Option) string {
	t.Helper()
	srv := crosstest.NewServer(h, opts...)
	ln, err := server.Listen(addr)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
		assert.ErrorIs(t, <-done, server.ErrServerClosed)
	})
	return ln.Addr().String()
}

// hatFlags are the test client's flags for cell c of a server at addr
// (host:port, or the socket path of a domain cell).
func hatFlags(t *testing.T, c cell, addr string) *crosstest.Flags {
	t.Helper()
	// Debian's compiler predates uuid, so Apache's peers have no testUuid.
	f := &crosstest.Flags{Stack: c.hatStack(), TestLoops: 1, NoUUID: true}
	if c.socket == "domain" {
		f.Stack.DomainSocket = addr
		return f
	}
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	f.Host = host
	f.Port, err = strconv.Atoi(port)
	require.NoError(t, err)
	return f
}

// wrongMulti answers testMulti with the wrong byte and the rest as Apache.
type wrongMulti struct{ crosstest.Handler }

func (w *wrongMulti) TestMulti(ctx context.Context, a0 int8, a1 int32, a2 int64, a3 map[int16]string, a4 tt.Numberz, a5 tt.UserId) (*tt.Xtruct, error) {
	r, err := w.Handler.TestMulti(ctx, a0, a1, a2, a3, a4, a5)
	r.ByteThing++
	return r, err
}

// TestClientFailsOnMismatch: the test client stops at the first wrong
// answer and says which, as Apache's do.
func TestClientFailsOnMismatch(t *testing.T) {
	addr := serveHat(t, &wrongMulti{})
	ctx, cancel := context.WithTimeout(context.Background(), cellTimeout)
	defer cancel()
	n, err := crosstest.RunClient(ctx, hatFlags(t, cell{protocol: "binary", transport: "framed", socket: "ip"}, addr))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "binary-framed-ip, loop 1: testMulti: want")
	assert.Less(t, n, crosstest.CheckCount(false, false))
}

// TestApacheGoClientToHatServer: Apache's Go client, in every stack of the
// matrix, calls HatRPC's ThriftTest server.
func TestApacheGoClientToHatServer(t *testing.T) {
	k := makeKeys(t)
	addrs := map[bool]string{false: startHat(t, k, false), true: startHat(t, k, true)}
	for _, c := range cellsFor(goClient) {
		t.Run(c.name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cellTimeout)
			defer cancel()
			s := c.hatStack()
			tc, sc := dialApache(t, addrs[c.ssl()], s)
			n, err := apacheChecks(ctx, tc, sc)
			require.NoError(t, err)
			assert.Equal(t, apacheGoChecks(s.Multiplexed()), n)
		})
	}
}

// TestHatClientToApacheGoServer: HatRPC's test client, in every stack of
// the matrix, calls Apache's Go TSimpleServer.
func TestHatClientToApacheGoServer(t *testing.T) {
	k := makeKeys(t)
	for _, c := range cellsFor(goServer) {
		t.Run(c.name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cellTimeout)
			defer cancel()
			s := c.hatStack()
			n, err := crosstest.RunClient(ctx, hatFlags(t, c, startApacheServer(t, s, k.cert)))
			require.NoError(t, err)
			assert.Equal(t, crosstest.CheckCount(s.Multiplexed(), false), n)
		})
	}
}

// genPython runs Debian's thrift compiler on ThriftTest.thrift (the
// corpus's v0.16 copy: the compiler predates uuid) into a temporary
// directory.
func genPython(t *testing.T) string {
	t.Helper()
	testutil.RequireTool(t, "thrift")
	testutil.RequireTool(t, testutil.Python)
	idl := filepath.Join(testenv.SharedIDLDir(t), "apache", "thrift", "test", "v0.16", "ThriftTest.thrift")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "thrift", "--gen", "py", "-out", dir, idl).CombinedOutput()
	require.NoError(t, err, "thrift --gen py: %s", out)
	return dir
}

func pyScript(name string) string {
	return filepath.Join(testutil.TestdataDir(), "..", "crosstest", "testdata", name)
}

// TestPythonClientToHatServer: Apache's Python client (Debian's
// python3-thrift) calls HatRPC's server in every cell of the matrix, all
// cells in one interpreter, each on a connection of its own.
func TestPythonClientToHatServer(t *testing.T) {
	gen := genPython(t)
	k := makeKeys(t)
	cells := cellsFor(pyClient)
	addrs := map[bool]string{false: startHat(t, k, false), true: startHat(t, k, true)}
	sock := filepath.Join(t.TempDir(), "tt.sock")
	serveHatOn(t, &crosstest.Handler{}, "unix:"+sock)
	runPythonCells(t, gen, cells, func(c cell) string {
		if c.socket == "domain" {
			return sock
		}
		_, port, err := net.SplitHostPort(addrs[c.ssl()])
		require.NoError(t, err)
		return port
	})
}

// runPythonCells runs crossclient.py on cells, each against the server at
// addr(c) (a port, or the socket path of a domain cell), all in one
// interpreter, and checks each cell's result in a subtest.
func runPythonCells(t *testing.T, gen string, cells []cell, addr func(cell) string) {
	t.Helper()
	var args []string
	for _, c := range cells {
		args = append(args, strings.Join([]string{c.protocol, c.transport, c.socket, addr(c)}, ","))
	}
	results, stderr, err := runPythonClient(t, gen, args, time.Duration(len(cells))*cellTimeout)
	for _, c := range cells {
		t.Run(c.name(), func(t *testing.T) {
			want := "OK " + strconv.Itoa(pythonChecks(c.hatStack().Multiplexed()))
			assert.Equal(t, want, results[c.name()], "crossclient.py stderr:\n%s", stderr)
		})
	}
	require.NoError(t, err, "crossclient.py stderr:\n%s", stderr)
}

// pyServerAddr is where crossserver.py said cell c listens.
func pyServerAddr(c cell, where string) string {
	if c.socket == "domain" {
		return where
	}
	return net.JoinHostPort("127.0.0.1", where)
}

// pyServerCell is c as crossserver.py takes it: a domain cell names its
// socket file.
func pyServerCell(t *testing.T, c cell) string {
	parts := []string{c.protocol, c.transport, c.socket}
	if c.socket == "domain" {
		parts = append(parts, filepath.Join(t.TempDir(), "s.sock"))
	}
	return strings.Join(parts, ",")
}

// runPythonClient runs crossclient.py on cells (PROTOCOL,TRANSPORT,SOCKET,ADDR)
// against 127.0.0.1 and returns each cell's result ("OK <n>" or
// "FAIL <reason>") by name, its stderr and its exit error.
func runPythonClient(t *testing.T, gen string, cells []string, timeout time.Duration) (map[string]string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Python, append([]string{pyScript("crossclient.py"), gen, "127.0.0.1"}, cells...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	results := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "CELL "); ok {
			name, result, _ := strings.Cut(rest, " ")
			results[name] = result
		}
	}
	return results, stderr.String(), err
}

// TestHatClientToPythonServer: HatRPC's test client calls Apache's Python
// TSimpleServer in every cell of the matrix, one server per cell, all in
// one interpreter.
func TestHatClientToPythonServer(t *testing.T) {
	gen := genPython(t)
	k := makeKeys(t)
	cells := cellsFor(pyServer)
	args := []string{pyScript("crossserver.py"), gen, k.pyfile}
	for _, c := range cells {
		args = append(args, pyServerCell(t, c))
	}
	ports := startPythonServers(t, args, len(cells))
	for _, c := range cells {
		t.Run(c.name(), func(t *testing.T) {
			port, ok := ports[c.name()]
			require.True(t, ok, "crossserver.py did not start %s", c.name())
			ctx, cancel := context.WithTimeout(context.Background(), cellTimeout)
			defer cancel()
			s := c.hatStack()
			n, err := crosstest.RunClient(ctx, hatFlags(t, c, pyServerAddr(c, port)))
			require.NoError(t, err)
			assert.Equal(t, crosstest.CheckCount(s.Multiplexed(), false), n)
		})
	}
}

// startPythonServers runs crossserver.py and returns the port of each
// cell it announced; the process stops when the test ends.
func startPythonServers(t *testing.T, args []string, cells int) map[string]string {
	t.Helper()
	cmd := exec.Command(testutil.Python, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		err := cmd.Wait()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Errorf("crossserver.py: %v", err)
		}
		for range lines { // drain, so the reader ends
		}
		if t.Failed() {
			t.Logf("crossserver.py stderr:\n%s", stderr.String())
		}
	})
	ports := map[string]string{}
	timeout := time.After(2 * time.Minute)
	for len(ports) < cells {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "crossserver.py exited: %s", stderr.String())
			f := strings.Fields(line)
			require.Len(t, f, 3, "crossserver.py said %q", line)
			require.Equal(t, "LISTENING", f[0], "crossserver.py said %q", line)
			ports[f[1]] = f[2]
		case <-timeout:
			require.FailNow(t, "crossserver.py did not start its servers within 2 minutes", stderr.String())
		}
	}
	return ports
}

// lockedBuffer is a process's stderr that the test may read while the
// process still writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
