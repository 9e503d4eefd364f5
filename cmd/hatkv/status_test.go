package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestStatusLine(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 45, 10, 123e6, time.UTC)
	ops := []ycsb.Summary{
		{Operation: "READ", Count: 1500, MaxUs: 900, MinUs: 20, AvgUs: 55.5, P50Us: 50, P95Us: 80, P99Us: 120, P999Us: 700},
		{Operation: "UPDATE", Count: 500, Errors: 2, MaxUs: 1000, MinUs: 30, AvgUs: 70.25, P50Us: 60, P95Us: 90, P99Us: 150, P999Us: 990},
		{Operation: "SCAN", Errors: 3},
	}
	assert.Equal(t, "2026-12-02 03:45:10:123 [run] 20.0 sec: 40000 operations; 2005.00 current ops/sec;"+
		" [READ: Count=1500, Max=900, Min=20, Avg=55.50, 50=50, 95=80, 99=120, 99.9=700]"+
		" [UPDATE: Count=500, Max=1000, Min=30, Avg=70.25, 50=60, 95=90, 99=150, 99.9=990] [UPDATE-FAILED: Count=2]"+
		" [SCAN-FAILED: Count=3]",
		statusLine(now, "run", 20*time.Second, 40000, ops, time.Second))
}

var (
	statusRE = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3} \[(load|run)\] \d+\.\d sec: \d+ operations; \d+\.\d\d current ops/sec;(.*)$`)
	statusOp = regexp.MustCompile(` \[([A-Z-]+): Count=(\d+)(?:, Max=\d+, Min=\d+, Avg=\d+\.\d\d, 50=\d+, 95=\d+, 99=\d+, 99\.9=\d+)?\]`)
)

// TestBenchStatusLines: --status-interval prints YCSB-style status lines
// to stderr, not a terminal here, for each phase; each interval's counts
// are that interval's only, so per operation they add up to the phase's
// report. Standard output keeps the report alone.
func TestBenchStatusLines(t *testing.T) {
	addr := serveInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
	defer cancel()
	dir := t.TempDir()
	wl, jsonPath := filepath.Join(dir, "allops"), filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(wl, []byte(allOps), 0o644))

	cmd := newRootCmd()
	var stdout, stderr syncBuffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetArgs([]string{"bench", "--addr", addr, "-P", wl, "--threads", "4", "--seed", "7",
		"--status-interval", "5ms", "--json", jsonPath})
	require.NoError(t, cmd.ExecuteContext(ctx), "%s\n%s", stdout.String(), stderr.String())
	assert.NotContains(t, stdout.String(), "current ops/sec")

	sums := map[string]map[string]int64{"load": {}, "run": {}}
	lines := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		m := statusRE.FindStringSubmatch(l)
		require.NotNil(t, m, "not a status line: %q", l)
		lines[m[1]]++
		for _, op := range statusOp.FindAllStringSubmatch(m[2], -1) {
			n, err := strconv.ParseInt(op[2], 10, 64)
			require.NoError(t, err)
			sums[m[1]][op[1]] += n
		}
		assert.Equal(t, strings.TrimSpace(m[2]), strings.TrimSpace(strings.Join(statusOp.FindAllString(m[2], -1), "")), "every part of %q is an operation's", l)
	}
	assert.Positive(t, lines["load"])
	assert.Positive(t, lines["run"])

	var results []phaseResult
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &results))
	require.Len(t, results, 2)
	for _, r := range results {
		want := map[string]int64{}
		for _, s := range r.Report.Ops {
			if s.Count > 0 {
				want[s.Operation] = s.Count
			}
			if s.Errors > 0 {
				want[s.Operation+"-FAILED"] = s.Errors
			}
		}
		assert.Equal(t, want, sums[r.Phase], "phase %s: the intervals add up to the report", r.Phase)
	}
}
