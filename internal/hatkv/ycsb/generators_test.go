package ycsb

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

func TestFNVHash64MatchesYCSB(t *testing.T) {
	// "user6284781860667377211" is YCSB's well-known first hashed key, so
	// fnvhash64(0) is known independently of this implementation.
	assert.Equal(t, int64(6284781860667377211), FNVHash64(0))
	tests := []int64{1, 255, 256, 1 << 40, -1, math.MaxInt64}
	for _, in := range tests {
		// FNV-1a over the value's little-endian bytes, then Java's abs.
		h := uint64(0xCBF29CE484222325)
		for i, v := 0, uint64(in); i < 8; i++ {
			h = (h ^ (v & 0xff)) * 1099511628211
			v >>= 8
		}
		want := int64(h)
		if want < 0 {
			want = -want
		}
		got := FNVHash64(in)
		assert.Equal(t, want, got, "FNVHash64(%d)", in)
		assert.GreaterOrEqual(t, got, int64(0))
	}
}

func TestKeyNames(t *testing.T) {
	tests := []struct {
		name    string
		props   map[string]string
		keynum  int64
		want    string
		wantLen int
	}{
		{"ycsb default padding", map[string]string{"keylength": "0"}, 0, "user6284781860667377211", 23},
		{"paper 24 bytes", nil, 0, "user06284781860667377211", 24},
		{"ordered", map[string]string{"insertorder": "ordered"}, 42, "user00000000000000000042", 24},
		{"ordered zeropadding", map[string]string{"insertorder": "ordered", "keylength": "0", "zeropadding": "5"}, 42, "user00042", 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProperties()
			require.NoError(t, p.LoadWorkload("workloada"))
			for k, v := range tc.props {
				p.Set(k, v)
			}
			cfg, err := ParseConfig(p)
			require.NoError(t, err)
			w, err := NewWorkload(cfg)
			require.NoError(t, err)
			got := w.KeyName(tc.keynum)
			assert.Equal(t, tc.want, got)
			assert.Len(t, got, tc.wantLen)
		})
	}
	p := NewProperties()
	require.NoError(t, p.LoadWorkload("workloada"))
	cfg, err := ParseConfig(p)
	require.NoError(t, err)
	w, err := NewWorkload(cfg)
	require.NoError(t, err)
	for i := int64(0); i < 5000; i++ {
		require.Len(t, w.KeyName(i), 24)
	}
}

func counts(g Generator, r *rand.Rand, n int) map[int64]int {
	c := map[int64]int{}
	for i := 0; i < n; i++ {
		c[g.Next(r)]++
	}
	return c
}

func TestZipfianSkewMatchesTheory(t *testing.T) {
	const items, samples = 1000, 400000
	z := NewZipfian(0, items-1, ZipfianConstant)
	c := counts(z, rng(1), samples)
	zeta := Zeta(0, items, ZipfianConstant, 0)
	// The generator reproduces the first two probabilities exactly and
	// approximates the tail (Gray et al.); compare both with the law
	// P(rank k) = k^-theta / zeta(n).
	tests := []struct {
		name  string
		lo    int64
		hi    int64
		slack float64
	}{
		{"rank 1", 0, 0, 0.02},
		{"rank 2", 1, 1, 0.04},
		{"ranks 3-10", 2, 9, 0.12},
		{"ranks 11-100", 10, 99, 0.06},
		{"ranks 101-1000", 100, 999, 0.06},
	}
	for _, tc := range tests {
		var want float64
		got := 0
		for k := tc.lo; k <= tc.hi; k++ {
			want += math.Pow(float64(k+1), -ZipfianConstant) / zeta
			got += c[k]
		}
		frac := float64(got) / samples
		t.Logf("%-15s theory %.4f observed %.4f", tc.name, want, frac)
		assert.InEpsilon(t, want, frac, tc.slack, "%s: want %.4f got %.4f", tc.name, want, frac)
	}
	for k := range c {
		require.True(t, k >= 0 && k < items, "out of range %d", k)
	}
	assert.Greater(t, c[0], c[1])
	assert.Greater(t, c[1], c[10])

	// Growing the item count extends zeta incrementally.
	before := z.params.Load().zetan
	v := z.NextN(rng(2), 2000)
	assert.Greater(t, z.params.Load().zetan, before)
	assert.InDelta(t, Zeta(0, 2000, ZipfianConstant, 0), z.params.Load().zetan, 1e-9)
	assert.Less(t, v, int64(2000))
}

