package flock

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHistogramBuckets: an observation lands in the first bucket whose
// upper bound it does not exceed (Prometheus' le), above 64 in the last.
func TestHistogramBuckets(t *testing.T) {
	tests := []struct {
		v      float64
		bucket int
	}{
		{0, 0}, {1, 0}, {1.5, 1}, {2, 1}, {3, 2}, {4, 2}, {8, 3}, {9, 4}, {16, 4},
		{32, 5}, {33, 6}, {64, 6}, {65, 7}, {1e9, 7},
	}
	for _, tc := range tests {
		m := NewMetrics()
		m.side("server").degree.Observe(tc.v)
		h := m.Snapshot().Sides["server"].Degree
		var want HistogramSnapshot
		want.Counts[tc.bucket], want.Count, want.Sum = 1, 1, tc.v
		assert.Equal(t, want, h, "observe %v", tc.v)
	}
}

// TestMetricsConcurrent: concurrent updates lose nothing, and a side
// appears in the snapshot once a Conn or Server uses it.
func TestMetricsConcurrent(t *testing.T) {
	m := NewMetrics()
	require.Empty(t, m.Snapshot().Sides)
	cs := m.side("client")
	require.Equal(t, []string{"client"}, keys(m.Snapshot().Sides))
	const g, n = 8, 1000
	var wg sync.WaitGroup
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < n; j++ {
				cs.degree.Observe(3)
				cs.messages.Inc()
				cs.requests.Add(3)
				m.peers.Inc()
				m.qps.Add(2)
				m.qps.Sub(1)
				m.sleeps.Inc()
				m.activeQPs.WithLabelValues("7").Add(0.5)
			}
			m.peers.Dec()
		}()
	}
	wg.Wait()
	s := m.Snapshot()
	c := s.Sides["client"]
	assert.Equal(t, uint64(g*n), c.Messages)
	assert.Equal(t, uint64(3*g*n), c.Entries)
	assert.Equal(t, uint64(g*n), c.Degree.Count)
	assert.Equal(t, uint64(g*n), c.Degree.Counts[2])
	assert.Equal(t, float64(3*g*n), c.Degree.Sum)
	assert.Equal(t, float64(g*n-g), s.Peers)
	assert.Equal(t, float64(g*n), s.ServerQPs)
	assert.Equal(t, uint64(g*n), s.DispatcherSleeps)
	assert.Equal(t, map[string]float64{"7": g * n / 2}, s.ActiveQPs)

	m.activeQPs.WithLabelValues("8").Set(3)
	assert.True(t, m.activeQPs.DeleteLabelValues("7"))
	assert.False(t, m.activeQPs.DeleteLabelValues("7"))
	assert.Equal(t, map[string]float64{"8": 3}, m.Snapshot().ActiveQPs)
}

// TestMetricsUpdatesDoNotAllocate: the per-message updates are free.
func TestMetricsUpdatesDoNotAllocate(t *testing.T) {
	m := NewMetrics()
	s := m.side("server")
	g := m.activeQPs.WithLabelValues("1")
	allocs := testing.AllocsPerRun(100, func() {
		s.degree.Observe(5)
		s.messages.Inc()
		s.requests.Add(5)
		m.headReads.Inc()
		m.qps.Add(1)
		g.Set(2)
	})
	assert.Zero(t, allocs)
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
