package server_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A method's reply estimate (what its calls reserve) follows a large
// reply at once and decays over the smaller ones after it: one reply of
// 600 KB made every later echo of a few bytes reserve the whole 1 MiB
// share, so under the budget they ran one at a time (and with
// WithBusyTimeout some were answered "server busy"). 40 small replies
// later the estimate is back to a few KB, and 32 small calls at once on
// one connection all fit: none waits past a busy timeout of 1 ms.
func TestReplyEstimateDecays(t *testing.T) {
	const share = 1 << 20
	s, _, addr := start(t, server.WithMemoryBudget(4*share, share), server.WithBusyTimeout(time.Millisecond))
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(20*time.Second))
	defer cancel()

	got, err := echo(ctx, c, &wiretest.EchoArgs{Msg: strings.Repeat("L", 600), Mode: wiretest.ModeRepeat})
	require.NoError(t, err)
	require.Len(t, got, 600*wiretest.RepeatTimes)
	large := server.ReplyEstimate(s, "Echo:echo")
	require.Greater(t, large, 600*wiretest.RepeatTimes)

	prev := large
	for i := range 40 {
		got, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "s"})
		require.NoError(t, err)
		require.Equal(t, "s", got)
		est := server.ReplyEstimate(s, "Echo:echo")
		require.Less(t, est, prev, "reply %d", i)
		prev = est
	}
	require.Less(t, prev, 4<<10, "40 small replies after the large one")

	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = echo(ctx, c, &wiretest.EchoArgs{Msg: "s"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
}
