package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// UnixSocketMode is the mode of a unix socket file Listen creates: only
// the server's own user may connect (the shm fast path is for that user
// only too). To let a group in, chmod and chgrp the file after Listen,
// or listen in a directory whose own mode admits whom it should.
const UnixSocketMode os.FileMode = 0o600

// ErrAddrInUse matches Listen's error for a unix socket file another
// server answers on.
var ErrAddrInUse = errors.New("server: address in use")

// Listen opens the listener ListenAndServe serves: TCP for host:port, a
// unix domain socket for `unix:/path` or `unix:@name` (abstract: no
// file, and any process of the host's network namespace may connect).
// A socket file left behind by a server that is gone is removed first;
// one a server still answers on is refused (ErrAddrInUse). The file gets
// UnixSocketMode and is removed when the listener closes (Shutdown,
// Close).
func Listen(addr string) (net.Listener, error) {
	network, path := wire.Network(addr)
	if network != "unix" {
		return net.Listen(network, path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && path != "" && path[0] != '@' {
		if err := removeStale(path); err != nil {
			return nil, err
		}
		ln, err = net.Listen("unix", path)
	}
	if err != nil {
		return nil, err
	}
	if path[0] != '@' {
		// bind made it with the umask's mode: narrowed before the first
		// Accept, so no connection is served through a wider mode.
		if err := os.Chmod(path, UnixSocketMode); err != nil {
			ln.Close()
			return nil, fmt.Errorf("server: %s: %w", addr, err)
		}
	}
	return ln, nil
}

// removeStale removes the socket file at path unless a server answers on
// it.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("server: unix:%s exists and is not a socket", path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		nc.Close()
		return fmt.Errorf("%w: a server answers on unix:%s", ErrAddrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("server: unix:%s: %w", path, err)
	}
	return os.Remove(path)
}

// passingAcceptErrs are the accept errors of a moment: the process or the host out
// of descriptors or kernel memory, a connection reset before it was
// taken. Out of descriptors is what a flood of connections causes;
// ending an accept loop there would let a peer stop a server for good,
// where waiting lets it serve again once connections close.
var passingAcceptErrs = []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR}

// AcceptRetryable tells an accept error that passes from a listener that
// is gone (closed, or failing for good). Serve waits and accepts again
// after the first kind; a listener put in front of the server (a token
// or SASL front) should do the same.
func AcceptRetryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range passingAcceptErrs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// AcceptBackoff is the wait between accepts that keep failing: 5 ms doubling to
// 1 s, as net/http's server does.
type AcceptBackoff struct{ d time.Duration }

// Next is the wait after one more failure in a row.
func (b *AcceptBackoff) Next() time.Duration {
	b.d = min(max(2*b.d, 5*time.Millisecond), time.Second)
	return b.d
}

// Reset starts over after an accept that worked.
func (b *AcceptBackoff) Reset() { b.d = 0 }
