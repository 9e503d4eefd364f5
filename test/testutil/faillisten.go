package testutil

import (
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// FailingListener fails its first N Accepts with Err, then accepts for
// real: a listener of a process out of descriptors for a moment.
type FailingListener struct {
	net.Listener
	mu  sync.Mutex
	N   int
	Err error
}

// Accept fails while N lasts.
func (l *FailingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.N > 0 {
		l.N--
		l.mu.Unlock()
		return nil, l.Err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// AcceptErr is the error accept(2) failing with errno gives in Go.
func AcceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// AcceptWithin fails t unless l accepts a connection within d (scaled by
// testenv.HangGuard), and closes what it accepted. The Accept runs on its
// own goroutine so that a listener which never returns fails the test
// instead of hanging it; closing l ends that goroutine.
func AcceptWithin(t testing.TB, l net.Listener, d time.Duration) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(testenv.HangGuard(d)):
		t.Fatalf("no connection accepted within %v", testenv.HangGuard(d))
	}
}
