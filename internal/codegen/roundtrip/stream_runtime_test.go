package roundtrip_test

import (
	"testing"

	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/streams/streams"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/streams/streams/streamsserver"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// TestStreamsOverTCP runs the stream suite the fake passes over the
// runtime's streams: a real server and client.Conn on loopback TCP.
func TestStreamsOverTCP(t *testing.T) {
	streamSuite(t, func(t *testing.T, h streams.StreamerHandler) *streams.StreamerClient {
		conn := serve(t, func(s *server.Server) { streamsserver.RegisterStreamer(s, h) })
		return streams.NewStreamerClient(conn)
	})
}
