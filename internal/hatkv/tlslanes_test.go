//go:build cgo && linux

package hatkv

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/testcert"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

// TestTLSLaneRefusalAdvice: under TLS the refusal of a fast transport says
// what a server with TLS can grant, and that advice works: auto serves TCP
// only (it used to say "start it with --transport shm or auto"), and a
// server started with --transport shm grants shm lanes to a TLS client.
func TestTLSLaneRefusalAdvice(t *testing.T) {
	dir := t.TempDir()
	cert := testcert.Write(t, dir, "good")
	srvTLS, err := ServerTLS(cert.Cert, cert.Key, "")
	require.NoError(t, err)
	cliTLS, err := ClientTLS(cert.CA, "", "", "")
	require.NoError(t, err)
	dial := func(addr, tr string) (*Client, error) {
		return Dial(testCtx(t, 30*time.Second), addr, WithClientTransport(tr), WithClientTLS(cliTLS),
			WithClientOptions(client.WithDialTimeout(10*time.Second), client.WithHandshakeTimeout(10*time.Second)))
	}

	auto, _ := serveAuth(t, WithTLS(srvTLS), WithTransport("auto"))
	_, err = dial(auto, "shm")
	require.ErrorIs(t, err, ErrTransportUnavailable)
	assert.Equal(t, "hatkv: transport not available: the server at "+auto+" did not grant shm lanes (calls would run over tcp); "+
		"with TLS a server grants shm lanes only when started with --transport shm (auto serves TCP only), to clients on its host", err.Error())
	_, err = dial(auto, "rdma")
	require.ErrorIs(t, err, ErrTransportUnavailable)
	assert.Contains(t, err.Error(), "did not grant rdma lanes (calls would run over tcp); a server with TLS never grants rdma lanes (they are not encrypted): use --transport tcp, or shm with a server on this host started with --transport shm")

	shm, _ := serveAuth(t, WithTLS(srvTLS), WithTransport("shm"))
	c, err := dial(shm, "shm")
	require.NoError(t, err, "the advice holds: a TLS server started with --transport shm grants shm lanes")
	defer closeWithin(t, c, 10*time.Second)
	assert.Equal(t, hints.TransportSHM, c.Plan("HatKV:Get").Transport)
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, c.KV().Put(ctx, "k", hatkv.Record{"f": []byte("v")}))
}
