package fastpath

import (
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// PickTransport is the hybrid-transport rule, the same on both sides (the
// client picks, the server checks plans by it): a function pinned to
// transport=tcp stays on TCP even on an upgraded connection; otherwise the
// best transport the server granted in the handshake (caps) wins, and a
// function pinned to a transport that was not granted runs over TCP.
func PickTransport(want hints.Transport, caps uint64) hints.Transport {
	switch {
	case want == hints.TransportTCP:
		return hints.TransportTCP
	case caps&wire.CapRDMA != 0 && (want == hints.TransportAuto || want == hints.TransportRDMA):
		return hints.TransportRDMA
	case caps&wire.CapSHM != 0 && (want == hints.TransportAuto || want == hints.TransportSHM):
		return hints.TransportSHM
	}
	return hints.TransportTCP
}
