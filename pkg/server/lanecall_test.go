//go:build cgo && linux

package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// laneRequest is the frame a client sends on a lane for method name.
func laneRequest(t testing.TB, name, msg string, seqid int32, timeout time.Duration) []byte {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	b, err := codec.AppendMessage(make([]byte, wire.HeaderSize), proto.Binary, name, proto.Call, seqid, &wiretest.EchoArgs{Msg: msg})
	require.NoError(t, err)
	wire.SealFrame(b, wire.KindCall, 0, seqid, timeout)
	return b
}

// BenchmarkLaneCall is the server's Go time for one 64 B echo on a lane,
// engine left out.
func BenchmarkLaneCall(b *testing.B) {
	s := server.New(server.WithLogger(quiet))
	s.Register(wiretest.NewEcho().Service())
	call, done := server.LaneCaller(s)
	defer done()
	req := laneRequest(b, "echo", strings.Repeat("x", 64), 7, 0)
	require.NotEmpty(b, call(req))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		call(req)
	}
}
