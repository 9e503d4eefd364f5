package testutil

import (
	"net"
	"os"
	"sync"
	"syscall"
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
