package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
)

// laneSource is whom a fast-path grant counts against: a remote host
// (its share of every lane budget), a local user (its share of the
// pending setups), or "" (a local peer whose user is unknown: only the
// server-wide budgets).
type laneSource struct {
	key    string
	remote bool
}

func (s laneSource) name() string {
	if s.remote {
		return "host " + s.key
	}
	return "user " + s.key[len("uid:"):]
}

// laneSource is the source of c's attach. Thirty-two attaches that never
// bootstrapped, from one loopback client, filled every pending place for
// the setup timeout, again and again: every other local user's shm
// clients were refused (issue 43). Loopback peers are told apart by the
// user owning their socket.
func (c *conn) laneSource() laneSource {
	if h := hostOf(c.remote); h != "" {
		return laneSource{key: h, remote: true}
	}
	if c.nc == nil {
		return laneSource{}
	}
	if uid, ok := c.s.laneBudget.peerUID(c.nc.LocalAddr(), c.nc.RemoteAddr()); ok {
		return laneSource{key: "uid:" + strconv.FormatUint(uint64(uid), 10)}
	}
	return laneSource{}
}

// procPeerUID finds the user owning the other end of a loopback TCP
// connection (local: the server's end, remote: the peer's) in
// /proc/net/tcp and tcp6, where the peer's socket is listed with its
// owner (TCP has no SO_PEERCRED). Not found (another network namespace,
// no procfs, the socket already gone): false.
func procPeerUID(local, remote net.Addr) (uint32, bool) {
	l, ok1 := local.(*net.TCPAddr)
	r, ok2 := remote.(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, false
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if uid, ok := findSocketUID(data, procAddrs(r), procAddrs(l)); ok {
			return uid, true
		}
	}
	return 0, false
}

// procAddrs is a's forms in /proc/net/tcp{,6}: the address's 32-bit words
// in host (little-endian) order in hex, a colon, the port in hex; an IPv4
// address also as IPv4-mapped IPv6.
func procAddrs(a *net.TCPAddr) [][]byte {
	word := func(dst []byte, w []byte) []byte {
		return fmt.Appendf(dst, "%08X", binary.LittleEndian.Uint32(w))
	}
	port := fmt.Sprintf(":%04X", a.Port)
	var out [][]byte
	if v4 := a.IP.To4(); v4 != nil {
		out = append(out, append(word(nil, v4), port...))
	}
	v6 := a.IP.To16()
	if v6 == nil {
		return out
	}
	var b []byte
	for i := 0; i < 16; i += 4 {
		b = word(b, v6[i:i+4])
	}
	return append(out, append(b, port...))
}

// findSocketUID scans a /proc/net/tcp table for the socket whose local
// address is one of src and remote one of dst, and returns its uid.
func findSocketUID(table []byte, src, dst [][]byte) (uint32, bool) {
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Scan() // the header line
	for sc.Scan() {
		// sl local rem st tx:rx tr:when retrnsmt uid ...
		f := bytes.Fields(sc.Bytes())
		if len(f) < 8 || !anyEqual(f[1], src) || !anyEqual(f[2], dst) {
			continue
		}
		uid, err := strconv.ParseUint(string(f[7]), 10, 32)
		if err != nil {
			return 0, false
		}
		return uint32(uid), true
	}
	return 0, false
}

func anyEqual(b []byte, set [][]byte) bool {
	for _, s := range set {
		if bytes.EqualFold(b, s) {
			return true
		}
	}
	return false
}
