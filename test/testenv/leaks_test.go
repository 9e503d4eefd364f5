package testenv

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
	require.NoError(t, before.Settled(HangGuard(10*time.Second)))

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
	require.NoError(t, before.Settled(HangGuard(10*time.Second)))
}
