package server_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestJSONHelloIsUnknown: on a TJSONProtocol connection the HatRPC hello
// is an unknown method, answered in JSON, and the connection goes on in
// plain JSON (HatRPC framing carries binary or compact only).
func TestJSONHelloIsUnknown(t *testing.T) {
	nc, br := jsonConn(t)
	msg := jsonRoundTrip(t, nc, br, []byte(`[1,"`+wire.HelloMethod+`",1,0,{"1":{"i32":1},"2":{"i64":1}}]`))
	require.Equal(t, `[1,"`+wire.HelloMethod+`",3,0,{"1":{"str":"unknown method `+wire.HelloMethod+`"},"2":{"i32":1}}]`, string(msg))

	c := wire.GetCodec()
	defer wire.PutCodec(c)
	req, err := c.AppendMessage(nil, proto.JSON, "echo", proto.Call, 5, &wiretest.EchoArgs{Msg: "a<b", Blob: []byte("!")})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(req), `[1,"echo",1,5,{`), string(req))
	msg = jsonRoundTrip(t, nc, br, req)
	h, err := wire.ParseMsgHeader(proto.JSON, msg)
	require.NoError(t, err)
	require.Equal(t, proto.Reply, h.Type)
	require.Equal(t, int32(5), h.Seqid)
	var res wiretest.EchoResult
	require.NoError(t, c.Decode(proto.JSON, msg[h.Body:], nil, &res))
	require.Equal(t, "a<b!", *res.Success)
}

// TestJSONBadInputAnswered: a JSON call the server cannot decode gets a
// JSON exception naming the failure, then the connection closes.
func TestJSONBadInputAnswered(t *testing.T) {
	nc, br := jsonConn(t)
	msg := jsonRoundTrip(t, nc, br, []byte(`[1,"echo",1,9,{"1":{"str":"\ud800"}}]`))
	h, err := wire.ParseMsgHeader(proto.JSON, msg)
	require.NoError(t, err)
	require.Equal(t, proto.Exception, h.Type)
	require.Equal(t, int32(9), h.Seqid)
	require.Contains(t, string(msg), "surrogate")
}

// jsonConn is a raw connection to a fresh server.
func jsonConn(t *testing.T) (net.Conn, *bufio.Reader) {
	_, _, addr := start(t)
	nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(10*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))
	return nc, bufio.NewReader(nc)
}

// jsonRoundTrip sends one JSON message and reads the answer.
func jsonRoundTrip(t *testing.T, nc net.Conn, br *bufio.Reader, req []byte) []byte {
	_, err := nc.Write(req)
	require.NoError(t, err)
	msg, err := wire.ReadMessage(br, wire.Format{Proto: proto.JSON}, nil, nil)
	require.NoError(t, err)
	return msg
}

// TestJSONClientRefusesTHeader: THeader has no protocol id for JSON.
func TestJSONClientRefusesTHeader(t *testing.T) {
	_, err := client.Dial(tctx(t), "127.0.0.1:1", client.WithTHeader(), client.WithProtocol(proto.JSON))
	require.ErrorContains(t, err, "THeader carries binary or compact, not json")
}
