package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// venvPython is the interpreter of the virtual environment `make -C tpch
// deps` makes, with impyla and PyHive.
const venvPython = "../.venv/bin/python"

// plainUser is the one user the tests' PLAIN servers take.
func plainUser(_ context.Context, user, password string) bool {
	return user == "tpch" && password == "s3cret"
}

// TestPythonClients runs clients/hs2_check.py: the 22 queries and a bad
// statement through impyla and PyHive on one port that takes every kind
// of client, told apart by their first bytes (also offering lanes to
// HatRPC clients): their default NOSASL binary socket, Thrift over HTTP
// (without credentials: NOSASL's form), SASL PLAIN; then PLAIN over HTTP
// and wrong passwords (refused) there.
func TestPythonClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(8*time.Minute))
	defer cancel()
	ref := writeReference(t, ctx)

	srv, err := ServeAuth(testDB, "127.0.0.1:0", hs2.Function, fastpathtest.Provider(), nil, Auth{NOSASL: true, PLAIN: plainUser})
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()
	_, port, err := net.SplitHostPort(srv.Addr)
	require.NoError(t, err)

	for _, c := range []string{"impyla", "pyhive"} {
		t.Run(c, func(t *testing.T) {
			runCheck(t, ctx, "23 passed, 0 failed", "--client", c, "--port", port, "--reference", ref)
		})
		t.Run(c+"/http", func(t *testing.T) {
			runCheck(t, ctx, "23 passed, 0 failed", "--client", c, "--port", port, "--reference", ref, "--http")
		})
		t.Run(c+"/plain", func(t *testing.T) {
			runCheck(t, ctx, "23 passed, 0 failed", "--client", c, "--port", port, "--reference", ref, "--user", "tpch", "--password", "s3cret")
			runCheck(t, ctx, "1 passed, 0 failed", "--client", c, "--port", port, "--reference", ref, "--user", "tpch", "--password", "wrong",
				"--expect-refused", `sasl: authentication failed for user "tpch"`)
		})
		t.Run(c+"/http/plain", func(t *testing.T) {
			runCheck(t, ctx, "1 passed, 0 failed", "--client", c, "--port", port, "--reference", ref, "--smoke", "--http", "--user", "tpch", "--password", "s3cret")
			runCheck(t, ctx, "1 passed, 0 failed", "--client", c, "--port", port, "--reference", ref, "--http", "--user", "tpch", "--password", "wrong",
				"--expect-refused", refusedHTTP[c])
		})
	}
	// impyla's metadata calls (PyHive and gohive expose none).
	t.Run("impyla/metadata", func(t *testing.T) {
		runCheck(t, ctx, "3 passed, 0 failed", "--client", "impyla", "--port", port, "--reference", ref, "--metadata")
	})
	// HatRPC's own clients are NOSASL ones there, their results over lanes.
	t.Run("hatrpc/lanes", func(t *testing.T) {
		s, err := OpenHatRPC(ctx, srv.Addr, hs2.Function, fastpathtest.Provider())
		require.NoError(t, err)
		defer func() { assert.NoError(t, s.Close(ctx)) }()
		got, err := s.Query(ctx, testQueries[1])
		require.NoError(t, err)
		require.NoError(t, Compare(got, testAnswers[1]))
		requireLanes(t, s, "TCLIService:FetchResults")
	})
}

// refusedHTTP is what each client's error says of a 401: impyla raises
// an HttpError with the status and body; PyHive fails to read the text
// body as Thrift, and hs2_check.py adds its transport's status.
var refusedHTTP = map[string]string{
	"impyla": `HTTP code 401: Unauthorized`,
	"pyhive": `(HTTP 401 Unauthorized: Basic realm="HiveServer2", charset="UTF-8")`,
}