func TestScrambledZipfianSpreadsKeys(t *testing.T) {
	const items, samples = 1000, 200000
	s := NewScrambledZipfian(0, items-1)
	c := counts(s, rng(3), samples)
	type kv struct {
		k int64
		n int
	}
	var all []kv
	for k, n := range c {
		require.True(t, k >= 0 && k < items)
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	// Still skewed: the hottest key gets far more than a uniform share.
	assert.Greater(t, float64(all[0].n)/samples, 20.0/items)
	// But the hot keys are scattered, not the clustered 0..9 of Zipfian.
	top := make([]int64, 10)
	for i := range top {
		top[i] = all[i].k
	}
	sort.Slice(top, func(i, j int) bool { return top[i] < top[j] })
	assert.Greater(t, top[9]-top[0], int64(items/2), "top keys %v", top)
	clustered := 0
	for _, k := range top {
		if k < 10 {
			clustered++
		}
	}
	assert.Less(t, clustered, 3, "top keys %v", top)
	// Every tenth of the key space receives traffic.
	var deciles [10]int
	for k, n := range c {
		deciles[k*10/items] += n
	}
	for i, n := range deciles {
		assert.Greater(t, n, samples/100, "decile %d", i)
	}
	v := s.Next(rng(4))
	assert.Equal(t, v, s.Last(), "Last tracks the newest value")
}

func TestSkewedLatestFavoursRecentInserts(t *testing.T) {
	ack := NewAcknowledgedCounter(1000)
	g := NewSkewedLatest(ack)
	c := counts(g, rng(5), 100000)
	best := int64(-1)
	for k, n := range c {
		require.True(t, k >= 0 && k <= 999, "value %d beyond acknowledged inserts", k)
		if best < 0 || n > c[best] {
			best = k
		}
	}
	assert.Equal(t, int64(999), best)
	recent := 0
	for k := int64(900); k <= 999; k++ {
		recent += c[k]
	}
	assert.Greater(t, recent, 50000, "most reads hit the newest 10%% of keys")

	// Insert 100 more; acknowledging out of order only advances Last once
	// the gap closes.
	nums := make([]int64, 100)
	for i := range nums {
		nums[i] = ack.Next(nil)
	}
	ack.Acknowledge(nums[1])
	assert.EqualValues(t, 999, ack.Last())
	for _, n := range nums {
		ack.Acknowledge(n)
	}
	assert.EqualValues(t, 1099, ack.Last())
	c = counts(g, rng(6), 50000)
	best = -1
	for k, n := range c {
		if best < 0 || n > c[best] {
			best = k
		}
	}
	assert.Equal(t, int64(1099), best)
}

func TestUniformHotspotDiscrete(t *testing.T) {
	u := NewUniform(10, 19)
	c := counts(u, rng(7), 100000)
	assert.Len(t, c, 10)
	for k, n := range c {
		assert.True(t, k >= 10 && k <= 19)
		assert.InDelta(t, 10000, n, 600)
	}

	h, err := NewHotspot(0, 999, 0.2, 0.8)
	require.NoError(t, err)
	hot := 0
	c = counts(h, rng(8), 100000)
	for k, n := range c {
		require.True(t, k >= 0 && k < 1000)
		if k < 200 {
			hot += n
		}
	}
	assert.InDelta(t, 0.8, float64(hot)/100000, 0.01)
	_, err = NewHotspot(0, 10, 1.5, 0.5)
	require.Error(t, err)

	var d Discrete[OpType]
	d.Add(OpRead, 0.5)
	d.Add(OpUpdate, 0.3)
	d.Add(OpScan, 0.2)
	d.Add(OpInsert, 0)
	assert.Equal(t, 3, d.Len())
	r := rng(9)
	got := map[OpType]int{}
	for i := 0; i < 100000; i++ {
		got[d.Next(r)]++
	}
	assert.InDelta(t, 50000, got[OpRead], 1000)
	assert.InDelta(t, 30000, got[OpUpdate], 1000)
	assert.InDelta(t, 20000, got[OpScan], 1000)

	ctr := NewCounter(5)
	assert.EqualValues(t, 5, ctr.Next(nil))
	assert.EqualValues(t, 6, ctr.Next(nil))
	assert.EqualValues(t, 6, ctr.Last())
}
