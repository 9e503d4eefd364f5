package bench

import (
	"context"
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

// TestPythonClients runs clients/hs2_check.py: the 22 queries and a bad
// statement through impyla and PyHive, each over its default NOSASL
// binary socket and over Thrift over HTTP (which the HatRPC server detects
// on the same port), against a server that also offers lanes to HatRPC
// clients; then over SASL PLAIN.
func TestPythonClients(t *testing.T) {
	_, err := os.Stat(venvPython)
	require.NoError(t, err, "run `make -C tpch deps` first")
	ref := filepath.Join(t.TempDir(), "reference.json")
	f, err := os.Create(ref)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(8*time.Minute))
	defer cancel()
	require.NoError(t, WriteReference(ctx, f, testDB, testSF))
	require.NoError(t, f.Close())

	srv, err := Serve(testDB, "127.0.0.1:0", hs2.Function, fastpathtest.Provider())
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
	}
	// impyla's metadata calls (PyHive and gohive expose none).
	t.Run("impyla/metadata", func(t *testing.T) {
		runCheck(t, ctx, "3 passed, 0 failed", "--client", "impyla", "--port", port, "--reference", ref, "--metadata")
	})

	// The same with SASL PLAIN: a user and password the server checks.
	plain, err := ServePLAIN(testDB, "127.0.0.1:0", hs2.Function, nil, func(_ context.Context, user, password string) bool {
		return user == "tpch" && password == "s3cret"
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, plain.Shutdown(ctx)) }()
	_, port, err = net.SplitHostPort(plain.Addr)
	require.NoError(t, err)
	for _, c := range []string{"impyla", "pyhive"} {
		t.Run(c+"/plain", func(t *testing.T) {
			runCheck(t, ctx, "23 passed, 0 failed", "--client", c, "--port", port, "--reference", ref, "--user", "tpch", "--password", "s3cret")
			runCheck(t, ctx, "1 passed, 0 failed", "--client", c, "--port", port, "--reference", ref, "--user", "tpch", "--password", "wrong", "--expect-refused")
		})
	}
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

// TestGohivePLAIN: gohive's "NONE" authentication is SASL PLAIN with the
// configured user and password; a wrong password is refused.
func TestGohivePLAIN(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	var refused []string
	srv, err := ServePLAIN(testDB, "127.0.0.1:0", hs2.Vanilla, nil, func(_ context.Context, user, password string) bool {
		return user == "tpch" && password == "s3cret"
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()
	host, port := hostPort(t, srv.Addr)

	for _, tc := range []struct {
		password string
		ok       bool
	}{{"s3cret", true}, {"wrong", false}} {
		cfg := gohive.NewConnectConfiguration()
		cfg.Username, cfg.Password = "tpch", tc.password
		cfg.ConnectTimeout, cfg.SocketTimeout = hangMinute, hangMinute
		conn, err := gohive.Connect(host, port, "NONE", cfg)
		if !tc.ok {
			require.Error(t, err, "password %q", tc.password)
			refused = append(refused, err.Error())
			continue
		}
		require.NoError(t, err)
		cur := conn.Cursor()
		for q := 1; q <= 22; q++ {
			require.NoError(t, Compare(gohiveQuery(t, ctx, cur, testQueries[q]), testAnswers[q]), "Q%d", q)
		}
		cur.Close()
		require.NoError(t, conn.Close())
	}
	require.Equal(t, []string{`Bad SASL negotiation status: 3 (sasl: authentication failed for user "tpch")`}, refused)
}

func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, portText, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	return host, port
}
