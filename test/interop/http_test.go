package interop_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	ai "github.com/hatrpc/hatrpc/test/apachegen/interop"
	hg "github.com/hatrpc/hatrpc/test/gen/interop"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// httpFraming is the word pyclient.py takes for Apache's THttpClient.
const httpFraming testutil.Framing = "http"

var httpProtocols = []testutil.Protocol{testutil.Binary, testutil.Compact}

func apacheProtocol(p testutil.Protocol) thrift.TProtocolFactory {
	conf := testutil.ApacheConf()
	if p == testutil.Compact {
		return thrift.NewTCompactProtocolFactoryConf(conf)
	}
	return thrift.NewTBinaryProtocolFactoryConf(conf)
}

// Python's THttpClient (Debian's python3-thrift) posts every call of the
// interop suite to a HatRPC server's own port.
func TestPythonHTTPClientToHatServer(t *testing.T) {
	gen := testutil.GenPython(t)
	srv, _ := testutil.StartHatInterop(t)
	for _, p := range httpProtocols {
		s := testutil.Stack{Framing: httpFraming, Protocol: p}
		t.Run(s.String(), func(t *testing.T) {
			assert.Equal(t, testutil.PyChecks, testutil.RunPython(t, gen, srv.Addr, s))
		})
	}
}

// Apache's Go THttpClient with Apache's generated client runs the suite
// against a HatRPC server's own port.
func TestApacheGoHTTPClientToHatServer(t *testing.T) {
	srv, _ := testutil.StartHatInterop(t)
	for _, p := range httpProtocols {
		t.Run(string(p), func(t *testing.T) {
			tr, err := thrift.NewTHttpClientWithOptions("http://"+srv.Addr+"/",
				thrift.THttpClientOptions{Client: &http.Client{Timeout: time.Minute}})
			require.NoError(t, err)
			defer tr.Close()
			testutil.RunApacheClientSuite(t, ai.NewInteropClientFactory(tr, apacheProtocol(p)))
		})
	}
}

// hatgen's generated client over HTTP runs the suite against Apache's Go
// NewThriftHandlerFunc and against a HatRPC server.
func TestHatHTTPClient(t *testing.T) {
	hat, _ := testutil.StartHatInterop(t)
	for _, p := range httpProtocols {
		opts := []client.Option{}
		if p == testutil.Compact {
			opts = append(opts, client.WithCompact())
		}
		t.Run("apache/"+string(p), func(t *testing.T) {
			pf := apacheProtocol(p)
			hs := httptest.NewServer(http.HandlerFunc(thrift.NewThriftHandlerFunc(ai.NewInteropProcessor(&testutil.ApacheHandler{}), pf, pf)))
			defer hs.Close()
			testutil.RunHatClientSuite(t, hg.NewInteropClient(dialHat(t, hs.URL, opts...)))
		})
		t.Run("hatrpc/"+string(p), func(t *testing.T) {
			testutil.RunHatClientSuite(t, hg.NewInteropClient(dialHat(t, "http://"+hat.Addr, opts...)))
		})
	}
}
