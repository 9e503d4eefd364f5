//go:build !linux && !windows

package wire

import "syscall"

// rawReads: a socket's descriptor can be read directly (SpinReader).
const rawReads = true

// readv2 reads from fd into a only: reading ahead is Linux's.
func readv2(fd int, a, _ []byte) (int, error) {
	return syscall.Read(fd, a)
}

// rawRead reads from the socket fd without the runtime's poller.
func rawRead(fd uintptr, p []byte) (int, error) { return syscall.Read(int(fd), p) }
