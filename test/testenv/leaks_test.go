package testenv

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// untilNone polls r.New under a hang guard until it reports nothing.
func untilNone(t *testing.T, r Resources) {
	t.Helper()
	deadline := time.Now().Add(HangGuard(10 * time.Second))
	for err := r.New(); err != nil; err = r.New() {
		require.True(t, time.Now().Before(deadline), "%v", err)
		time.Sleep(time.Millisecond)
	}
}

func TestResourcesNew(t *testing.T) {
	// An older goroutine and fd that end after the snapshot are not a
	// leak (a count would have hidden a new one behind them).
	oldStop := make(chan struct{})
	oldDone := make(chan struct{})
	go func() { <-oldStop; close(oldDone) }()
	old, err := os.Open(os.DevNull)
	require.NoError(t, err)

	before, err := Snapshot()
	require.NoError(t, err)
	require.NoError(t, before.New())

	close(oldStop)
	<-oldDone
	require.NoError(t, old.Close())
	untilNone(t, before)

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	f, err := os.Create(filepath.Join(t.TempDir(), "leak"))
	require.NoError(t, err)
	err = before.New()
	require.Error(t, err)
	require.Contains(t, err.Error(), "new fds: ")
	require.Contains(t, err.Error(), " -> "+f.Name())
	require.Contains(t, err.Error(), "found unexpected goroutines")

	require.NoError(t, f.Close())
	close(stop)
	<-done
	untilNone(t, before)
}
