package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fb303/gen/fb303"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestFB303Python: `hatkv serve` (a child process) answers Apache's
// Python fb303 client, generated now by Debian's thrift compiler from
// pkg/fb303/fb303.thrift, framed and unframed.
func TestFB303Python(t *testing.T) {
	testutil.RequireTool(t, "thrift")
	testutil.RequireTool(t, testutil.Python)
	gen := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
	defer cancel()
	out, err := exec.CommandContext(ctx, "thrift", "--gen", "py", "-out", gen,
		filepath.Join("..", "..", "pkg", "fb303", "fb303.thrift")).CombinedOutput()
	require.NoError(t, err, "thrift --gen py: %s", out)

	before := time.Now().Unix()
	p := startServeProcess(t, t.TempDir())
	host, port, ok := strings.Cut(p.addr, ":")
	require.True(t, ok, p.addr)
	for i, framing := range []string{"framed", "buffered"} {
		t.Run(framing, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, testutil.Python, filepath.Join("testdata", "fb303client.py"), gen, host, port, framing)
			cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "fb303client: %s", out)
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				k, v, _ := strings.Cut(line, " ")
				got[k] = v
			}
			var since int64
			_, err = fmt.Sscan(got["alive_since"], &since)
			require.NoError(t, err, "%s", out)
			assert.GreaterOrEqual(t, since, before)
			assert.LessOrEqual(t, since, time.Now().Unix())
			delete(got, "alive_since")
			if i > 0 {
				// The last run's connection may still be closing, and
				// its counters snapshot may still be under a second old
				// (fb303.DefaultCountersMaxAge) or be taken anew.
				assert.Contains(t, []string{"1", "2"}, got["connections"])
				assert.Contains(t, []string{"5", "11"}, got["calls"])
				got["connections"], got["calls"] = "1", "5"
			}
			assert.Equal(t, map[string]string{
				"status":      "ALIVE",
				"details":     "serving",
				"name":        "hatkv",
				"calls":       "5", // getCounters is counted as it starts
				"connections": "1",
				"transport":   "auto",
			}, got)
		})
	}
}

// TestFB303Lane: a HatRPC client on the fast path calls fb303 on `hatkv
// serve --transport shm` (rdma on ibv) over a lane, as the server's own
// counters, read through fb303, confirm.
func TestFB303Lane(t *testing.T) {
	addr := serveInProcess(t, "--transport", fastpathtest.Transport())
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	conn, err := client.Dial(ctx, addr, client.WithRDMA(fastpathtest.Provider()), client.WithHints(&fb303.FacebookServiceHints))
	require.NoError(t, err)
	defer conn.Close()
	c := fb303.NewFacebookServiceClient(conn)
	st, err := c.GetStatus(ctx)
	require.NoError(t, err)
	assert.Equal(t, fb303.FbStatus_ALIVE, st)
	assert.Equal(t, fastpathtest.Transport(), conn.Plan("FacebookService:getStatus").Transport.String())
	cs, err := c.GetCounters(ctx)
	require.NoError(t, err)
	tr := fastpathtest.Transport()
	assert.Equal(t, int64(1), cs[`hatrpc_server_calls_total{function="getStatus",service="FacebookService",transport="`+tr+`"}`])
	assert.Equal(t, int64(1), cs[`hatrpc_server_calls_total{function="getCounters",service="FacebookService",transport="`+tr+`"}`])
	assert.Zero(t, cs[`hatrpc_server_calls_total{function="getStatus",service="FacebookService",transport="tcp"}`])
	opt, err := c.GetOption(ctx, "transport")
	require.NoError(t, err)
	assert.Equal(t, tr, opt)
}
