package hatkv

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestAuthListenerOutOfDescriptors: accepts failing for a moment (out of
// descriptors) do not end the listener; it accepted nothing more after
// the first such error before.
func TestAuthListenerOutOfDescriptors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	al := NewAuthListener(&testutil.FailingListener{Listener: ln, N: 3, Err: testutil.AcceptErr(syscall.EMFILE)}, nil, "", quietLogger(), nil)
	defer al.Close()
	c, err := net.Dial("tcp", al.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	// The descriptors came back: the listener must accept again.
	testutil.AcceptWithin(t, al, 10*time.Second)
}
