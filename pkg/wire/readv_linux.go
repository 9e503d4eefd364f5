package wire

import "golang.org/x/sys/unix"

// readv2 reads from fd into a, then b, in one syscall.
func readv2(fd int, a, b []byte) (int, error) {
	return unix.Readv(fd, [][]byte{a, b})
}
