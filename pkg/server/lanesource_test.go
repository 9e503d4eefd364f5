//go:build cgo && linux

package server

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// D8 of issue 43: attaches that never bootstrap, all from one local user,
// take at most all but a quarter of the pending places: another user's
// client (or a remote host's) is still granted its lane.
func TestPendingSetupsFairPerUser(t *testing.T) {
	c := attachConn(t, WithLaneLimits(LaneLimits{Pending: 32}))
	c.nc, _ = net.Pipe()
	defer c.nc.Close()
	uid := uint32(1000)
	c.s.laneBudget.peerUID = func(net.Addr, net.Addr) (uint32, bool) { return uid, true }
	var held []*lane
	defer func() {
		for _, l := range held {
			l.grant.release()
		}
	}()
	refused := 0
	for range 32 {
		l, exc := c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
		if exc != nil {
			refused++
			assert.Equal(t, "hatrpc: server: fast-path budget exhausted: user 1000: 24 lane setups pending", exc.Message)
			continue
		}
		held = append(held, l)
	}
	assert.Len(t, held, 24)
	assert.Equal(t, 8, refused)

	uid = 2000 // another user: granted, up to the server-wide limit
	for range 8 {
		l, exc := c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
		require.Nil(t, exc)
		held = append(held, l)
	}
	_, exc := c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
	require.NotNil(t, exc)
	assert.Equal(t, "hatrpc: server: fast-path budget exhausted: 32 lane setups pending", exc.Message)

	// The stuck setups time out (released): the user's places come back.
	for _, l := range held[:24] {
		l.grant.release()
	}
	held = held[24:]
	uid = 1000
	l, exc := c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
	require.Nil(t, exc)
	held = append(held, l)
}

// procPeerUID finds the user of a real loopback connection's peer.
func TestProcPeerUID(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cl, err := net.Dial("tcp4", ln.Addr().String())
	require.NoError(t, err)
	defer cl.Close()
	sv, err := ln.Accept()
	require.NoError(t, err)
	defer sv.Close()
	uid, ok := procPeerUID(sv.LocalAddr(), sv.RemoteAddr())
	require.True(t, ok)
	assert.Equal(t, uint32(os.Getuid()), uid)
	_, ok = procPeerUID(sv.LocalAddr(), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1})
	assert.False(t, ok)
}

func TestFindSocketUID(t *testing.T) {
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0000000000000000FFFF00000100007F:D432 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 3 1
`)
	a := func(port int) [][]byte { return procAddrs(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}) }
	uid, ok := findSocketUID(table, a(0xD431), a(0x1F90))
	require.True(t, ok)
	assert.Equal(t, uint32(1000), uid)
	uid, ok = findSocketUID(table, a(0xD432), a(0x1F90)) // IPv4-mapped, as in tcp6
	require.True(t, ok)
	assert.Equal(t, uint32(1001), uid)
	_, ok = findSocketUID(table, a(0x1F90), a(0xD431))
	assert.False(t, ok)
}

func FuzzFindSocketUID(f *testing.F) {
	f.Add([]byte("sl local rem\n 0: 0100007F:D431 0100007F:1F90 01 0:0 0:0 0 1000 0 2\n"), 0xD431, 0x1F90)
	f.Add([]byte(""), 1, 2)
	f.Add([]byte("\n 0: 0100007F:0001 0100007F:0002 01 a b c x"), 1, 2)
	f.Fuzz(func(t *testing.T, table []byte, src, dst int) {
		a := func(port int) [][]byte {
			return procAddrs(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port & 0xFFFF})
		}
		uid, ok := findSocketUID(table, a(src), a(dst))
		if !ok && uid != 0 {
			t.Fatalf("uid %d without a match", uid)
		}
		_ = fmt.Sprint(uid)
	})
}
