package server_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/stretchr/testify/require"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func opErr(err error) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: err}
}

func TestAcceptRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"emfile", opErr(os.NewSyscallError("accept4", syscall.EMFILE)), true},
		{"enfile", opErr(os.NewSyscallError("accept4", syscall.ENFILE)), true},
		{"enobufs", opErr(os.NewSyscallError("accept4", syscall.ENOBUFS)), true},
		{"enomem", opErr(os.NewSyscallError("accept4", syscall.ENOMEM)), true},
		{"econnaborted", opErr(os.NewSyscallError("accept4", syscall.ECONNABORTED)), true},
		{"wrapped emfile", fmt.Errorf("tls: %w", opErr(syscall.EMFILE)), true},
		{"timeout", opErr(timeoutErr{}), true},
		{"closed", opErr(net.ErrClosed), false},
		{"einval", opErr(os.NewSyscallError("accept4", syscall.EINVAL)), false},
		{"other", errors.New("listener gone"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, server.AcceptRetryable(tc.err))
		})
	}
}

func TestBackoff(t *testing.T) {
	var b server.AcceptBackoff
	var got []time.Duration
	for range 10 {
		got = append(got, b.Next())
	}
	require.Equal(t, []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}, scaleMs(got))
	b.Reset()
	require.Equal(t, 5*time.Millisecond, b.Next())
}

func scaleMs(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / time.Millisecond
	}
	return out
}
