package fastpath

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

func TestPickTransport(t *testing.T) {
	all := wire.CapFraming | wire.CapRDMA | wire.CapSHM
	cases := []struct {
		want hints.Transport
		caps uint64
		got  hints.Transport
	}{
		{hints.TransportAuto, wire.CapFraming, hints.TransportTCP},
		{hints.TransportRDMA, wire.CapFraming, hints.TransportTCP}, // not granted: fall back
		{hints.TransportSHM, 0, hints.TransportTCP},
		{hints.TransportTCP, all, hints.TransportTCP}, // pinned stays on TCP when upgraded
		{hints.TransportAuto, all, hints.TransportRDMA},
		{hints.TransportRDMA, all, hints.TransportRDMA},
		{hints.TransportSHM, all, hints.TransportSHM},
		{hints.TransportAuto, wire.CapFraming | wire.CapSHM, hints.TransportSHM},
		{hints.TransportRDMA, wire.CapFraming | wire.CapSHM, hints.TransportTCP},
	}
	for _, tc := range cases {
		require.Equal(t, tc.got, PickTransport(tc.want, tc.caps), "want=%v caps=%b", tc.want, tc.caps)
	}
}
