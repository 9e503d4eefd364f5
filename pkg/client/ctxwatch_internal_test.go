package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestWatchWakesWaiters: a caller waiting on the session's kept context
// watch (see await) is withdrawn when the watch fires, and told to wait
// again when the watch is replaced by another context's; a caller already
// signalled (its reply or the read role is on its way) is left alone.
func TestWatchWakesWaiters(t *testing.T) {
	cases := []struct {
		name     string
		replace  bool // another context's caller takes the watch over
		signaled bool // the waiter was signalled before
		woke     uint8
		listed   bool // still in the pending table after
	}{
		{"fires", false, false, wokeCtx, false},
		{"replaced", true, false, wokeAgain, true},
		{"fires, already signalled", false, true, wokeReply, true},
		{"replaced, already signalled", true, true, wokeReply, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s.watchDone(ctx, ctx.Done())
			w := s.watch
			require.NotNil(t, w)
			cl := &call{done: make(chan struct{}, 1), seq: 7, waiting: true, watch: w, signaled: tc.signaled}
			s.pending.put(7, cl)
			if tc.replace {
				other, ocancel := context.WithCancel(context.Background())
				defer ocancel()
				s.watchDone(other, other.Done())
				require.NotSame(t, w, s.watch)
				// The replaced watch no longer fires, for no one.
				cancel()
			} else {
				cancel() // the watch fires on its own goroutine
				require.Eventually(t, func() bool {
					s.mu.Lock()
					defer s.mu.Unlock()
					return w.fired
				}, testenv.HangGuard(5*time.Second), time.Millisecond)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, tc.woke, cl.woke)
			listed := s.pending.get(7) != nil
			require.Equal(t, tc.listed, listed)
			if !tc.signaled {
				require.True(t, cl.signaled)
				require.Len(t, cl.done, 1, "woken")
			} else {
				require.Len(t, cl.done, 0, "not signalled twice")
			}
		})
	}
}
