package ycsb

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadWorkload(t *testing.T, name string, set map[string]string) *Workload {
	t.Helper()
	p := NewProperties()
	require.NoError(t, p.LoadWorkload(name))
	for k, v := range set {
		p.Set(k, v)
	}
	cfg, err := ParseConfig(p)
	require.NoError(t, err)
	w, err := NewWorkload(cfg)
	require.NoError(t, err)
	return w
}

func TestOperationMix(t *testing.T) {
	tests := []struct {
		name string
		want map[OpType]float64
	}{
		{"workloada_hatkv", map[OpType]float64{OpRead: 0.25, OpUpdate: 0.25, OpMultiRead: 0.25, OpMultiUpdate: 0.25}},
		{"workloadb_hatkv", map[OpType]float64{OpRead: 0.475, OpUpdate: 0.025, OpMultiRead: 0.475, OpMultiUpdate: 0.025}},
		{"workloadd", map[OpType]float64{OpRead: 0.95, OpInsert: 0.05}},
		{"workloade", map[OpType]float64{OpScan: 0.95, OpInsert: 0.05}},
		{"workloadf", map[OpType]float64{OpRead: 0.5, OpReadModifyWrite: 0.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := loadWorkload(t, tc.name, nil)
			r := rng(11)
			got := map[OpType]int{}
			const n = 20000
			for i := 0; i < n; i++ {
				op := w.Next(r)
				got[op.Type]++
				switch op.Type {
				case OpMultiRead, OpMultiUpdate:
					require.Len(t, op.Keys, 10)
					for _, k := range op.Keys {
						require.Len(t, k, 24)
					}
					if op.Type == OpMultiUpdate {
						require.Len(t, op.Batch, 10)
						for _, v := range op.Batch {
							require.Len(t, v, 1, "writeallfields=false updates one field")
						}
					}
				case OpInsert:
					require.Len(t, op.Values, 10)
					for f, v := range op.Values {
						require.True(t, strings.HasPrefix(f, "field"))
						require.Len(t, v, 100)
					}
				case OpScan:
					require.True(t, op.ScanLength >= 1 && op.ScanLength <= 100)
					require.Len(t, op.Key, 24)
				default:
					require.Len(t, op.Key, 24)
					require.Nil(t, op.Fields, "readallfields=true")
				}
				w.Done(op)
			}
			for op, p := range tc.want {
				assert.InDelta(t, p, float64(got[op])/n, 0.015, "%v", op)
			}
			for op := range got {
				assert.Contains(t, tc.want, op)
			}
		})
	}
}

func TestLoadPhaseKeysAndValues(t *testing.T) {
	w := loadWorkload(t, "workloada", map[string]string{"readallfields": "false", "writeallfields": "true"})
	r := rng(12)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		op := w.NextLoad(r)
		require.Equal(t, OpInsert, op.Type)
		require.Equal(t, w.KeyName(int64(i)), op.Key)
		require.False(t, seen[op.Key])
		seen[op.Key] = true
		require.Len(t, op.Values, 10)
		for _, v := range op.Values {
			for _, c := range v {
				require.True(t, c >= ' ' && c <= '~')
			}
		}
	}
	op := w.Next(r)
	for op.Type != OpRead {
		op = w.Next(r)
	}
	require.Len(t, op.Fields, 1, "readallfields=false reads one field")
	for op.Type != OpUpdate {
		op = w.Next(r)
	}
	require.Len(t, op.Values, 10, "writeallfields=true")
}

