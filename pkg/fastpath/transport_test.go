package fastpath

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// TestRegistryFacade: PickTransport and ParseProvider are the transport
// registry's rules (their cases are pkg/internal/transport's tests), for
// every hint and every grant.
func TestRegistryFacade(t *testing.T) {
	for _, want := range []hints.Transport{hints.TransportAuto, hints.TransportRDMA, hints.TransportSHM, hints.TransportTCP} {
		for c := range 2 * wire.CapAttach { // every combination of the framing, rdma, shm and attach bits
			require.Equal(t, transport.Pick(want, c), PickTransport(want, c), "want=%v caps=%b", want, c)
		}
	}
	for _, name := range []string{"", "off", "auto", "shm", "ibv", "rdma"} {
		got, err := ParseProvider(name)
		want, werr := transport.ParseProvider(name)
		require.Equal(t, want, got, name)
		require.Equal(t, werr, err, name)
	}
	_, err := ParseProvider("verbs")
	require.ErrorIs(t, err, ErrBadProvider)
}
