package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/tpch/hs2"
)

func TestWriteSVG(t *testing.T) {
	setups := Setups([]hs2.Config{hs2.Vanilla, hs2.Function}, []string{"tcp", "shm"})
	require.Equal(t, []Setup{{hs2.Vanilla, "tcp"}, {hs2.Function, "tcp"}, {hs2.Function, "shm"}}, setups)
	var ts []Timing
	for _, su := range setups {
		for _, q := range []int{1, 6} {
			ts = append(ts, Timing{Setup: su, Query: q, Runs: []time.Duration{time.Duration(q) * time.Millisecond}})
		}
	}
	var b bytes.Buffer
	require.NoError(t, WriteSVG(&b, ts, setups, []int{1, 6}, "TPC-H SF 0.01"))
	svg := b.String()
	assert.True(t, strings.HasPrefix(svg, "<?xml"), svg[:min(len(svg), 40)])
	for _, s := range []string{"TPC-H SF 0.01", "Q1", "Q6", "vanilla/tcp", "function/shm"} {
		assert.Contains(t, svg, s)
	}
	err := WriteSVG(&b, ts, setups, []int{1, 2}, "")
	assert.EqualError(t, err, "bench: no timing of Q2 on vanilla/tcp")
}

func TestParseQueries(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"1-3", []int{1, 2, 3}, false},
		{"1,5-6,22", []int{1, 5, 6, 22}, false},
		{"0", nil, true},
		{"3-1", nil, true},
		{"1-23", nil, true},
		{"x", nil, true},
	} {
		got, err := ParseQueries(tc.in)
		if tc.err {
			assert.EqualError(t, err, `bench: bad query list "`+tc.in+`": want numbers 1-22 and ranges such as 1,3,5-7`)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.in)
	}
}
