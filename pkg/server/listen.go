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
