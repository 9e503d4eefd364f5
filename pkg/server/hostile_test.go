package server_test

import (
	"bufio"
	"encoding/binary"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// Issue 42's hostile inputs each end with a clear error, the client's
// (an exception or an HTTP status) or the server log's, and a closed
// connection; and the server goes on serving. A 10,000-deep JSON message
// inside a frame is the exception: see TestHostileDeepJSONInFrame.
func TestHostileInputClosed(t *testing.T) {
	lim := proto.DefaultLimits
	lim.MaxMessageSize = 1 << 20
	logs := &testutil.LogBuffer{}
	s := server.New(server.WithLimits(lim), server.WithHandshakeTimeout(5*time.Second),
		server.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	s.Register(wiretest.NewEcho().Service())
	addr := serveOn(t, s)
	want := map[string]struct{ client, log string }{
		"json truncated":            {"", ""}, // the stream ended mid-message: nothing to say
		"json truncated in a frame": {"", ""},
		"json 10,000 deep":          {"", `err="proto: depth limit exceeded: JSON nested over 132"`},
		"http content-length 1 TiB": {"HTTP/1.1 413 Request Entity Too Large: hatrpc: request body larger than 1048580 bytes (the message size limit)", ""},
		"http chunked, never ends":  {"HTTP/1.1 413 Request Entity Too Large: hatrpc: request body larger than 1048580 bytes (the message size limit)", `err="server: HTTP request body too large: proto: size limit exceeded"`},
		"http chunked, stalls":      {"HTTP/1.1 408 Request Timeout: hatrpc: request body arrived too slowly (handshake_timeout)", ""},
		"zlib bomb":                 {"wire: frame too large: proto: size limit exceeded: message over 1048576 bytes", `err="wire: frame too large: proto: size limit exceeded: message over 1048576 bytes"`},
		"zlib bomb in THeader":      {"wire: frame too large: proto: size limit exceeded: inflated THeader payload over 1048576 bytes", `err="wire: frame too large: proto: size limit exceeded: inflated THeader payload over 1048576 bytes"`},
	}
	for _, h := range wiretest.HostileInputs(lim, "echo") {
		w, ok := want[h.Name]
		if !ok {
			continue
		}
		t.Run(h.Name, func(t *testing.T) {
			res, err := wiretest.SendHostile(addr, h, testenv.HangGuard(2*time.Minute))
			require.NoError(t, err)
			require.True(t, res.Closed, "the server left the connection open: %v", res.Err)
			if w.client == "" {
				require.Empty(t, res.Reply)
			} else {
				require.Contains(t, res.Summary(), w.client)
			}
			if w.log != "" {
				require.Eventually(t, func() bool { return strings.Contains(logs.String(), w.log) }, eventually, 10*time.Millisecond, "server log:\n%s", logs.String())
			}
		})
	}
	require.Len(t, want, 8)
	c := dial(t, addr)
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "still serving"})
	require.NoError(t, err)
	require.Equal(t, "still serving", got)
}

// A 10,000-deep JSON message inside a frame is bounded by its frame: it
// is answered with a PROTOCOL_ERROR exception naming the depth limit, and
// the connection, still in step, answers the next call.
func TestHostileDeepJSONInFrame(t *testing.T) {
	lim := proto.DefaultLimits
	_, _, addr := start(t, server.WithLimits(lim))
	var deep wiretest.Hostile
	for _, h := range wiretest.HostileInputs(lim, "echo") {
		if h.Name == "json 10,000 deep in a frame" {
			deep = h
		}
	}
	require.NotEmpty(t, deep.Head)
	nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(10*time.Second))
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(2*time.Minute))))
	br := bufio.NewReader(nc)
	f := wire.Format{Proto: proto.JSON, Framed: true}
	_, err = nc.Write(deep.Head)
	require.NoError(t, err)
	msg, err := wire.ReadMessage(br, f, nil, nil)
	require.NoError(t, err)
	require.Contains(t, string(msg), `[1,"echo",3,1,{"1":{"str":"decode echo args: proto: depth limit exceeded at offset `)
	require.Contains(t, string(msg), `"2":{"i32":7}`) // PROTOCOL_ERROR

	c := wire.GetCodec()
	defer wire.PutCodec(c)
	req, err := c.AppendMessage(nil, proto.JSON, "echo", proto.Call, 2, &wiretest.EchoArgs{Msg: "in step"})
	require.NoError(t, err)
	_, err = nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(req))), req...))
	require.NoError(t, err)
	msg, err = wire.ReadMessage(br, f, nil, nil)
	require.NoError(t, err)
	h, err := wire.ParseMsgHeader(proto.JSON, msg)
	require.NoError(t, err)
	require.Equal(t, proto.Reply, h.Type)
	var res wiretest.EchoResult
	require.NoError(t, c.Decode(proto.JSON, msg[h.Body:], nil, &res))
	require.Equal(t, "in step", *res.Success)
}
