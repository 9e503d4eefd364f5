package flock

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

func TestWithPlan(t *testing.T) {
	tests := []struct {
		name         string
		plan         hints.Table
		qps, credits int
	}{
		{"sharing keeps the QP set", hints.Table{QPSharing: true, Concurrency: 128, Credits: 64}, 4, 64},
		{"sharing never more QPs than callers", hints.Table{QPSharing: true, Concurrency: 2, Credits: 16}, 2, 16},
		{"no sharing: a QP per caller", hints.Table{QPSharing: false, Concurrency: 32, Credits: 32}, 32, 32},
		{"defaults", hints.Table{}, 1, 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultConfig()
			WithPlan(&tc.plan)(&c)
			require.Equal(t, tc.qps, c.qps)
			require.Equal(t, tc.credits, c.credits)
			require.True(t, c.valid())
		})
	}
	// A plan resolved from real hints.
	p := hints.TableFor(hints.Set{PerfGoal: hints.ResUtil, Concurrency: 64}, hints.Env{Transport: hints.TransportSHM, Cores: 2})
	c := defaultConfig()
	WithPlan(&p)(&c)
	require.Equal(t, p.Credits, c.credits)
	require.True(t, p.QPSharing)
	require.Equal(t, 4, c.qps)
}
