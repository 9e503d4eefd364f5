package wire

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// tcpPair is loopback with a 5 s read deadline on both ends, so no read
// in these tests can hang.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	a, b = loopback(t)
	for _, c := range []net.Conn{a, b} {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	}
	return a, b
}

// waitReadable waits (under a hang guard) until c has bytes to read,
// reading none of them.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var n int
	require.NoError(t, rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for n, err = 0, unix.EINTR; err == unix.EINTR; {
			n, err = unix.Poll(pfd, int(testenv.HangGuard(5*time.Second).Milliseconds()))
		}
	}))
	require.NoError(t, err)
	require.Equal(t, 1, n, "the data never arrived")
}

func TestSpinReader(t *testing.T) {
	// afterMiss: the data (or the deadline) comes only once the poll
	// timed out (SpinReader.onMiss), so the outcome does not depend on
	// how fast this machine schedules the two ends.
	const afterMiss = time.Duration(-2)
	tests := []struct {
		name       string
		arm        bool
		sendAfter  time.Duration // -1: close the peer instead of sending
		deadline   bool          // the read deadline passes after a miss, nothing is sent
		wantErr    error
		wantMisses int // -1: not checked
	}{
		{"unarmed reads as the socket does", false, 0, false, nil, 0},
		{"armed, data already there", true, 0, false, nil, 0},
		// Sent by a goroutine spinning 10 µs (Go timers fire ~1 ms late
		// on an idle machine); whether it makes the 50 µs window depends
		// on the load, so only the bytes are checked.
		{"armed, data while polling", true, 10 * time.Microsecond, false, nil, -1},
		{"armed, data after the window", true, afterMiss, false, nil, 1},
		{"armed, peer closes", true, -1, false, io.EOF, 0},
		{"armed, deadline passes", true, 0, true, os.ErrDeadlineExceeded, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tcpPair(t)
			r := NewSpinReader(a)
			require.NotNil(t, r)
			if tt.arm {
				r.Arm()
			}
			msg := []byte("ping")
			switch {
			case tt.deadline:
				r.onMiss = func() { _ = a.SetReadDeadline(time.Now()) }
			case tt.sendAfter == afterMiss:
				r.onMiss = func() { _, _ = b.Write(msg) }
			case tt.sendAfter < 0:
				require.NoError(t, b.Close())
			case tt.sendAfter == 0:
				_, err := b.Write(msg)
				require.NoError(t, err)
				waitReadable(t, a) // there before the read: a sleep may not be, on a loaded host
			default:
				start := time.Now()
				go func() {
					for time.Since(start) < tt.sendAfter {
					}
					_, _ = b.Write(msg)
				}()
			}
			buf := make([]byte, 16)
			n, err := r.Read(buf)
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, tt.wantErr)
				if tt.wantErr != io.EOF {
					var oe *net.OpError
					assert.True(t, errors.As(err, &oe), "wrapped like net.Conn.Read: %v", err)
				}
			} else {
				require.NoError(t, err)
				assert.Equal(t, msg, buf[:n])
			}
			if tt.wantMisses >= 0 {
				assert.Equal(t, tt.wantMisses, r.misses)
			}
			assert.False(t, r.armed, "an Arm covers one read")
		})
	}
}

func TestSpinReaderPausesAfterMisses(t *testing.T) {
	a, b := tcpPair(t)
	r := NewSpinReader(a)
	require.NotNil(t, r)
	buf := make([]byte, 8)
	for i := range spinMisses {
		r.Arm()
		// Sent once the poll gave up, whatever the machine's load.
		r.onMiss = func() { _, _ = b.Write([]byte{byte(i)}) }
		n, err := r.Read(buf)
		require.NoError(t, err)
		require.Equal(t, []byte{byte(i)}, buf[:n])
	}
	assert.Equal(t, spinPause, r.pause, "polling stops after %d misses in a row", spinMisses)
	assert.Zero(t, r.misses)

	// While paused an armed read does not poll (and counts down).
	r.Arm()
	_, err := b.Write([]byte("x"))
	require.NoError(t, err)
	n, err := r.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "x", string(buf[:n]))
	assert.Equal(t, spinPause-1, r.pause)
}

func TestSpinReaderNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	r := NewSpinReader(a)
	assert.Nil(t, r)
	r.Arm() // safe on nil
	assert.Equal(t, a, r.Reader(a), "a nil SpinReader reads the conn itself")
}
