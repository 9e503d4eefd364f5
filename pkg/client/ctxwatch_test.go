package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A lone caller keeps its context watch between calls: the kept watch must
// still interrupt a later call of the same context, and a context that
// ended between calls must not leave a call waiting for a slow server.
func TestKeptContextWatchStillCancels(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	ctx, cancel := context.WithCancel(context.Background())
	for range 3 {
		got, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "x"})
		require.NoError(t, err)
		require.Equal(t, "x", got)
	}
	slow := &wiretest.EchoArgs{Msg: "slow", DelayNs: int64(2 * time.Second)}
	go func() {
		time.Sleep(30 * time.Millisecond)
		cancel()
	}()
	t0 := time.Now()
	_, err := echo(ctx, c, slow)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(t0), time.Second)

	// Same Done channel, already closed: fails at once.
	_, err = echo(ctx, c, slow)
	require.ErrorIs(t, err, context.Canceled)

	// Another context sharing the ended one's parent works again.
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "next"})
	require.NoError(t, err)
	require.Equal(t, "next", got)
}

// Contexts that share a Done channel (WithValue over a cancellable one)
// share the kept watch; cancelling the parent ends a call of the child.
func TestKeptContextWatchSharedDone(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := echo(parent, c, &wiretest.EchoArgs{Msg: "warm"})
	require.NoError(t, err)
	type key struct{}
	child := context.WithValue(parent, key{}, 1)
	go func() {
		time.Sleep(30 * time.Millisecond)
		cancel()
	}()
	t0 := time.Now()
	_, err = echo(child, c, &wiretest.EchoArgs{Msg: "slow", DelayNs: int64(2 * time.Second)})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(t0), time.Second)
}