// TestPythonClientsPLAINOnly: on a port that requires PLAIN, impyla and
// PyHive authenticate over the binary socket and over HTTP; NOSASL
// clients get an error that says so, HTTP ones without credentials 401.
func TestPythonClientsPLAINOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(4*time.Minute))
	defer cancel()
	ref := writeReference(t, ctx)
	srv, err := ServeAuth(testDB, "127.0.0.1:0", hs2.Function, "off", nil, Auth{PLAIN: plainUser})
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()
	_, port, err := net.SplitHostPort(srv.Addr)
	require.NoError(t, err)
	for _, c := range []string{"impyla", "pyhive"} {
		t.Run(c, func(t *testing.T) {
			args := []string{"--client", c, "--port", port, "--reference", ref}
			runCheck(t, ctx, "1 passed, 0 failed", append(args, "--smoke", "--user", "tpch", "--password", "s3cret")...)
			runCheck(t, ctx, "1 passed, 0 failed", append(args, "--smoke", "--http", "--user", "tpch", "--password", "s3cret")...)
			runCheck(t, ctx, "1 passed, 0 failed", append(args, "--expect-refused", "NOSASL connections are refused")...)
			runCheck(t, ctx, "1 passed, 0 failed", append(args, "--http", "--expect-refused", refusedHTTP[c])...)
			runCheck(t, ctx, "1 passed, 0 failed", append(args, "--http", "--user", "tpch", "--password", "wrong", "--expect-refused", refusedHTTP[c])...)
		})
	}
}

// writeReference writes the queries and published answers for
// hs2_check.py.
func writeReference(t *testing.T, ctx context.Context) string {
	t.Helper()
	_, err := os.Stat(venvPython)
	require.NoError(t, err, "run `make -C tpch deps` first")
	ref := filepath.Join(t.TempDir(), "reference.json")
	f, err := os.Create(ref)
	require.NoError(t, err)
	require.NoError(t, WriteReference(ctx, f, testDB, testSF))
	require.NoError(t, f.Close())
	return ref
}

// runCheck runs clients/hs2_check.py with args and requires its last line.
func runCheck(t *testing.T, ctx context.Context, last string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, venvPython, append([]string{"../clients/hs2_check.py", "--host", "127.0.0.1"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, last, lines[len(lines)-1], "%s", out)
}

// TestGohive runs the 22 queries through gohive (Apache Thrift Go's
// TCLIService client behind a database cursor), reading typed values
// with RowMap: over its binary socket with NOSASL, and over Thrift over
// HTTP (mode "http" with "NONE": user and password in basic auth, which a
// NOSASL server does not check).
func TestGohive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	srv, err := Serve(testDB, "127.0.0.1:0", hs2.Vanilla, "off")
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()
	host, port := hostPort(t, srv.Addr)

	for _, mode := range []struct{ transport, auth string }{{"binary", "NOSASL"}, {"http", "NONE"}} {
		t.Run(mode.transport, func(t *testing.T) {
			cfg := gohive.NewConnectConfiguration()
			cfg.ConnectTimeout, cfg.SocketTimeout, cfg.HttpTimeout = hangMinute, hangMinute, hangMinute
			cfg.TransportMode, cfg.HTTPPath, cfg.Username, cfg.Password = mode.transport, "cliservice", "tpch", "x"
			conn, err := gohive.Connect(host, port, mode.auth, cfg)
			require.NoError(t, err)
			defer func() { assert.NoError(t, conn.Close()) }()
			cur := conn.Cursor()
			defer cur.Close()

			cur.Exec(ctx, "SELEC 1")
			require.ErrorContains(t, cur.Err, "syntax error")

			for q := 1; q <= 22; q++ {
				require.NoError(t, Compare(gohiveQuery(t, ctx, cur, testQueries[q]), testAnswers[q]), "Q%d", q)
			}
		})
	}
}

func gohiveQuery(t *testing.T, ctx context.Context, cur *gohive.Cursor, query string) *Result {
	t.Helper()
	cur.Exec(ctx, query)
	require.NoError(t, cur.Err)
	got := &Result{}
	desc := cur.Description()
	require.NoError(t, cur.Err)
	for _, d := range desc {
		got.Columns = append(got.Columns, d[0])
	}
	for cur.HasMore(ctx) {
		require.NoError(t, cur.Err)
		m := cur.RowMap(ctx)
		require.NoError(t, cur.Err)
		row := make([]string, len(desc))
		for i, d := range desc {
			row[i] = cellText(m[d[0]])
		}
		got.Rows = append(got.Rows, row)
	}
	require.NoError(t, cur.Err)
	return got
}

