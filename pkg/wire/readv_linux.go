package wire

import "golang.org/x/sys/unix"

// rawReads: a socket's descriptor can be read directly (SpinReader).
const rawReads = true

// rawRead reads from the socket fd without the runtime's poller.
func rawRead(fd uintptr, p []byte) (int, error) { return unix.Read(int(fd), p) }

// readv2 reads from fd into a, then b, in one syscall.
func readv2(fd int, a, b []byte) (int, error) {
	return unix.Readv(fd, [][]byte{a, b})
}
