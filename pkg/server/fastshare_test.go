//go:build cgo && linux

package server_test

import (
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// WithFastPathShare sets what the fast path's connections may hold of
// the budget, and so the most a lane's reply may take: a quarter by
// default.
func TestFastPathShare(t *testing.T) {
	const total = 4 << 20
	cases := []struct {
		name  string
		opts  []server.Option
		share int64 // 0: the reply fits
	}{
		{"default", nil, total / 4},
		{"a quarter", []server.Option{server.WithFastPathShare(0.25)}, total / 4},
		{"0.3", []server.Option{server.WithFastPathShare(0.3)}, 1258291}, // 4 MiB × 0.3, rounded down
		{"a half", []server.Option{server.WithFastPathShare(0.5)}, 0},
		{"all", []server.Option{server.WithFastPathShare(1)}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var built atomic.Int64
			s := laneReplyServer(t, &built, append([]server.Option{server.WithMemoryBudget(total, total)}, tc.opts...)...)
			call, after, done := server.SplitLaneCaller(s)
			defer done()
			out := call(laneRequest(t, "big", "1500000", 1, 0))
			got := decodeLaneAnswer(t, out)
			if tc.share > 0 {
				assert.Equal(t, laneAnswer{exc: "hatrpc: reply of 1500023 bytes exceeds the connection's memory share of " +
					strconv.FormatInt(tc.share, 10) + " bytes (WithMemoryBudget)"}, got)
				assert.Zero(t, server.BudgetUsed(s))
			} else {
				assert.Equal(t, laneAnswer{n: 1500000}, got)
				assert.Equal(t, int64(len(out)), server.BudgetUsed(s))
			}
			after()
			assert.Zero(t, server.BudgetUsed(s))
		})
	}
}

// A share outside (0, 1] fails Serve with an error saying so.
func TestFastPathShareBad(t *testing.T) {
	for _, v := range []float64{0, -0.5, 1.5, math.NaN(), math.Inf(1)} {
		t.Run(strconv.FormatFloat(v, 'g', -1, 64), func(t *testing.T) {
			s := server.New(server.WithLogger(quiet), server.WithFastPathShare(v))
			defer s.Close()
			ln, err := server.Listen("127.0.0.1:0")
			require.NoError(t, err)
			err = s.Serve(ln)
			require.ErrorIs(t, err, server.ErrBadOption)
			require.EqualError(t, err, "server: bad option: WithFastPathShare("+strconv.FormatFloat(v, 'g', -1, 64)+
				"): the share must be more than 0 and at most 1")
		})
	}
	t.Run("1 serves", func(t *testing.T) {
		s := server.New(server.WithLogger(quiet), server.WithFastPathShare(1))
		ln, err := server.Listen("127.0.0.1:0")
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- s.Serve(ln) }()
		require.NoError(t, s.Close())
		select {
		case err := <-served:
			require.ErrorIs(t, err, server.ErrServerClosed)
		case <-time.After(testenv.HangGuard(5 * time.Second)):
			t.Fatal("Serve did not return")
		}
	})
}