func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// TestGohiveAuth: gohive against a port that takes every client and one
// that requires PLAIN ("NONE" is SASL PLAIN with Username/Password over
// the socket, Basic credentials over HTTP); wrong passwords and, where
// PLAIN is required, NOSASL are refused with the server's reason. A
// connection that sends nothing and one that sends garbage are open
// meanwhile: neither holds the others, the garbage one is closed.
func TestGohiveAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	const (
		wrongSASL = `Bad SASL negotiation status: 3 (sasl: authentication failed for user "tpch")`
		wrongHTTP = `HTTP Response code: 401`
		nosasl    = `sasl: this server requires SASL PLAIN authentication (a user and password); NOSASL connections are refused`
	)
	modes := []struct {
		name, transport, auth, password string
		queries                         string // the port where the 22 queries run; the nation query elsewhere
		errBoth, errPLAINOnly           string // empty: connects
	}{
		{"binary/NOSASL", "binary", "NOSASL", "", "", "", nosasl},
		{"binary/PLAIN", "binary", "NONE", "s3cret", "nosasl,plain", "", ""},
		{"binary/PLAIN wrong", "binary", "NONE", "wrong", "", wrongSASL, wrongSASL},
		{"http/PLAIN", "http", "NONE", "s3cret", "plain", "", ""},
		{"http/PLAIN wrong", "http", "NONE", "wrong", "", wrongHTTP, wrongHTTP},
	}
	for _, port := range []struct {
		name string
		auth Auth
	}{{"nosasl,plain", Auth{NOSASL: true, PLAIN: plainUser}}, {"plain", Auth{PLAIN: plainUser}}} {
		t.Run(port.name, func(t *testing.T) {
			srv, err := ServeAuth(testDB, "127.0.0.1:0", hs2.Vanilla, "off", nil, port.auth)
			require.NoError(t, err)
			defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()
			host, portNum := hostPort(t, srv.Addr)

			silent, err := net.Dial("tcp", srv.Addr)
			require.NoError(t, err)
			defer silent.Close()
			garbage, err := net.Dial("tcp", srv.Addr)
			require.NoError(t, err)
			defer garbage.Close()
			require.NoError(t, garbage.SetDeadline(time.Now().Add(hangMinute)))
			_, err = garbage.Write([]byte("GARBAGE!\x00\x00\x00\x00"))
			require.NoError(t, err)
			n, err := garbage.Read(make([]byte, 64))
			assert.Equal(t, 0, n)
			assert.Error(t, err, "the garbage connection is closed")
			assert.False(t, isTimeout(err), "closed, not timed out: %v", err)

			for _, m := range modes {
				t.Run(m.name, func(t *testing.T) {
					cfg := gohive.NewConnectConfiguration()
					cfg.ConnectTimeout, cfg.SocketTimeout, cfg.HttpTimeout = hangMinute, hangMinute, hangMinute
					cfg.TransportMode, cfg.HTTPPath, cfg.Username, cfg.Password = m.transport, "cliservice", "tpch", m.password
					conn, err := gohive.Connect(host, portNum, m.auth, cfg)
					want := m.errBoth
					if !port.auth.NOSASL {
						want = m.errPLAINOnly
					}
					if want != "" {
						require.Error(t, err)
						require.ErrorContains(t, err, want)
						return
					}
					require.NoError(t, err)
					defer func() { assert.NoError(t, conn.Close()) }()
					cur := conn.Cursor()
					defer cur.Close()
					if m.queries != port.name {
						got := gohiveQuery(t, ctx, cur, "SELECT count(*) AS n, sum(n_regionkey) AS s FROM nation")
						assert.Equal(t, [][]string{{"25", "50"}}, got.Rows)
						return
					}
					for q := 1; q <= 22; q++ {
						require.NoError(t, Compare(gohiveQuery(t, ctx, cur, testQueries[q]), testAnswers[q]), "Q%d", q)
					}
				})
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, portText, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	return host, port
}