func TestMeasurementPercentiles(t *testing.T) {
	m := NewMeasurements()
	for i := 1; i <= 1000; i++ {
		m.Record("READ", time.Duration(i)*time.Microsecond, nil)
	}
	for i := 0; i < 10; i++ {
		m.Record("UPDATE", 2*time.Millisecond, nil)
	}
	m.Record("UPDATE", time.Second, errors.New("failed"))
	m.Record("SCAN", 2*time.Minute, nil) // beyond the histogram: clamped

	r := m.Report(2 * time.Second)
	require.Len(t, r.Ops, 3)
	assert.EqualValues(t, 1011, r.Operations)
	assert.InDelta(t, 505.5, r.Throughput, 1e-9)
	byOp := map[string]Summary{}
	for _, s := range r.Ops {
		byOp[s.Operation] = s
	}
	read := byOp["READ"]
	tests := []struct {
		name      string
		got, want float64
	}{
		{"avg", read.AvgUs, 500.5},
		{"min", read.MinUs, 1},
		{"max", read.MaxUs, 1000},
		{"p50", read.P50Us, 500},
		{"p95", read.P95Us, 950},
		{"p99", read.P99Us, 990},
		{"p99.9", read.P999Us, 999},
	}
	for _, tc := range tests {
		// Three significant digits: within 0.1% (+ one unit at the low end).
		assert.InDelta(t, tc.want, tc.got, tc.want*0.001+0.001, tc.name)
	}
	assert.EqualValues(t, 1000, read.Count)
	assert.InDelta(t, 500, read.Throughput, 1e-9)
	upd := byOp["UPDATE"]
	assert.EqualValues(t, 10, upd.Count)
	assert.EqualValues(t, 1, upd.Errors)
	assert.InDelta(t, 2000, upd.P99Us, 2)
	assert.InDelta(t, 60e6, byOp["SCAN"].MaxUs, 60e3)

	var text, csvBuf, jsonBuf bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	assert.Contains(t, text.String(), "[OVERALL] Throughput(ops/sec)")
	assert.Contains(t, text.String(), "READ")
	require.NoError(t, r.WriteCSV(&csvBuf))
	rows, err := csv.NewReader(&csvBuf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 4)
	assert.Equal(t, "p99_us", rows[0][8])
	var back Report
	require.NoError(t, r.WriteJSON(&jsonBuf))
	require.NoError(t, json.Unmarshal(jsonBuf.Bytes(), &back))
	assert.Equal(t, r, back)
}

func TestPlotWritesValidSVG(t *testing.T) {
	m := NewMeasurements()
	r := rng(13)
	for i := 0; i < 5000; i++ {
		m.Record("READ", time.Duration(50+r.IntN(500))*time.Microsecond, nil)
		m.Record("MULTIREAD", time.Duration(200+r.IntN(2000))*time.Microsecond, nil)
	}
	var buf bytes.Buffer
	require.NoError(t, m.WriteSVG(&buf, "latency distribution"))
	dec := xml.NewDecoder(&buf)
	var root string
	elements := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			elements++
		}
	}
	assert.Equal(t, "svg", root)
	assert.Greater(t, elements, 20)
	require.Error(t, NewMeasurements().WriteSVG(io.Discard, "empty"))
}

// memDB is an in-memory DB for driving the runner.
type memDB struct {
	mu   sync.Mutex
	data map[string]map[string][]byte
}

func (d *memDB) Read(_ context.Context, key string, _ []string) (map[string][]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.data[key]
	if !ok {
		return nil, errors.New("not found")
	}
	return v, nil
}

func (d *memDB) Update(_ context.Context, key string, values map[string][]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, ok := d.data[key]
	if !ok {
		return errors.New("not found")
	}
	for k, v := range values {
		rec[k] = v
	}
	return nil
}

func (d *memDB) Insert(_ context.Context, key string, values map[string][]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.data[key] = values
	return nil
}

