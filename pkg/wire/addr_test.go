package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNetworkAndServerName(t *testing.T) {
	tests := []struct {
		addr, network, address, serverName string
	}{
		{"127.0.0.1:9090", "tcp", "127.0.0.1:9090", "127.0.0.1"},
		{"kv.internal:9090", "tcp", "kv.internal:9090", "kv.internal"},
		{"[::1]:9090", "tcp", "[::1]:9090", "::1"},
		{"unix:/run/hatkv.sock", "unix", "/run/hatkv.sock", "localhost"},
		{"unix:@hatkv", "unix", "@hatkv", "localhost"},
		{"no-port", "tcp", "no-port", ""},
	}
	for _, tc := range tests {
		network, address := Network(tc.addr)
		assert.Equal(t, tc.network, network, tc.addr)
		assert.Equal(t, tc.address, address, tc.addr)
		assert.Equal(t, tc.serverName, ServerName(tc.addr), tc.addr)
	}
}
