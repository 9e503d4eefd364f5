package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// TestRun runs the bench as `tpch bench` does, on two queries with one
// timed run each, and checks what it reports and that the setups ran
// interleaved (each query on every setup before the next query).
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	setups := Setups([]hs2.Config{hs2.Vanilla, hs2.Service, hs2.Function}, []string{"tcp", fastpathtest.Provider()})
	require.Len(t, setups, 5)
	var progress bytes.Buffer
	ts, err := Run(ctx, testDB, testQueries, setups, Options{
		Queries: []int{6, 13}, Reps: 1, Answers: testAnswers, Timeout: hangMinute, Progress: &progress,
	})
	require.NoError(t, err)
	require.Len(t, ts, 10)
	for _, tm := range ts {
		require.Len(t, tm.Runs, 1)
		if tm.Setup.Transport == "tcp" {
			assert.Greater(t, tm.SocketBytes, int64(1000), "%s Q%d", tm.Setup, tm.Query)
		} else {
			assert.Equal(t, int64(-1), tm.SocketBytes, "%s Q%d", tm.Setup, tm.Query)
		}
	}
	// Interleaved: every setup's Q6, then every setup's Q13.
	plines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	require.Len(t, plines, 10)
	for i, l := range plines {
		assert.Contains(t, l, map[bool]string{true: " Q6 ", false: " Q13 "}[i < 5], l)
	}

	var table, csv bytes.Buffer
	require.NoError(t, WriteTable(&table, ts, setups, []int{6, 13}))
	assert.Contains(t, table.String(), "total (medians)")
	require.NoError(t, WriteCSV(&csv, ts))
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	require.Len(t, lines, 11)
	assert.Equal(t, "config,transport,query,rows,socket_bytes,best_us,median_us,runs_us", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "vanilla,tcp,6,1,"), lines[1])

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, ts, setups, []int{6, 13}))
	var rep Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &rep))
	require.Len(t, rep.Setups, 5)
	require.Len(t, rep.Queries, 10)
	for i, su := range setups {
		var med, best time.Duration
		for _, tm := range ts {
			if tm.Setup == su {
				med, best = med+tm.Median(), best+tm.Best()
			}
		}
		assert.Equal(t, SetupReport{Config: su.Config.String(), Transport: su.Transport,
			TotalMedianUS: med.Microseconds(), TotalBestUS: best.Microseconds()}, rep.Setups[i])
	}
	q := rep.Queries[0]
	assert.Equal(t, []any{"vanilla", "tcp", 6, 1, ts[0].SocketBytes, []int64{ts[0].Runs[0].Microseconds()}},
		[]any{q.Config, q.Transport, q.Query, q.Rows, q.SocketBytes, q.RunsUS})
	assert.Nil(t, q.Exchange, "no workers")
}
