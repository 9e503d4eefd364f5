package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

// chanWatcher pushes the lists a test sends; Resolve answers from list.
type chanWatcher struct {
	mu       sync.Mutex
	list     []string
	resolves atomic.Int64
	push     chan []string
	quit     chan struct{} // closing it makes Watch give up
}

func (w *chanWatcher) Resolve(context.Context) ([]string, error) {
	w.resolves.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...), nil
}

func (w *chanWatcher) Watch(ctx context.Context, update func([]string)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.quit:
			return errors.New("watch broke for good")
		case l := <-w.push:
			update(l)
		}
	}
}

// TestWatcherPushes: a Watcher's lists replace the servers as they come,
// with no polling (Resolve is asked once, at Dial); an empty list keeps
// the servers known; a Watch that gives up falls back to polling Resolve.
func TestWatcherPushes(t *testing.T) {
	a, b := startServer(t, newStoreHandler()), startServer(t, newStoreHandler())
	w := &chanWatcher{list: []string{a.addr}, push: make(chan []string), quit: make(chan struct{})}
	cl, err := Dial(tctx(t, 10*time.Second), w, fastOptions(WithRefresh(5*time.Millisecond))...)
	require.NoError(t, err)
	defer cl.Close()
	send := func(l []string) {
		t.Helper()
		select {
		case w.push <- l:
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Fatal("Watch is not running")
		}
	}
	send([]string{b.addr, a.addr})
	require.Eventually(t, serversAre(cl, a.addr, b.addr), testenv.HangGuard(10*time.Second), 5*time.Millisecond)
	send(nil)
	send([]string{a.addr, b.addr}) // Watch took the empty list: nothing changed
	require.True(t, serversAre(cl, a.addr, b.addr)())
	send([]string{b.addr})
	require.Eventually(t, serversAre(cl, b.addr), testenv.HangGuard(10*time.Second), 5*time.Millisecond)
	require.Equal(t, int64(1), w.resolves.Load(), "a Watcher is not polled")

	close(w.quit)
	require.Eventually(t, serversAre(cl, a.addr), testenv.HangGuard(10*time.Second), 5*time.Millisecond, "polling Resolve after Watch gave up")
	require.Greater(t, w.resolves.Load(), int64(1))
}
