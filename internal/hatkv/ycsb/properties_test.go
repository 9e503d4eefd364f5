package ycsb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPropertiesParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"equals", "a=1\nb = two words ", map[string]string{"a": "1", "b": "two words"}},
		{"colon and space", "a: 1\nb 2\nc\t3", map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"comments", "# c\n! also\n  \n a=1\n", map[string]string{"a": "1"}},
		{"continuation", "list=a,\\\n    b,\\\n    c\nx=y", map[string]string{"list": "a,b,c", "x": "y"}},
		{"later wins", "a=1\na=2", map[string]string{"a": "2"}},
		{"empty value", "a=\nb", map[string]string{"a": "", "b": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProperties()
			require.NoError(t, p.LoadReader(strings.NewReader(tc.in)))
			got := map[string]string{}
			for _, k := range p.Keys() {
				got[k], _ = p.Get(k)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPropertiesOverrides(t *testing.T) {
	dir := t.TempDir()
	f1 := filepath.Join(dir, "one")
	f2 := filepath.Join(dir, "two")
	require.NoError(t, os.WriteFile(f1, []byte("recordcount=10\nreadproportion=0.5\n"), 0o644))
	require.NoError(t, os.WriteFile(f2, []byte("recordcount=20\n"), 0o644))
	p := NewProperties()
	require.NoError(t, p.LoadWorkload("workloada"))
	require.NoError(t, p.Load(f1))
	require.NoError(t, p.Load(f2))
	require.NoError(t, p.SetPair("operationcount=99"))
	p.Set("recordcount", "30")
	n, err := p.Int("recordcount", 0)
	require.NoError(t, err)
	assert.EqualValues(t, 30, n, "-p overrides every -P file")
	n, err = p.Int("operationcount", 0)
	require.NoError(t, err)
	assert.EqualValues(t, 99, n)
	f, err := p.Float("readproportion", 0)
	require.NoError(t, err)
	assert.InDelta(t, 0.5, f, 1e-12)
	assert.Equal(t, "zipfian", p.String("requestdistribution", ""))

	require.Error(t, p.Load(filepath.Join(dir, "missing")))
	require.Error(t, p.SetPair("novalue"))
	require.Error(t, p.LoadWorkload("workloadz"))
	p.Set("fieldcount", "ten")
	_, err = p.Int("fieldcount", 0)
	var pe *PropertyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "fieldcount", pe.Key)
}

func TestEmbeddedWorkloads(t *testing.T) {
	type want struct {
		read, update, scan, insert, rmw, mread, mupdate float64
		dist                                            string
	}
	tests := map[string]want{
		"workloada":       {read: 0.5, update: 0.5, dist: "zipfian"},
		"workloadb":       {read: 0.95, update: 0.05, dist: "zipfian"},
		"workloadc":       {read: 1, dist: "zipfian"},
		"workloadd":       {read: 0.95, insert: 0.05, dist: "latest"},
		"workloade":       {scan: 0.95, insert: 0.05, dist: "zipfian"},
		"workloadf":       {read: 0.5, rmw: 0.5, dist: "zipfian"},
		"workloada_hatkv": {read: 0.25, update: 0.25, mread: 0.25, mupdate: 0.25, dist: "zipfian"},
		"workloadb_hatkv": {read: 0.475, update: 0.025, mread: 0.475, mupdate: 0.025, dist: "zipfian"},
	}
	assert.ElementsMatch(t, WorkloadNames(), []string{"workloada", "workloadb", "workloadc", "workloadd", "workloade", "workloadf", "workloada_hatkv", "workloadb_hatkv"})
	for name, w := range tests {
		t.Run(name, func(t *testing.T) {
			p := NewProperties()
			require.NoError(t, p.LoadWorkload(name))
			cfg, err := ParseConfig(p)
			require.NoError(t, err)
			assert.Empty(t, cfg.Warnings)
			got := cfg.Proportions
			assert.InDelta(t, w.read, got[OpRead], 1e-12)
			assert.InDelta(t, w.update, got[OpUpdate], 1e-12)
			assert.InDelta(t, w.scan, got[OpScan], 1e-12)
			assert.InDelta(t, w.insert, got[OpInsert], 1e-12)
			assert.InDelta(t, w.rmw, got[OpReadModifyWrite], 1e-12)
			assert.InDelta(t, w.mread, got[OpMultiRead], 1e-12)
			assert.InDelta(t, w.mupdate, got[OpMultiUpdate], 1e-12)
			assert.Equal(t, w.dist, cfg.RequestDistribution)
			assert.EqualValues(t, 1000, cfg.RecordCount)
			assert.EqualValues(t, 1000, cfg.OperationCount)
			assert.Equal(t, 10, cfg.FieldCount)
			assert.Equal(t, 100, cfg.FieldLength)
			assert.True(t, cfg.ReadAllFields)
			assert.False(t, cfg.WriteAllFields)
			assert.False(t, cfg.Ordered)
			assert.Equal(t, 10, cfg.BatchSize)
			if name == "workloade" {
				assert.Equal(t, 100, cfg.MaxScanLength)
				assert.Equal(t, "uniform", cfg.ScanLengthDistribution)
			}
		})
	}
}

func TestConfigNormalisationAndErrors(t *testing.T) {
	p := NewProperties()
	require.NoError(t, p.LoadWorkload("workloada"))
	p.Set("readproportion", "1")
	p.Set("updateproportion", "1")
	p.Set("multireadproportion", "2")
	cfg, err := ParseConfig(p)
	require.NoError(t, err)
	require.Len(t, cfg.Warnings, 1)
	assert.Contains(t, cfg.Warnings[0], "sum to 4")
	assert.InDelta(t, 0.25, cfg.Proportions[OpRead], 1e-12)
	assert.InDelta(t, 0.5, cfg.Proportions[OpMultiRead], 1e-12)

	bad := []struct {
		name, key, val string
	}{
		{"all zero", "readproportion", "0"},
		{"negative", "readproportion", "-1"},
		{"not a number", "fieldcount", "x"},
		{"bad distribution", "requestdistribution", "gaussian"},
		{"bad scan distribution", "scanlengthdistribution", "latest"},
		{"bad batch", "batchsize", "0"},
		{"scan range", "maxscanlength", "0"},
		{"insert range", "insertcount", "5000"},
		{"bad bool", "readallfields", "perhaps"},
		{"no threads", "threadcount", "0"},
		{"negative target", "target", "-5"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProperties()
			require.NoError(t, p.LoadWorkload("workloadc"))
			p.Set(tc.key, tc.val)
			_, err := ParseConfig(p)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}
