//go:build cgo && linux

package fastpath

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// A server's link reads the client's cancels (C and a stream number)
// among go-aways; a truncated cancel, or any other byte, is the peer
// gone. A link without a cancel callback (the client's, an earlier
// server's) takes a cancel for the peer gone too.
func TestLinkCancels(t *testing.T) {
	tests := []struct {
		name    string
		take    bool   // the watcher takes cancels
		send    []byte // what the peer writes, then it closes
		cancels []uint32
		goaways int
	}{
		{"cancels and go-aways", true, []byte{'C', 0, 0, 0, 7, 'G', 'C', 1, 2, 3, 4}, []uint32{7, 0x01020304}, 1},
		{"truncated cancel", true, []byte{'C', 0, 0}, nil, 0},
		{"other byte", true, []byte{'X', 'C', 0, 0, 0, 1}, nil, 0},
		{"not taken", false, []byte{'C', 0, 0, 0, 1}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := net.Pipe()
			var cancels []uint32
			goaways := 0
			dead := make(chan struct{})
			var cancel func(uint32)
			if tt.take {
				cancel = func(n uint32) { cancels = append(cancels, n) }
			}
			l := WatchCancels(a, func() { goaways++ }, cancel, func() { close(dead) })
			go func() {
				_, _ = b.Write(tt.send)
				_ = b.Close()
			}()
			select {
			case <-dead:
			case <-time.After(testenv.HangGuard(5 * time.Second)):
				t.Fatal("the link's end not seen")
			}
			l.Close()
			require.Equal(t, tt.cancels, cancels)
			require.Equal(t, tt.goaways, goaways)
		})
	}
}

// SendCancel writes what WatchCancels reads.
func TestLinkSendCancel(t *testing.T) {
	a, b := net.Pipe()
	got := make(chan uint32, 1)
	l := WatchCancels(a, nil, func(n uint32) { got <- n }, func() {})
	peer := &Link{nc: b}
	go func() { _ = peer.SendCancel(1<<32 - 1) }()
	select {
	case n := <-got:
		require.Equal(t, uint32(1<<32-1), n)
	case <-time.After(testenv.HangGuard(5 * time.Second)):
		t.Fatal("cancel not seen")
	}
	require.NoError(t, b.Close())
	l.Close()
}

// FuzzLink: whatever a peer writes, the watcher ends once the link does,
// having taken only whole cancels.
func FuzzLink(f *testing.F) {
	f.Add([]byte{'C', 0, 0, 0, 7, 'G'})
	f.Add([]byte{'G', 'C', 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		n := 0
		dead := make(chan struct{})
		l := WatchCancels(a, func() {}, func(uint32) { n++ }, func() { close(dead) })
		go func() {
			_, _ = b.Write(in)
			_ = b.Close()
		}()
		<-dead
		l.Close()
		require.LessOrEqual(t, 5*n, len(in))
	})
}
