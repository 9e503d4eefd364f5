// Package fastpathtest says which verbs provider the fast-path tests run
// on, in one place: HATRPC_PROVIDER ("shm" or "ibv"; shm when unset). On the
// Soft-RoCE guest (test/rxe) and on RDMA hosts it is "ibv", so every lane,
// FLOCK and hatkv test that runs on shm runs on real verbs unchanged.
package fastpathtest

import (
	"os"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Provider is the provider to ask for (server.WithRDMA, client.WithRDMA,
// rdma.WithProvider).
func Provider() string {
	if os.Getenv(rdma.EnvProvider) == rdma.ProviderIBV {
		return rdma.ProviderIBV
	}
	return rdma.ProviderSHM
}

// Transport is the transport name calls on that provider report in plans,
// metrics and hatkv's --transport flag: "shm", or "rdma" for ibv.
func Transport() string { return HintTransport().String() }

// OtherTransport is the fast transport an "auto" server on this host does
// not offer: with an RDMA device it offers rdma lanes only (same-host
// clients included, test/rxe/README.md), without one shm only.
func OtherTransport() string {
	if HintTransport() == hints.TransportRDMA {
		return hints.TransportSHM.String()
	}
	return hints.TransportRDMA.String()
}

// HintTransport is Transport as a hint value (transport=shm or rdma).
func HintTransport() hints.Transport {
	if Provider() == rdma.ProviderIBV {
		return hints.TransportRDMA
	}
	return hints.TransportSHM
}
