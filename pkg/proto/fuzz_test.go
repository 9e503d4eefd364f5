package proto_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// fuzzLimits keep hostile inputs cheap while leaving room for real messages.
var fuzzLimits = &proto.Limits{MaxMessageSize: 1 << 20, MaxDepth: 16, MaxStringLength: 1 << 16, MaxContainerSize: 1 << 16}

func addSeeds(f *testing.F, p proto.Protocol, message bool) {
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range 4 {
		var b []byte
		var err error
		if message {
			b, err = proto.EncodeMessage(p, nil, "seed", proto.MessageType(1+i%4), int32(i), randAll(rng))
		} else {
			b, err = proto.Marshal(p, nil, randAll(rng))
		}
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	if !message {
		for _, wl := range workloads() {
			b, err := proto.Marshal(p, nil, wl.val)
			require.NoError(f, err)
			f.Add(b)
		}
	}
}

// checkRoundTrip re-encodes a decoded value and checks the encoding is a
// fixed point, which catches decoders that accept data they misread.
func checkRoundTrip(t *testing.T, p proto.Protocol, s *AllTypes) {
	b1, err := proto.Marshal(p, nil, s)
	require.NoError(t, err)
	var s2 AllTypes
	require.NoError(t, proto.Unmarshal(p, b1, nil, &s2))
	b2, err := proto.Marshal(p, nil, &s2)
	require.NoError(t, err)
	require.Equal(t, b1, b2)
}

func fuzzMessage(t *testing.T, p proto.Protocol, data []byte) {
	d := proto.NewDecoder(fuzzLimits)
	var g Generic
	_, err := d.Begin(p, data)
	if err == nil {
		err = d.ReadBody(&g)
	}
	if err != nil {
		require.ErrorIs(t, err, proto.ErrInvalidData)
	}

	var s AllTypes
	if _, err := d.Begin(p, data); err == nil {
		if err := d.ReadBody(&s); err == nil {
			checkRoundTrip(t, p, &s)
		} else {
			require.ErrorIs(t, err, proto.ErrInvalidData)
		}
	}
}

func fuzzStruct(t *testing.T, p proto.Protocol, data []byte) {
	var g Generic
	if err := proto.Unmarshal(p, data, fuzzLimits, &g); err != nil {
		require.ErrorIs(t, err, proto.ErrInvalidData)
	}
	// The benchmark workloads' generated decoders take the whole-list
	// paths (list<i64>, list<binary>) AllTypes' hand-written ones do not.
	for _, wl := range workloads() {
		s := wl.fresh()
		if err := proto.Unmarshal(p, data, fuzzLimits, s); err != nil {
			require.ErrorIs(t, err, proto.ErrInvalidData)
			continue
		}
		b1, err := proto.Marshal(p, nil, s)
		require.NoError(t, err)
		s2 := wl.fresh()
		require.NoError(t, proto.Unmarshal(p, b1, nil, s2))
		b2, err := proto.Marshal(p, nil, s2)
		require.NoError(t, err)
		if wl.name != "YCSBMap" {
			require.Equal(t, b1, b2)
			continue
		}
		// Map order varies: compare decoded values (both decoded, so a nil
		// map in s has become an empty one in each).
		s3 := wl.fresh()
		require.NoError(t, proto.Unmarshal(p, b2, nil, s3))
		require.Equal(t, s2, s3)
	}
	var s AllTypes
	if err := proto.Unmarshal(p, data, fuzzLimits, &s); err != nil {
		require.ErrorIs(t, err, proto.ErrInvalidData)
		return
	}
	checkRoundTrip(t, p, &s)
}

func FuzzBinaryMessage(f *testing.F) {
	addSeeds(f, proto.Binary, true)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzMessage(t, proto.Binary, data) })
}

func FuzzCompactMessage(f *testing.F) {
	addSeeds(f, proto.Compact, true)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzMessage(t, proto.Compact, data) })
}

func FuzzBinaryStruct(f *testing.F) {
	addSeeds(f, proto.Binary, false)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzStruct(t, proto.Binary, data) })
}

func FuzzCompactStruct(f *testing.F) {
	addSeeds(f, proto.Compact, false)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzStruct(t, proto.Compact, data) })
}
