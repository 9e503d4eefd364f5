package rdma

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func contextTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), testTimeout)
}

func fdReadable(t testing.TB, fd int, d time.Duration) bool {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, int(d/time.Millisecond))
	return err == nil && n == 1
}
