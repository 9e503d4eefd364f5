package transport

import (
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// TestRowsRoundTrip: every row's spellings lead back to the row.
func TestRowsRoundTrip(t *testing.T) {
	require.Equal(t, hints.TransportTCP, Transports[TCP].Hint, "row 0 is TCP")
	seenCaps := uint64(0)
	for i := range Transports {
		tr := &Transports[i]
		h, err := hints.ParseTransport(tr.Name())
		require.NoError(t, err, tr.Name())
		assert.Equal(t, tr.Hint, h)
		idx, ok := Index(tr.Hint)
		require.True(t, ok, tr.Name())
		assert.Equal(t, i, idx)
		assert.Same(t, tr, Of(tr.Hint))
		if !tr.Lanes() {
			assert.Zero(t, tr.Cap, "%s: no lanes, no capability bit", tr.Name())
			assert.Equal(t, "", ProviderFor(tr.Hint))
			continue
		}
		assert.Equal(t, 1, bits.OnesCount64(tr.Cap), "%s: one capability bit", tr.Name())
		assert.Zero(t, seenCaps&tr.Cap, "%s: capability bit taken twice", tr.Name())
		assert.Zero(t, tr.Cap&(wire.CapFraming|wire.CapAttach|wire.CapHeaders), "%s: not a transport bit", tr.Name())
		seenCaps |= tr.Cap
		assert.Equal(t, tr.Hint, Pick(hints.TransportAuto, tr.Cap))
		assert.Equal(t, tr.Hint, Pick(tr.Hint, LaneCaps()))
		assert.True(t, Granted(tr.Hint, tr.Cap))
		assert.False(t, Granted(tr.Hint, LaneCaps()&^tr.Cap))
		p := ProviderByName(tr.Provider)
		require.NotNil(t, p, "%s: provider %q is registered", tr.Name(), tr.Provider)
		assert.Equal(t, tr.Hint, p.Transport)
		assert.Equal(t, tr.Provider, ProviderFor(tr.Hint))
		assert.Equal(t, tr.Cap, Offer(tr.Provider))
	}
	assert.Equal(t, seenCaps, LaneCaps())
	assert.Equal(t, wire.CapSHM, SameHostCaps())
	_, ok := Index(hints.TransportAuto)
	assert.False(t, ok, "auto is no row")
	assert.Nil(t, Of(hints.Transport(99)))
}

func TestProvidersRoundTrip(t *testing.T) {
	ids := map[byte]bool{}
	for i := range Providers {
		p := &Providers[i]
		assert.NotZero(t, p.ID, p.Name)
		assert.False(t, ids[p.ID], "%s: bootstrap id taken twice", p.Name)
		ids[p.ID] = true
		assert.Same(t, p, ProviderByName(p.Name))
		assert.Same(t, p, ProviderByID(p.ID))
		assert.Equal(t, p.Transport, OfProvider(p.Name))
		got, err := ParseProvider(p.Name)
		require.NoError(t, err)
		assert.Equal(t, p.Name, got)
		assert.True(t, Lanes(p.Transport), "%s carries a lane transport", p.Name)
	}
	assert.Nil(t, ProviderByID(0))
	assert.Nil(t, ProviderByName("verbs"))
	assert.Equal(t, hints.TransportAuto, OfProvider("verbs"))
}

func TestParseProvider(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""}, {"off", ""}, {"auto", "auto"}, {"shm", "shm"}, {"ibv", "ibv"},
	} {
		got, err := ParseProvider(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	for _, in := range []string{"OFF", "rdma", "tcp", " shm"} {
		_, err := ParseProvider(in)
		require.ErrorIs(t, err, ErrBadProvider, in)
	}
	_, err := ParseProvider("verbs")
	assert.EqualError(t, err, `unknown rdma provider "verbs" (want off, auto, ibv or shm)`)
}

func TestOffer(t *testing.T) {
	assert.Zero(t, Offer("off"))
	assert.Zero(t, Offer(""))
	assert.Equal(t, wire.CapSHM, Offer("shm"))
	assert.Equal(t, wire.CapRDMA, Offer("ibv"))
	assert.Equal(t, wire.CapSHM|wire.CapRDMA, Offer("auto"))
}

// TestPick is the hybrid-transport rule, case by case.
func TestPick(t *testing.T) {
	all := wire.CapFraming | wire.CapRDMA | wire.CapSHM
	for _, c := range []struct {
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
	} {
		assert.Equal(t, c.got, Pick(c.want, c.caps), "want=%v caps=%b", c.want, c.caps)
	}
}

func TestLanes(t *testing.T) {
	assert.True(t, Lanes(hints.TransportSHM))
	assert.True(t, Lanes(hints.TransportRDMA))
	assert.False(t, Lanes(hints.TransportTCP))
	assert.False(t, Lanes(hints.TransportAuto))
	assert.Equal(t, ProviderAuto, ProviderFor(hints.TransportAuto))
}
