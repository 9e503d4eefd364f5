package crosstest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/crosstest"
)

// TestParseFlags: Apache's flags parse to the stack they name; a stack
// HatRPC does not speak is ErrNotSupported with what is missing, never a
// fallback, and an unknown value is a usage error.
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
		{args: []string{"--protocol=json"}, err: "--protocol=json (TJSONProtocol): not supported by HatRPC", unsupported: true},
		{args: []string{"--protocol=multij"}, err: "--protocol=multij (TJSONProtocol): not supported by HatRPC", unsupported: true},
		{args: []string{"--transport=http"}, err: "--transport=http: not supported by HatRPC", unsupported: true},
		{args: []string{"--transport=zlib"}, err: "--transport=zlib: not supported by HatRPC", unsupported: true},
		{args: []string{"--protocol=header", "--transport=framed"}, err: "--protocol=header inside --transport=framed (THeader in a frame): not supported by HatRPC", unsupported: true},
		{args: []string{"--domain-socket=/tmp/ThriftTest.thrift"}, err: "--domain-socket (unix sockets): not supported by HatRPC", unsupported: true},
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
	_, err := crosstest.Stack{Protocol: "json", Transport: "buffered"}.ClientOptions()
	assert.ErrorIs(t, err, crosstest.ErrNotSupported)
}

func errorIsNotSupported(err error) bool { return errors.Is(err, crosstest.ErrNotSupported) }
