package wire

import (
	"net"
	"strings"
)

// UnixPrefix starts a unix domain socket address: `unix:/run/x.sock` (a
// socket file) or `unix:@name` (Linux's abstract namespace, no file).
const UnixPrefix = "unix:"

// Network splits a HatRPC address into the network and address net.Dial
// and net.Listen take: "unix" and the path (or @name) for a UnixPrefix
// address, "tcp" and addr itself otherwise.
func Network(addr string) (network, address string) {
	if path, ok := strings.CutPrefix(addr, UnixPrefix); ok {
		return "unix", path
	}
	return "tcp", addr
}

// ServerName is the name a TLS client verifies the server's certificate
// for when its tls.Config names none: the host of host:port, and
// "localhost" for a unix socket, whose server is on this host. "" when
// addr has no host.
func ServerName(addr string) string {
	if strings.HasPrefix(addr, UnixPrefix) {
		return "localhost"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return host
}
