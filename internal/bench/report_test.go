package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSizeLabelAndParse(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		lbl  []string
	}{
		{"64,4KiB,128KiB", []int{64, 4096, 131072}, []string{"64B", "4KiB", "128KiB"}},
		{"1M, 100", []int{1 << 20, 100}, []string{"1MiB", "100B"}},
		{"3B", []int{3}, []string{"3B"}},
		{"1GiB,2G", []int{1 << 30, 2 << 30}, []string{"1GiB", "2GiB"}},
	}
	for _, tt := range tests {
		got, err := ParseInts(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got)
		for i, n := range got {
			assert.Equal(t, tt.lbl[i], SizeLabel(n))
		}
	}
	_, err := ParseInts("x")
	require.Error(t, err)
}

func TestVerdicts(t *testing.T) {
	lat := map[string]LatencyResult{
		"hatrpc":          {P50: 9 * time.Microsecond},
		"apache-buffered": {P50: 10 * time.Microsecond},
		"apache-framed":   {P50: 12 * time.Microsecond},
	}
	r, base, ok := LatencyVerdict(lat)
	require.True(t, ok)
	assert.Equal(t, "apache-buffered", base)
	assert.InDelta(t, 0.9, r, 1e-9)

	tp := map[string]ThroughputResult{
		"hatrpc":          {Calls: 300, Elapsed: time.Second},
		"apache-buffered": {Calls: 100, Elapsed: time.Second},
		"apache-framed":   {Calls: 150, Elapsed: time.Second},
	}
	r, base, ok = ThroughputVerdict(tp)
	require.True(t, ok)
	assert.Equal(t, "apache-framed", base)
	assert.InDelta(t, 2.0, r, 1e-9)

	_, _, ok = LatencyVerdict(map[string]LatencyResult{"hatrpc": {P50: 1}})
	assert.False(t, ok, "no baseline, no verdict")

	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, []string{"apache-buffered", "apache-framed", "hatrpc"},
		[]LatencyRow{{Placement: "same-cpu", Size: 64, By: lat}},
		[]ThroughputRow{{Size: 64, Callers: 64, By: tp}}))
	out := buf.String()
	assert.Contains(t, out, "0.90 vs apache-buffered")
	assert.Contains(t, out, "2.00x vs apache-framed")
	assert.NotContains(t, out, "MISS")
}

func TestRawShare(t *testing.T) {
	tests := []struct {
		name    string
		systems []string
		want    []string
		absent  []string
	}{
		{
			name:    "fraction of the best raw system",
			systems: []string{"raw-tcp", "raw-tcp-1conn", "apache-buffered", "hatrpc"},
			want:    []string{"fraction of the best of raw-tcp, raw-tcp-1conn", "hatrpc/raw", "0.75", "0.25"},
		},
		{
			name:    "no raw system, no table",
			systems: []string{"apache-buffered", "hatrpc"},
			absent:  []string{"fraction"},
		},
	}
	tp := map[string]ThroughputResult{
		"raw-tcp":         {Calls: 400, Elapsed: time.Second},
		"raw-tcp-1conn":   {Calls: 200, Elapsed: time.Second},
		"apache-buffered": {Calls: 100, Elapsed: time.Second},
		"hatrpc":          {Calls: 300, Elapsed: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, WriteReport(&buf, tt.systems, nil, []ThroughputRow{{Size: 4096, Callers: 64, By: tp}}))
			out := buf.String()
			for _, w := range tt.want {
				assert.Contains(t, out, w)
			}
			for _, a := range tt.absent {
				assert.NotContains(t, out, a)
			}
			// raw systems are never the baseline of a verdict.
			assert.Contains(t, out, "3.00x vs apache-buffered")
		})
	}
}
