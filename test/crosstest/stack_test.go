package crosstest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/crosstest"
)

// TestParseFlags: Apache's flags parse to the stack they name (HTTP on
// host:port whatever --domain-socket says, as Apache's programs), and an
// unknown value is a usage error, never ErrNotSupported.
func TestParseFlags(t *testing.T) {
	tests := []struct {
		args        []string
		stack       string
		err         string
		unsupported bool
	}{
		{args: nil, stack: "binary-buffered-ip"},
		{args: []string{"--protocol=multic", "--transport=framed", "--ssl"}, stack: "multic-framed-ip-ssl"},
		{args: []string{"--protocol", "multih", "--port", "9091", "--testloops", "3"}, stack: "multih-buffered-ip"},
		{args: []string{"--protocol=json"}, stack: "json-buffered-ip"},
		{args: []string{"--protocol=multij", "--transport=framed"}, stack: "multij-framed-ip"},
		{args: []string{"--transport=http", "--ssl"}, stack: "binary-http-ip-ssl"},
		{args: []string{"--transport=zlib", "--protocol=compact"}, stack: "compact-zlib-ip"},
		{args: []string{"--protocol=header", "--transport=framed"}, stack: "header-framed-ip"},
		{args: []string{"--domain-socket=/tmp/ThriftTest.thrift"}, stack: "binary-buffered-domain"},
		{args: []string{"--protocol=header", "--transport=http"}, stack: "header-http-ip"},
		{args: []string{"--protocol=multih", "--transport=zlib"}, stack: "multih-zlib-ip"},
		{args: []string{"--transport=http", "--domain-socket=/tmp/s"}, stack: "binary-http-ip"},
		{args: []string{"--protocol=accel"}, err: `unknown --protocol "accel" (one of binary, compact, json, header, multi, multic, multij, multih)`},
		{args: []string{"--transport=udp"}, err: `unknown --transport "udp" (one of buffered, framed, http, zlib)`},
		{args: []string{"--testloops=0"}, err: "--testloops 0: must be at least 1"},
		{args: []string{"extra"}, err: `unexpected arguments ["extra"]`},
	}
	for _, tt := range tests {
		t.Run(tt.stack+tt.err, func(t *testing.T) {
			f, err := crosstest.ParseFlags("testclient", tt.args)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				assert.Equal(t, tt.unsupported, errorIsNotSupported(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.stack, f.Stack.String())
			opts, err := f.Stack.ClientOptions()
			require.NoError(t, err)
			assert.NotEmpty(t, opts)
		})
	}
}

// TestClientOptionsRefuse: the client refuses what ParseFlags refuses, for
// a caller that builds a Stack by hand.
func TestClientOptionsRefuse(t *testing.T) {
	_, err := crosstest.Stack{Protocol: "binary", Transport: "http", DomainSocket: "/tmp/s"}.ClientOptions()
	assert.ErrorIs(t, err, crosstest.ErrNotSupported)
}

func errorIsNotSupported(err error) bool { return errors.Is(err, crosstest.ErrNotSupported) }

// TestFlagsAddr: the address a client dials for the flags.
func TestFlagsAddr(t *testing.T) {
	tests := []struct {
		args []string
		addr string
	}{
		{[]string{"--port=9091"}, "localhost:9091"},
		{[]string{"--transport=http", "--port=9091"}, "http://localhost:9091/"},
		{[]string{"--transport=http", "--ssl", "--host=127.0.0.1"}, "https://127.0.0.1:9090/"},
		{[]string{"--domain-socket=/tmp/tt.sock"}, "unix:/tmp/tt.sock"},
		{[]string{"--domain-socket=/tmp/tt.sock", "--transport=http", "--port=9091"}, "http://localhost:9091/"},
	}
	for _, tt := range tests {
		f, err := crosstest.ParseFlags("testclient", tt.args)
		require.NoError(t, err)
		assert.Equal(t, tt.addr, f.Addr(), "%q", tt.args)
	}
}
