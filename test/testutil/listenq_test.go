package testutil

import (
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// ListenQueue reads a listener's accept queue from the kernel: connects
// nobody accepts wait in it, and accepting them empties it.
func TestListenQueue(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	require.Regexp(t, `^listen queue of 127\.0\.0\.1:\d+: 0 waiting \(bound \d+\)$`, ListenQueue(addr))
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		conns = append(conns, c)
	}
	// The three wait (the client's last ACK may reach the listener a
	// moment after its connect returned).
	deadline := time.Now().Add(testenv.HangGuard(5 * time.Second))
	for !regexp.MustCompile(`: 3 waiting`).MatchString(ListenQueue(addr)) {
		require.True(t, time.Now().Before(deadline), ListenQueue(addr))
		time.Sleep(time.Millisecond)
	}
	require.Regexp(t, `: 3 waiting \(bound \d+\)$`, ListenQueue(addr))
	for range conns {
		require.NoError(t, ln.(*net.TCPListener).SetDeadline(time.Now().Add(testenv.HangGuard(5*time.Second))))
		a, err := ln.Accept()
		require.NoError(t, err)
		defer a.Close()
	}
	require.Regexp(t, `: 0 waiting`, ListenQueue(addr))
	require.Equal(t, "listen queue of 127.0.0.1:1: no listening socket", ListenQueue("127.0.0.1:1"))
}
