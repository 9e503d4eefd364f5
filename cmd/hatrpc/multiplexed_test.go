package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ai "github.com/hatrpc/hatrpc/test/apachegen/interop"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestCallMultiplexed: Apache's Go TMultiplexedProcessor answers only
// calls named "Interop:add", which --multiplexed sends; without it the
// server hangs up, and hatrpc says why that may be.
func TestCallMultiplexed(t *testing.T) {
	conf := testutil.ApacheConf()
	sock, err := thrift.NewTServerSocketTimeout("127.0.0.1:0", conf.SocketTimeout)
	require.NoError(t, err)
	mp := thrift.NewTMultiplexedProcessor()
	mp.RegisterProcessor("Interop", ai.NewInteropProcessor(&testutil.ApacheHandler{}))
	srv := thrift.NewTSimpleServer4(mp, sock, thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), conf),
		thrift.NewTBinaryProtocolFactoryConf(conf))
	srv.SetLogContext(context.Background())
	require.NoError(t, srv.Listen())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.AcceptLoop()
	}()
	t.Cleanup(func() {
		require.NoError(t, srv.Stop())
		<-done
	})
	addr := sock.Addr().String()
	idl := filepath.Join(testutil.TestdataDir(), "interop.thrift")

	code, out, errOut := hatrpc(t, "call", "--multiplexed", "--framed", "--protocol", "binary", "--idl", idl, addr, "Interop.add", `{"a":1,"b":2}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "3\n", out)

	code, _, errOut = hatrpc(t, "call", "--framed", "--protocol", "binary", "--idl", idl, addr, "Interop.add", `{"a":1,"b":2}`)
	assert.Equal(t, 1, code)
	assert.Equal(t, "hatrpc: the server at "+addr+" closed the connection during Interop.add (EOF); a multiplexed Apache server does so for a call without --multiplexed\n", errOut)
}
