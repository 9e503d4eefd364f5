package wire

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// An armed read (the poll) and a read-ahead run once a lone call or a
// burst ends, on both sides of a connection: neither may allocate more
// than the socket's own Read.
func TestSpinReaderReadsDoNotAllocate(t *testing.T) {
	tests := []struct {
		name string
		read func(r *SpinReader, nc net.Conn, p []byte) (int, error)
		want float64 // allocations a round more than the socket's Read
	}{
		{"the socket's Read", func(_ *SpinReader, nc net.Conn, p []byte) (int, error) { return nc.Read(p) }, 0},
		{"armed read", func(r *SpinReader, _ net.Conn, p []byte) (int, error) { r.Arm(); return r.Read(p) }, 0},
		{"read ahead", func(r *SpinReader, _ net.Conn, p []byte) (int, error) { return r.ReadAhead(p) }, 0},
	}
	a, b := tcpPair(t)
	r := NewSpinReader(b)
	require.NotNil(t, r)
	msg := []byte("ping")
	p := make([]byte, len(msg))
	var read func(r *SpinReader, nc net.Conn, p []byte) (int, error)
	round := func() {
		_, err := a.Write(msg)
		require.NoError(t, err)
		waitReadable(t, b)
		n, err := read(r, b, p)
		require.NoError(t, err)
		require.Equal(t, msg, p[:n])
	}
	read = tests[0].read
	round() // the runtime's first read on the descriptor sets up its poller state
	base := testing.AllocsPerRun(50, round)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read = tt.read
			require.Equal(t, tt.want, testing.AllocsPerRun(50, round)-base)
		})
	}
}
