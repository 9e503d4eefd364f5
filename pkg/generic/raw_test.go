package generic_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	hg "github.com/hatrpc/hatrpc/test/gen/interop"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestProxy: Apache's Go client passes the interop suite through a
// HatRPC server whose functions forward their bytes (Proxy) to Apache's
// Go server, the client in framed binary, the backend in buffered compact.
func TestProxy(t *testing.T) {
	backendAddr, _ := testutil.StartApacheServer(t, testutil.Stack{Framing: testutil.Buffered, Protocol: testutil.Compact})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	backend, err := client.Dial(ctx, backendAddr)
	require.NoError(t, err)
	defer backend.Close()
	r := testutil.StartServerWith(t, func(s *server.Server) { s.Register(loadInterop(t).Proxy(backend)) })
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			testutil.RunApacheClientSuite(t, testutil.DialApache(t, r.Addr, s))
		})
	}
}

// TestForward: request bytes in, reply bytes out, in the request's
// protocol and seqid, whatever the backend speaks; an application
// exception is a reply, not an error.
func TestForward(t *testing.T) {
	r, _ := testutil.StartHatInterop(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := client.Dial(ctx, r.Addr, client.WithCompact())
	require.NoError(t, err)
	defer conn.Close()
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		t.Run(p.String(), func(t *testing.T) {
			req, err := proto.EncodeMessage(p, nil, "add", proto.Call, 77, &hg.InteropAddArgs{A: 2, B: 1 << 40})
			require.NoError(t, err)
			reply, err := generic.Forward(ctx, conn, req)
			require.NoError(t, err)
			var res hg.InteropAddResult
			h, err := proto.DecodeMessage(p, reply, nil, &res)
			require.NoError(t, err)
			assert.Equal(t, proto.MessageHeader{Name: "add", Type: proto.Reply, SeqID: 77}, h)
			require.NotNil(t, res.Success)
			assert.Equal(t, int64(1<<40+2), *res.Success)

			req, err = proto.EncodeMessage(p, nil, "mayFail", proto.Call, 78, &hg.InteropMayFailArgs{Code: 3})
			require.NoError(t, err)
			reply, err = generic.Forward(ctx, conn, req)
			require.NoError(t, err)
			var ae proto.ApplicationException
			h, err = proto.DecodeMessage(p, reply, nil, &ae)
			require.NoError(t, err)
			assert.Equal(t, proto.Exception, h.Type)
			assert.Equal(t, int32(78), h.SeqID)
			assert.Equal(t, proto.ExcInternalError, ae.Type)

			req, err = proto.EncodeMessage(p, nil, "notify", proto.Oneway, 79, &hg.InteropNotifyArgs{Msg: "x"})
			require.NoError(t, err)
			reply, err = generic.Forward(ctx, conn, req)
			require.NoError(t, err)
			assert.Nil(t, reply)
		})
	}
	_, err = generic.Forward(ctx, conn, []byte("GET / HTTP/1.1\r\n"))
	assert.ErrorIs(t, err, generic.ErrNotMessage)
	_, err = generic.Forward(ctx, conn, []byte{0x80, 0x01, 0, 1, 0, 0, 0, 3, 'a', 'd'})
	assert.ErrorIs(t, err, proto.ErrInvalidData)
}
