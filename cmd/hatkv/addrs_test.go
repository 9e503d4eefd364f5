package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchAddrsThreeServers: bench --addrs spreads the keys of a YCSB B
// load over three servers within ±10 % of a third each (the keys the load
// sent each server and the records each one then stores), runs the B mix
// against all three, and prints the usual tables.
func TestBenchAddrsThreeServers(t *testing.T) {
	addrs := []string{serveInProcess(t), serveInProcess(t), serveInProcess(t)}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(180*time.Second))
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	// 12,000 keys keep the sampling noise (1.4 % per server) well inside
	// the ±10 % asserted.
	out, err := runCmd(ctx, nil, "bench", "--addrs", strings.Join(addrs, ","), "-P", "workloadb",
		"-p", "recordcount=12000", "-p", "operationcount=6000", "-p", "fieldcount=2", "-p", "fieldlength=10",
		"--threads", "8", "--seed", "3", "--json", jsonPath)
	require.NoError(t, err, out)
	t.Log("\n" + out)
	assert.Contains(t, out, "3 servers "+strings.Join(addrs, ","))
	assert.Contains(t, out, "keys per server (consistent hashing):")
	assert.Regexp(t, `(?m)^\s*READ\s+\d+\s+0\s`, out)

	var results []phaseResult
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &results))
	require.Len(t, results, 2)
	var stored int64
	for _, r := range results {
		require.Len(t, r.Servers, 3, r.Phase)
		for i, s := range r.Servers {
			assert.Equal(t, addrs[i], s.Addr)
			assert.Positive(t, s.Keys, "%s phase: %s", r.Phase, s.Addr)
			// The run phase's accesses follow the zipfian popularity of
			// the keys (a hot key's server gets more); the keys themselves
			// are what consistent hashing spreads.
			if r.Phase == "load" {
				assert.LessOrEqual(t, math.Abs(s.Deviation), 0.10, "%s got %d keys", s.Addr, s.Keys)
				stored += s.Records
				assert.Equal(t, int64(s.Keys), s.Records, "every key loaded is stored on the server it was sent to")
				assert.LessOrEqual(t, math.Abs(float64(s.Records)/4000-1), 0.10, "%s stores %d records", s.Addr, s.Records)
			}
		}
	}
	assert.Equal(t, int64(12000), stored)
}

// TestCLIAddrs: put, get, scan and stats over --addrs act as one store.
func TestCLIAddrs(t *testing.T) {
	addrs := strings.Join([]string{serveInProcess(t), serveInProcess(t), serveInProcess(t)}, ",")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		out, err := runCmd(ctx, nil, "put", k, "v="+k, "--addrs", addrs)
		require.NoError(t, err, out)
	}
	out, err := runCmd(ctx, nil, "get", "d", "--addrs", addrs)
	require.NoError(t, err, out)
	assert.Equal(t, "v=d\n", out)
	out, err = runCmd(ctx, nil, "scan", "b", "--count", "3", "--addrs", addrs)
	require.NoError(t, err, out)
	assert.Equal(t, "b\n  v=b\nc\n  v=c\nd\n  v=d\n(3 records)\n", out)
	// Streamed: every server's stream merged in key order.
	out, err = runCmd(ctx, nil, "scan", "--all", "--addrs", addrs)
	require.NoError(t, err, out)
	assert.Equal(t, "a\n  v=a\nb\n  v=b\nc\n  v=c\nd\n  v=d\ne\n  v=e\nf\n  v=f\n(6 records)\n", out)
	out, err = runCmd(ctx, nil, "scan", "b", "e", "--addrs", addrs)
	require.NoError(t, err, out)
	assert.Equal(t, "b\n  v=b\nc\n  v=c\nd\n  v=d\n(3 records)\n", out)
	out, err = runCmd(ctx, nil, "stats", "--addrs", addrs)
	require.NoError(t, err, out)
	assert.Regexp(t, `(?m)^records\s+6$`, out)
	out, err = runCmd(ctx, nil, "del", "e", "--addrs", addrs)
	require.NoError(t, err, out)
	_, err = runCmd(ctx, nil, "get", "e", "--addrs", addrs)
	assert.ErrorContains(t, err, `key "e" not found`)

	_, err = runCmd(ctx, nil, "get", "d", "--addrs", addrs, "--addr", "127.0.0.1:1")
	assert.ErrorContains(t, err, "if any flags in the group [addr addrs] are set none of the others can be")
}