func (d *memDB) Scan(_ context.Context, start string, count int, _ []string) ([]map[string][]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make([]string, 0, len(d.data))
	for k := range d.data {
		if k >= start {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []map[string][]byte
	for _, k := range keys[:min(count, len(keys))] {
		out = append(out, d.data[k])
	}
	return out, nil
}

func (d *memDB) MultiRead(ctx context.Context, keys []string, fields []string) ([]map[string][]byte, error) {
	out := make([]map[string][]byte, len(keys))
	for i, k := range keys {
		v, err := d.Read(ctx, k, fields)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (d *memDB) MultiUpdate(ctx context.Context, keys []string, values []map[string][]byte) error {
	for i, k := range keys {
		if err := d.Update(ctx, k, values[i]); err != nil {
			return err
		}
	}
	return nil
}

func TestRunLoadAndTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"workloada_hatkv", "workloadd", "workloade", "workloadf"} {
		t.Run(name, func(t *testing.T) {
			w := loadWorkload(t, name, map[string]string{"operationcount": "3000"})
			db := &memDB{data: map[string]map[string][]byte{}}
			load := NewMeasurements()
			rep, err := Run(ctx, db, w, RunOptions{Threads: 4, Load: true, Seed: 1}, load)
			require.NoError(t, err)
			assert.EqualValues(t, 1000, rep.Operations)
			assert.Len(t, db.data, 1000)

			m := NewMeasurements()
			rep, err = Run(ctx, db, w, RunOptions{Threads: 4, Seed: 2}, m)
			require.NoError(t, err)
			assert.EqualValues(t, 3000, rep.Operations)
			for _, s := range rep.Ops {
				assert.Zero(t, s.Errors, "%s: every chosen key was loaded or acknowledged", s.Operation)
				assert.Positive(t, s.P50Us)
			}
			assert.Positive(t, rep.Throughput)
		})
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	w := loadWorkload(t, "workloadc", nil)
	_, err := Run(cctx, &memDB{data: map[string]map[string][]byte{}}, w, RunOptions{Threads: 2}, NewMeasurements())
	require.ErrorIs(t, err, context.Canceled)
}

// slowDB delays every call so that run limits can be observed.
type slowDB struct {
	memDB
	delay time.Duration
}

func (d *slowDB) Read(ctx context.Context, key string, fields []string) (map[string][]byte, error) {
	t := time.NewTimer(d.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return d.memDB.Read(ctx, key, fields)
}

func TestRunLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := loadWorkload(t, "workloadc", map[string]string{"threadcount": "4"})
	db := &slowDB{memDB: memDB{data: map[string]map[string][]byte{}}, delay: time.Millisecond}
	_, err := Run(ctx, &db.memDB, w, RunOptions{Load: true}, NewMeasurements())
	require.NoError(t, err)

	tests := []struct {
		name  string
		opts  RunOptions
		check func(t *testing.T, r Report)
	}{
		{"target caps throughput", RunOptions{Operations: 200, Target: 1000}, func(t *testing.T, r Report) {
			assert.EqualValues(t, 200, r.Operations)
			assert.LessOrEqual(t, r.Throughput, 1100.0)
		}},
		{"max duration ends the run", RunOptions{Operations: 1 << 40, MaxDuration: 100 * time.Millisecond}, func(t *testing.T, r Report) {
			assert.Positive(t, r.Operations)
			assert.Less(t, r.Operations, int64(1<<40))
			for _, s := range r.Ops {
				assert.Zero(t, s.Errors, "ops cut off by the deadline are not failures")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(ctx, db, w, tc.opts, NewMeasurements())
			require.NoError(t, err)
			tc.check(t, r)
		})
	}
	p := NewProperties()
	require.NoError(t, p.LoadWorkload("workloadc"))
	p.Set("maxexecutiontime", "2")
	p.Set("target", "500")
	cfg, err := ParseConfig(p)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, cfg.MaxExecutionTime)
	assert.InDelta(t, 500, cfg.Target, 1e-9)
	assert.Equal(t, 1, cfg.ThreadCount)
}

// TestMeasurementsInterval: Interval reports what was recorded since the
// previous call and starts over, while Report keeps the whole phase.
func TestMeasurementsInterval(t *testing.T) {
	m := NewMeasurements()
	m.TrackIntervals()
	for i := 1; i <= 100; i++ {
		m.Record("READ", time.Duration(i)*time.Microsecond, nil)
	}
	m.Record("UPDATE", time.Millisecond, errors.New("x"))
	iv := m.Interval(time.Second)
	require.Len(t, iv, 2)
	assert.Equal(t, int64(100), iv[0].Count)
	assert.InDelta(t, 100.0, iv[0].Throughput, 1e-9)
	assert.InDelta(t, 50.0, iv[0].P50Us, 0.1)
	assert.Equal(t, int64(1), iv[1].Errors)

	m.Record("READ", 7*time.Microsecond, nil)
	iv = m.Interval(time.Second)
	require.Len(t, iv, 2)
	assert.Equal(t, int64(1), iv[0].Count)
	assert.InDelta(t, 7.0, iv[0].MaxUs, 0.01)
	assert.Zero(t, iv[1].Errors)
	assert.Equal(t, int64(101), m.Report(time.Second).Ops[0].Count, "the phase keeps every record")

	assert.Empty(t, NewMeasurements().Interval(time.Second), "nothing without TrackIntervals")
}
