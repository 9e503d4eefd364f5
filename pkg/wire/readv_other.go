//go:build !linux

package wire

import "syscall"

// readv2 reads from fd into a only: reading ahead is Linux's.
func readv2(fd int, a, _ []byte) (int, error) {
	return syscall.Read(fd, a)
}
