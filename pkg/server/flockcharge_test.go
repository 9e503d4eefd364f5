//go:build cgo && linux

package server_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// A FLOCK call's reply is charged to the session's share by its size
// from the moment it is built until FLOCK posted it (sent), a small one
// not at all; one that does not fit waits for earlier ones to be posted,
// and after WithWriteTimeout gets an exception instead (the session's
// pseudo-connection, all clients' FLOCK calls, is not closed).
func TestFLOCKReplyCharged(t *testing.T) {
	const share = 1 << 20
	budget := server.WithMemoryBudget(4*share, share)
	cases := []struct {
		name    string
		size    string
		charged bool
		exc     string
	}{
		{"large", "200000", true, ""},
		{"small", "1000", false, ""},
		{"over the share", "1500000", false,
			"hatrpc: reply of 1500023 bytes exceeds the connection's memory share of 1048576 bytes (WithMemoryBudget)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var built atomic.Int64
			s := laneReplyServer(t, &built, budget)
			call, sent, done := server.FLOCKCallerSent(s)
			defer done()
			out := call(laneRequest(t, "big", tc.size, 1, 0), nil)
			got := decodeLaneAnswer(t, out)
			if tc.exc != "" {
				assert.Equal(t, laneAnswer{exc: tc.exc}, got)
			} else {
				want, err := strconv.Atoi(tc.size)
				require.NoError(t, err)
				assert.Equal(t, laneAnswer{n: want}, got)
			}
			if tc.charged {
				assert.Equal(t, int64(len(out)), server.BudgetUsed(s), "charged until FLOCK posted it")
			} else {
				assert.Zero(t, server.BudgetUsed(s))
			}
			sent(len(out))
			assert.Zero(t, server.BudgetUsed(s), "given back once posted")
		})
	}
}

// A FLOCK reply that does not fit the share while earlier ones wait to be
// posted waits for them; past WithWriteTimeout it is refused.
func TestFLOCKReplyWaits(t *testing.T) {
	const share = 1 << 20
	t.Run("admitted once room is made", func(t *testing.T) {
		var built atomic.Int64
		s := laneReplyServer(t, &built, server.WithMemoryBudget(4*share, share))
		call, sent, done := server.FLOCKCallerSent(s)
		defer done()
		first := call(laneRequest(t, "big", "600000", 1, 0), nil)
		require.Equal(t, laneAnswer{n: 600000}, decodeLaneAnswer(t, first))
		second := make(chan []byte, 1)
		go func() { second <- call(laneRequest(t, "big", "600000", 2, 0), nil) }()
		// The second cannot be charged before the first is posted.
		require.Eventually(t, func() bool { return server.BudgetUsed(s) == int64(len(first)) }, testenv.HangGuard(5*time.Second), time.Millisecond)
		select {
		case <-second:
			t.Fatal("admitted past the share")
		default:
		}
		sent(len(first))
		var out []byte
		select {
		case out = <-second:
		case <-time.After(testenv.HangGuard(5 * time.Second)):
			t.Fatal("the second reply was not admitted")
		}
		require.Equal(t, laneAnswer{n: 600000}, decodeLaneAnswer(t, out))
		require.Equal(t, int64(len(out)), server.BudgetUsed(s))
		sent(len(out))
		require.Zero(t, server.BudgetUsed(s))
	})
	t.Run("a never_blocks call is refused at once", func(t *testing.T) {
		// It may run on FLOCK's dispatcher, which must not wait.
		var built atomic.Int64
		s := laneReplyServer(t, &built, server.WithMemoryBudget(4*share, share))
		quick := bigService()
		quick.Name = "Quick"
		quick.Hints = &hints.Service{Name: "Quick", Functions: []hints.Function{{Name: "big", Server: hints.Set{NeverBlocks: true}}}}
		s.Register(quick)
		call, sent, done := server.FLOCKCallerSent(s)
		defer done()
		first := call(laneRequest(t, "big", "600000", 1, 0), nil)
		out := call(laneRequest(t, "Quick:big", "600000", 2, 0), nil)
		require.Equal(t, laneAnswer{exc: fmt.Sprintf(
			"hatrpc: no room for a reply of 600023 bytes: %d bytes of the connection's memory share are free (WithMemoryBudget)",
			share-len(first))}, decodeLaneAnswer(t, out))
		sent(len(out))
		sent(len(first))
		require.Zero(t, server.BudgetUsed(s))
	})
	t.Run("refused after the write timeout", func(t *testing.T) {
		var built atomic.Int64
		s := laneReplyServer(t, &built, server.WithMemoryBudget(4*share, share), server.WithWriteTimeout(50*time.Millisecond))
		call, sent, done := server.FLOCKCallerSent(s)
		defer done()
		first := call(laneRequest(t, "big", "600000", 1, 0), nil)
		out := call(laneRequest(t, "big", "600000", 2, 0), nil)
		require.Equal(t, laneAnswer{exc: "server: a reply waited for the connection's memory share for the write timeout"}, decodeLaneAnswer(t, out))
		require.Equal(t, int64(len(first)), server.BudgetUsed(s), "the refusal holds nothing")
		sent(len(out)) // FLOCK tells of every reply; a small one was never charged
		sent(len(first))
		require.Zero(t, server.BudgetUsed(s))
		// The session goes on.
		out = call(laneRequest(t, "big", "600000", 3, 0), nil)
		require.Equal(t, laneAnswer{n: 600000}, decodeLaneAnswer(t, out))
		sent(len(out))
		require.Zero(t, server.BudgetUsed(s))
	})
}
