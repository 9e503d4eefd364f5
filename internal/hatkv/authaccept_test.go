package hatkv

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
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
	got := make(chan error, 1)
	go func() {
		sc, err := al.Accept()
		if err == nil {
			sc.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		t.Fatal("no connection accepted after the descriptors came back")
	}
}
