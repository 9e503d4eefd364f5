package interop_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	hg "github.com/hatrpc/hatrpc/test/gen/interop"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestJSONApacheGoClientToHatServer: Apache's Go client with
// TJSONProtocol, buffered and framed, plain and multiplexed (Apache's
// json and multij), calls a HatRPC server, which answers in JSON.
func TestJSONApacheGoClientToHatServer(t *testing.T) {
	srv, _ := testutil.StartHatInterop(t)
	for _, s := range testutil.JSONStacks {
		t.Run(s.String(), func(t *testing.T) {
			testutil.RunApacheClientSuite(t, testutil.DialApache(t, srv.Addr, s))
		})
		t.Run(s.String()+"+multiplexed", func(t *testing.T) {
			testutil.RunApacheClientSuite(t, testutil.DialApacheMux(t, srv.Addr, s))
		})
	}
}

// TestJSONHatClientToApacheServer: a HatRPC client with
// WithProtocol(proto.JSON) calls Apache's Go server speaking
// TJSONProtocol, buffered and framed.
func TestJSONHatClientToApacheServer(t *testing.T) {
	for _, s := range testutil.JSONStacks {
		t.Run(s.String(), func(t *testing.T) {
			addr, _ := testutil.StartApacheServer(t, s)
			c := dialHat(t, addr, hatOptions(s)...)
			assert.False(t, c.Upgraded())
			testutil.RunHatClientSuite(t, hg.NewInteropClient(c))
		})
	}
}

// TestJSONHatClientToHatServer: JSON stays plain Thrift between two
// HatRPC ends (no handshake, no upgrade), framed or not.
func TestJSONHatClientToHatServer(t *testing.T) {
	srv, _ := testutil.StartHatInterop(t)
	for _, framed := range []bool{false, true} {
		opts := []client.Option{client.WithProtocol(proto.JSON), client.WithUnframed()}
		if framed {
			opts[1] = client.WithFramed()
		}
		c := dialHat(t, srv.Addr, opts...)
		assert.False(t, c.Upgraded(), "a JSON connection stays plain Thrift")
		testutil.RunHatClientSuite(t, hg.NewInteropClient(c))
	}
}

// TestJSONPythonClientToHatServer: Debian's python3-thrift with
// TJSONProtocol calls a HatRPC server.
func TestJSONPythonClientToHatServer(t *testing.T) {
	gen := testutil.GenPython(t)
	srv, _ := testutil.StartHatInterop(t)
	for _, s := range testutil.JSONStacks {
		t.Run(s.String(), func(t *testing.T) {
			assert.Equal(t, testutil.PyChecks, testutil.RunPython(t, gen, srv.Addr, s))
		})
	}
}

// TestJSONDefaultClientToApacheServer: a client with no protocol option
// finds an Apache server that speaks TJSONProtocol only (it probes JSON
// last), buffered or framed.
func TestJSONDefaultClientToApacheServer(t *testing.T) {
	for _, s := range testutil.JSONStacks {
		t.Run(s.String(), func(t *testing.T) {
			addr, _ := testutil.StartApacheServer(t, s)
			c := dialHat(t, addr, client.WithHandshakeTimeout(time.Minute))
			assert.False(t, c.Upgraded())
			testutil.RunHatClientSuite(t, hg.NewInteropClient(c))
		})
	}
}
