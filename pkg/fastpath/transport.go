package fastpath

import (
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
)

// PickTransport is the hybrid-transport rule, the same on both sides (the
// client picks, the server checks plans by it): a function pinned to
// transport=tcp stays on TCP even on an upgraded connection; otherwise the
// best transport the server granted in the handshake (caps) wins, and a
// function pinned to a transport that was not granted runs over TCP. The
// order of "best" is the transport registry's (pkg/internal/transport).
func PickTransport(want hints.Transport, caps uint64) hints.Transport {
	return transport.Pick(want, caps)
}

// Provider is the verbs provider a transport needs: shm for shm, ibv for
// rdma, auto (whichever the host has) for auto, "" for tcp.
func Provider(t hints.Transport) string { return transport.ProviderFor(t) }

// Lanes reports whether calls on transport t run on engine lanes (shm,
// rdma); false for tcp and auto.
func Lanes(t hints.Transport) bool { return transport.Lanes(t) }
