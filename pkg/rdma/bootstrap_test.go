package rdma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func sampleEndpoint() Endpoint {
	e := Endpoint{Provider: ProviderIBV, QPN: 0x1234, PSN: 0xabcdef, LID: 7, GIDIndex: 3, MTU: 4096,
		Blob: []byte{1, 2, 3}, Buffers: []RemoteBuffer{{Addr: 1 << 40, RKey: 99, Len: 4096}, {Addr: 5, RKey: 6, Len: 7}}}
	e.GID[10], e.GID[11], e.GID[15] = 0xff, 0xff, 1
	return e
}

func TestEndpointRoundTrip(t *testing.T) {
	tests := []Endpoint{
		sampleEndpoint(),
		{Provider: ProviderSHM, QPN: 1, GIDIndex: -1},
		{Provider: ProviderSHM, Blob: make([]byte, maxBlob), Buffers: make([]RemoteBuffer, maxBuffers)},
	}
	for _, e := range tests {
		b, err := e.MarshalBinary()
		require.NoError(t, err)
		got, err := DecodeEndpoint(b)
		require.NoError(t, err)
		require.Equal(t, e.Provider, got.Provider)
		require.Equal(t, e.QPN, got.QPN)
		require.Equal(t, e.GID, got.GID)
		require.Equal(t, e.GIDIndex, got.GIDIndex)
		require.Equal(t, len(e.Blob), len(got.Blob))
		require.Equal(t, len(e.Buffers), len(got.Buffers))
		if len(e.Buffers) > 0 {
			require.Equal(t, e.Buffers, got.Buffers)
		}
	}
	_, err := (&Endpoint{Provider: "x"}).MarshalBinary()
	require.ErrorIs(t, err, ErrBadBootstrap)
	_, err = (&Endpoint{Provider: ProviderSHM, Blob: make([]byte, maxBlob+1)}).MarshalBinary()
	require.ErrorIs(t, err, ErrBadBootstrap)
}

func TestDecodeEndpointErrors(t *testing.T) {
	good, err := func() ([]byte, error) { e := sampleEndpoint(); return e.MarshalBinary() }()
	require.NoError(t, err)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrBadBootstrap},
		{"short", good[:fixedLen-1], ErrBadBootstrap},
		{"magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadBootstrap},
		{"version", mut(func(b []byte) []byte { b[4] = 2; return b }), ErrBootstrapVersion},
		{"provider", mut(func(b []byte) []byte { b[5] = 9; return b }), ErrBadBootstrap},
		{"flags", mut(func(b []byte) []byte { b[6] = 1; return b }), ErrBadBootstrap},
		{"blob-too-long", mut(func(b []byte) []byte { b[44] = maxBlob + 1; return b }), ErrBadBootstrap},
		{"blob-truncated", mut(func(b []byte) []byte { b[44] = 60; return b }), ErrBadBootstrap},
		{"trailing", append(append([]byte(nil), good...), 0), ErrBadBootstrap},
		{"missing-buffer", good[:len(good)-1], ErrBadBootstrap},
		{"count", mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[48:], 0xffff); return b }), ErrBadBootstrap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEndpoint(tc.in)
			require.ErrorIs(t, err, tc.want)
		})
	}
	require.True(t, errors.Is(ErrBootstrapVersion, ErrBadBootstrap))
}

// An RPC endpoint's parameters name the engine's wire version: a peer of
// another version is refused at bootstrap, before it could misread a message.
func TestCheckDescMagic(t *testing.T) {
	tests := []struct {
		name  string
		magic uint64
		want  error // nil: accepted
		text  string
	}{
		{"this-version", descMagic, nil, ""},
		{"version-1", descMagicHREP | 1, ErrBootstrapVersion,
			fmt.Sprintf("rdma: bad bootstrap message: unsupported version: peer's engine wire version 1, this side's %d", descMagic&0xffff)},
		{"not-an-endpoint", 0x1234, ErrBadBootstrap, "rdma: bad bootstrap message: peer is not an RPC endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkDescMagic(tc.magic)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.EqualError(t, err, tc.text)
		})
	}
	require.NotErrorIs(t, checkDescMagic(0x1234), ErrBootstrapVersion)
}

func TestExchangeEndpoints(t *testing.T) {
	ctx, cancel := contextTimeout()
	defer cancel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ea, eb := sampleEndpoint(), sampleEndpoint()
	eb.QPN = 77
	got := make(chan Endpoint, 1)
	go func() {
		e, err := ExchangeEndpoints(ctx, b, eb)
		if err != nil {
			e = Endpoint{}
		}
		got <- e
	}()
	pa, err := ExchangeEndpoints(ctx, a, ea)
	require.NoError(t, err)
	require.Equal(t, uint32(77), pa.QPN)
	require.Equal(t, uint32(0x1234), (<-got).QPN)

	// An oversized length prefix is refused before allocating.
	go func() {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 1<<30)
		_, _ = b.Write(hdr[:])
		_, _ = b.Read(make([]byte, 1024))
	}()
	_, err = ExchangeEndpoints(ctx, a, ea)
	require.ErrorIs(t, err, ErrBadBootstrap)

	// A silent peer: the context deadline ends the exchange.
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	go func() { _, _ = c2.Read(make([]byte, 4096)) }()
	sctx, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	_, err = ExchangeEndpoints(sctx, c1, ea)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func FuzzDecodeEndpoint(f *testing.F) {
	e := sampleEndpoint()
	b, err := e.MarshalBinary()
	require.NoError(f, err)
	f.Add(b)
	f.Add(b[:fixedLen])
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := DecodeEndpoint(in)
		if err != nil {
			require.ErrorIs(t, err, ErrBadBootstrap)
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		out, err := e.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, in, out)
	})
}
