package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// allOps mixes every YCSB operation plus the HatRPC multi operations.
const allOps = `recordcount=60
operationcount=300
fieldcount=10
fieldlength=100
readproportion=0.2
updateproportion=0.15
insertproportion=0.1
scanproportion=0.1
readmodifywriteproportion=0.15
multireadproportion=0.15
multiupdateproportion=0.15
maxscanlength=20
batchsize=10
requestdistribution=zipfian
`

var opRows = []string{"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE", "MULTIREAD", "MULTIUPDATE"}

func TestBenchSmoke(t *testing.T) {
	addr := serveInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
	defer cancel()
	dir := t.TempDir()
	wl := filepath.Join(dir, "allops")
	require.NoError(t, os.WriteFile(wl, []byte(allOps), 0o644))
	csvPath, jsonPath, svgPath := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")

	out, err := runCmd(ctx, nil, "bench", "--addr", addr, "-P", wl, "-p", "fieldlength=50", "--threads", "4",
		"--seed", "7", "--csv", csvPath, "--json", jsonPath, "--plot", svgPath)
	require.NoError(t, err, out)
	load, run, ok := strings.Cut(out, "== run phase ==")
	require.True(t, ok, out)
	assert.Contains(t, load, "== load phase ==")
	assert.Regexp(t, `INSERT\s+60\s+0\s`, load, "the load phase inserts recordcount records")
	assert.Contains(t, out, "10 fields x 50 B", "-p overrides the file")
	for _, op := range opRows {
		assert.Regexp(t, `(?m)^\s*`+op+`\s+\d+\s+0\s`, run, "run table has a %s row with no errors", op)
	}
	assert.Contains(t, out, "plan MultiPut")
	assert.Contains(t, run, "records/s (a multi-operation counts its 10 records)")

	f, err := os.Open(csvPath)
	require.NoError(t, err)
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	require.NoError(t, err)
	assert.Equal(t, []string{"phase", "operation", "count", "errors", "throughput_ops_sec", "avg_us", "p50_us", "p95_us", "p99_us", "p999_us", "max_us"}, rows[0])
	assert.Len(t, rows, 1+2+len(opRows)+1, "header, load INSERT+OVERALL, one row per op, run OVERALL")

	var results []phaseResult
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &results))
	require.Len(t, results, 2)
	assert.Equal(t, int64(300), results[1].Report.Operations)

	svg, err := os.ReadFile(svgPath)
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")
	assert.Contains(t, string(svg), "MULTIUPDATE")
}

func TestBenchDurationAndBuiltins(t *testing.T) {
	addr := serveInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
	defer cancel()
	out, err := runCmd(ctx, nil, "bench", "--addr", addr, "-P", "workloadb_hatkv", "-p", "recordcount=50",
		"--phase", "both", "--threads", "2", "--duration", "300ms", "--progress", "on")
	require.NoError(t, err, out)
	// A 300 ms run may be too short for the 2.5% write operations of
	// workload B on a loaded machine, so only the reads are required.
	assert.Regexp(t, `(?m)^\s*READ\s+\d+\s+0\s`, out)
	assert.Regexp(t, `(?m)^\s*MULTIREAD\s+\d+\s+0\s`, out)
	assert.NotContains(t, out, "operations failed")
	assert.Contains(t, out, "[run]", "progress line")

	out, err = runCmd(ctx, nil, "bench", "--addr", addr, "-P", "workloadc", "-p", "recordcount=50",
		"--phase", "run", "--operations", "40")
	require.NoError(t, err, out)
	assert.Regexp(t, `(?m)^\s*READ\s+40\s+0\s`, out, "run only, against the records loaded before")
	assert.NotContains(t, out, "== load phase ==")
}

