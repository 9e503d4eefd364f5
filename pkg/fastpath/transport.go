package fastpath

import (
	"github.com/hatrpc/hatrpc/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

// PickTransport is the hybrid-transport rule, the same on both sides (the
// client picks, the server checks plans by it): a function pinned to
// transport=tcp stays on TCP even on an upgraded connection; otherwise the
// best transport the server granted in the handshake (caps) wins, and a
// function pinned to a transport that was not granted runs over TCP. The
// order of "best" is the transport registry's (internal/transport).
func PickTransport(want hints.Transport, caps uint64) hints.Transport {
	return transport.Pick(want, caps)
}