func TestBenchRejects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"protocol over tcp", []string{"--protocol", "direct_write_imm", "--transport", "tcp"}, "needs engine lanes"},
		{"unknown protocol", []string{"--protocol", "smoke-signals"}, "protocol"},
		{"bad phase", []string{"--phase", "warmup"}, "want load, run or both"},
		{"unknown workload", []string{"-P", "workloadz"}, `unknown workload "workloadz"`},
		{"bad property", []string{"-p", "readproportion=lots"}, "readproportion"},
		{"no threads", []string{"--threads", "0"}, "at least 1"},
		{"emulation, bad phase", []string{"--emulate", "herd", "--emul-addr", "127.0.0.1:1", "--phase", "warmup"}, "want load, run or both"},
		{"emulation, no threads", []string{"--emulate", "herd", "--emul-addr", "127.0.0.1:1", "--threads", "0"}, "at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runCmd(ctx, nil, append([]string{"bench", "--addr", "127.0.0.1:1"}, tt.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestBenchInterrupted: Ctrl-C (the command's context ends, as
// signal.NotifyContext does in run) ends the phase; the partial results
// are printed and written to --csv/--json/--plot, and bench succeeds
// (issue 20: it used to write nothing and exit 1).
func TestBenchInterrupted(t *testing.T) {
	addr := serveInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	_, err := runCmd(ctx, nil, "bench", "--addr", addr, "-P", "workloadc", "-p", "recordcount=20", "--phase", "load")
	require.NoError(t, err)
	dir := t.TempDir()
	csvPath, jsonPath, svgPath := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	// Interrupted once the run phase has done some operations (its
	// progress line says so), not after a fixed time: on a slow machine
	// (the rxe VM emulates its CPU) opening the lanes alone can take
	// longer than any fixed pause.
	runStarted := regexp.MustCompile(`\[run\]\s+\S+s [1-9]\d* ops`)
	out, err := runCmdUntil(ctx, func(out string) bool { return runStarted.MatchString(out) },
		"bench", "--addr", addr, "-P", "workloadc", "-p", "recordcount=20", "--progress", "on",
		"--phase", "both", "--duration", "1m", "--csv", csvPath, "--json", jsonPath, "--plot", svgPath)
	require.NoError(t, err, out)
	assert.Contains(t, out, "(interrupted: partial results)")
	assert.Regexp(t, `(?m)^\s*(INSERT|READ)\s+\d+\s`, out, "the partial table is printed")
	assert.Contains(t, out, "hatkv bench: interrupted; partial results written to "+csvPath+", "+jsonPath+", "+svgPath)

	var results []phaseResult
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &results))
	require.NotEmpty(t, results)
	last := results[len(results)-1]
	assert.True(t, last.Interrupted, "the last phase is marked interrupted")
	c, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	assert.Contains(t, string(c), last.Phase+" (interrupted),OVERALL,")
	svg, err := os.ReadFile(svgPath)
	require.NoError(t, err)
	assert.Contains(t, string(svg), "(interrupted)")
}

// runCmdUntil runs the command and interrupts it (cancels its context, as
// Ctrl-C does) once its output so far satisfies cond; it fails the test
// if the command ends first or nothing satisfies cond while ctx lasts.
func runCmdUntil(ctx context.Context, cond func(out string) bool, args ...string) (string, error) {
	cmd, out := testCmd(nil, args...)
	ictx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ictx) }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond(out.String()) {
		select {
		case err := <-done:
			return out.String(), fmt.Errorf("ended before it could be interrupted: %v", err)
		case <-ctx.Done():
			return out.String(), fmt.Errorf("never ready to interrupt: %w", ctx.Err())
		case <-tick.C:
		}
	}
	interrupt()
	err := <-done
	return out.String(), err
}

// TestBenchOutputsNothingRecorded: a phase interrupted before it recorded
// an operation has no distribution to plot; the CSV and JSON are still
// written, the plot is left out saying why, and the interruption message
// lists only the files written. An uninterrupted phase that recorded
// nothing is an error.
func TestBenchOutputsNothingRecorded(t *testing.T) {
	for _, interrupted := range []bool{true, false} {
		t.Run(fmt.Sprint("interrupted=", interrupted), func(t *testing.T) {
			dir := t.TempDir()
			bf := &benchFlags{threads: 1, csvPath: filepath.Join(dir, "r.csv"), jsonPath: filepath.Join(dir, "r.json"),
				plotPath: filepath.Join(dir, "r.svg")}
			results := []phaseResult{{Phase: "run", Interrupted: interrupted, m: ycsb.NewMeasurements()}}
			var out strings.Builder
			// An earlier run's plot at the path is not truncated.
			old := filepath.Join(dir, "old.svg")
			require.NoError(t, os.WriteFile(old, []byte("<svg>earlier</svg>"), 0o644))
			bf.plotPath = old
			written, err := writeOutputs(&out, bf, results)
			if !interrupted {
				require.ErrorIs(t, err, ycsb.ErrNothingToPlot)
				assertFile(t, old, "<svg>earlier</svg>")
				assertOnlyFiles(t, dir, "old.svg", "r.csv", "r.json")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{bf.csvPath, bf.jsonPath}, written)
			assert.Equal(t, "hatkv bench: the run phase was interrupted before it recorded an operation: no plot written to "+bf.plotPath+"\n", out.String())
			assertFile(t, old, "<svg>earlier</svg>")
			assertOnlyFiles(t, dir, "old.svg", "r.csv", "r.json") // no temporary file left
			for _, f := range written {
				assert.FileExists(t, f)
			}
			assert.Equal(t, " written to "+bf.csvPath+", "+bf.jsonPath, writtenTo(written))
			assert.Equal(t, " above", writtenTo(nil))
		})
	}
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, string(b))
}

func assertOnlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	assert.ElementsMatch(t, want, got)
}

// TestBenchInterruptedBetweenPhases: Ctrl-C after the load phase ended
// and before the run phase began still leaves the run phase in the
// results, interrupted before its first operation, so the files do not
// read as a finished load-only benchmark; its empty distribution is not
// plotted.
func TestBenchInterruptedBetweenPhases(t *testing.T) {
	addr := serveInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	ictx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	phaseDone = func(phase string) {
		if phase == "load" {
			interrupt()
		}
	}
	t.Cleanup(func() { phaseDone = func(string) {} })
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	out, err := runCmd(ictx, nil, "bench", "--addr", addr, "-P", "workloadc", "-p", "recordcount=20",
		"--phase", "both", "--json", jsonPath, "--plot", svgPath)
	require.NoError(t, err, out)
	assert.Contains(t, out, "== load phase ==")
	assert.NotContains(t, out, "== run phase ==")
	assert.Contains(t, out, "hatkv bench: the run phase was interrupted before it recorded an operation: no plot written to "+svgPath)
	assert.Contains(t, out, "hatkv bench: interrupted; partial results written to "+jsonPath+"\n")
	var results []phaseResult
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &results))
	require.Len(t, results, 2)
	assert.False(t, results[0].Interrupted, "the load phase ended by itself")
	assert.Equal(t, int64(20), results[0].Report.Operations)
	assert.Equal(t, "run", results[1].Phase)
	assert.True(t, results[1].Interrupted)
	assert.Zero(t, results[1].Report.Operations)
	assert.NoFileExists(t, svgPath)
}

// TestBenchWriteFile: outputs replace a file whole (keeping its mode),
// follow a symlink to the file it names, go in place to what is not a
// regular file, and a failed fill leaves the earlier file and no
// temporary behind.
func TestBenchWriteFile(t *testing.T) {
	dir := t.TempDir()
	fill := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	boom := errors.New("boom")
	tests := []struct {
		name    string
		setup   func(t *testing.T) string // returns the path to write
		fill    func(io.Writer) error
		wantErr error
		check   func(t *testing.T, path string)
	}{
		{name: "new file", setup: func(t *testing.T) string { return filepath.Join(dir, "new.csv") }, fill: fill("a"),
			check: func(t *testing.T, path string) {
				assertFile(t, path, "a")
				fi, err := os.Stat(path)
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
			}},
		{name: "replaced, mode kept", setup: func(t *testing.T) string {
			p := filepath.Join(dir, "old.csv")
			require.NoError(t, os.WriteFile(p, []byte("old, longer"), 0o600))
			require.NoError(t, os.Chmod(p, 0o600))
			return p
		}, fill: fill("b"), check: func(t *testing.T, path string) {
			assertFile(t, path, "b")
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		}},
		{name: "through a symlink", setup: func(t *testing.T) string {
			target := filepath.Join(dir, "target.csv")
			require.NoError(t, os.WriteFile(target, []byte("old"), 0o644))
			link := filepath.Join(dir, "link.csv")
			require.NoError(t, os.Symlink(target, link))
			return link
		}, fill: fill("c"), check: func(t *testing.T, path string) {
			fi, err := os.Lstat(path)
			require.NoError(t, err)
			assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link stays a link")
			assertFile(t, filepath.Join(dir, "target.csv"), "c")
		}},
		{name: "not a regular file", setup: func(t *testing.T) string { return os.DevNull }, fill: fill("d"),
			check: func(t *testing.T, path string) {
				fi, err := os.Stat(path)
				require.NoError(t, err)
				assert.Equal(t, os.ModeDevice|os.ModeCharDevice, fi.Mode().Type(), "written in place, not replaced")
			}},
		{name: "failed fill keeps the old file", setup: func(t *testing.T) string {
			p := filepath.Join(dir, "keep.csv")
			require.NoError(t, os.WriteFile(p, []byte("earlier"), 0o644))
			return p
		}, fill: func(w io.Writer) error { _, _ = io.WriteString(w, "partial"); return boom }, wantErr: boom,
			check: func(t *testing.T, path string) { assertFile(t, path, "earlier") }},
		{name: "no such directory", setup: func(t *testing.T) string { return filepath.Join(dir, "missing", "r.csv") }, fill: fill("e"),
			wantErr: os.ErrNotExist, check: func(t *testing.T, path string) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t)
			err := writeFile(path, tt.fill)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.ErrorContains(t, err, "writing "+path+": ")
			} else {
				require.NoError(t, err)
			}
			tt.check(t, path)
		})
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, strings.HasPrefix(e.Name(), "."), "temporary %s left behind", e.Name())
	}
}
