package proto_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// bulkWriter and bulkReader add the whole-list methods generated code uses
// to the per-element ones they must agree with.
type bulkWriter interface {
	writer
	Bytes() []byte
	WriteI64s([]int64)
	WriteI32s([]int32)
	WriteI16s([]int16)
	WriteI8s([]int8)
	WriteDoubles([]float64)
	WriteBools([]bool)
	WriteBinaries([][]byte)
	WriteStrings([]string)
}

type bulkReader interface {
	reader
	Pos() int
	ReadI64s([]int64) error
	ReadI32s([]int32) error
	ReadI16s([]int16) error
	ReadI8s([]int8) error
	ReadDoubles([]float64) error
	ReadBools([]bool) error
	ReadBinaries([][]byte) error
	ReadStrings([]string) error
}

func newBulkWriter(p proto.Protocol) bulkWriter {
	if p == proto.Binary {
		return proto.NewBinaryWriter(nil)
	}
	return proto.NewCompactWriter(nil)
}

// newBulkReader returns a reader over data; mode 0 copies binaries, 1
// aliases them, 2 also aliases strings.
func newBulkReader(p proto.Protocol, data []byte, mode int) bulkReader {
	if p == proto.Binary {
		r := proto.NewBinaryReader(data, fuzzLimits)
		r.Alias, r.UnsafeStrings = mode > 0, mode > 1
		return r
	}
	r := proto.NewCompactReader(data, fuzzLimits)
	r.Alias, r.UnsafeStrings = mode > 0, mode > 1
	return r
}

// bulkOps ties one element type's per-element and whole-list methods.
type bulkOps[T any] struct {
	put  func(bulkWriter, T)
	puts func(bulkWriter, []T)
	get  func(bulkReader) (T, error)
	gets func(bulkReader, []T) error
}

// encode writes vs in bulk and checks the bytes equal the per-element
// encoding.
func (o bulkOps[T]) encode(t *testing.T, p proto.Protocol, vs []T) []byte {
	one, all := newBulkWriter(p), newBulkWriter(p)
	for _, v := range vs {
		o.put(one, v)
	}
	o.puts(all, vs)
	require.Equal(t, one.Bytes(), all.Bytes())
	return all.Bytes()
}

// diff decodes n elements of data both ways and checks the results agree:
// both fail, or both succeed at the same position with values that encode
// identically (so NaNs compare equal).
func (o bulkOps[T]) diff(t *testing.T, p proto.Protocol, data []byte, n, mode int) {
	r1 := newBulkReader(p, data, mode)
	one := make([]T, 0, n)
	var err1 error
	for range n {
		var v T
		if v, err1 = o.get(r1); err1 != nil {
			break
		}
		one = append(one, v)
	}
	r2 := newBulkReader(p, data, mode)
	all := make([]T, n)
	err2 := o.gets(r2, all)
	if err1 != nil {
		require.ErrorIs(t, err2, proto.ErrInvalidData, "per-element read failed with %v", err1)
		return
	}
	require.NoError(t, err2)
	require.Equal(t, r1.Pos(), r2.Pos())
	require.Equal(t, o.encode(t, p, one), o.encode(t, p, all))
}

var (
	i64Ops  = bulkOps[int64]{bulkWriter.WriteI64, bulkWriter.WriteI64s, bulkReader.ReadI64, bulkReader.ReadI64s}
	i32Ops  = bulkOps[int32]{bulkWriter.WriteI32, bulkWriter.WriteI32s, bulkReader.ReadI32, bulkReader.ReadI32s}
	i16Ops  = bulkOps[int16]{bulkWriter.WriteI16, bulkWriter.WriteI16s, bulkReader.ReadI16, bulkReader.ReadI16s}
	i8Ops   = bulkOps[int8]{bulkWriter.WriteI8, bulkWriter.WriteI8s, bulkReader.ReadI8, bulkReader.ReadI8s}
	dblOps  = bulkOps[float64]{bulkWriter.WriteDouble, bulkWriter.WriteDoubles, bulkReader.ReadDouble, bulkReader.ReadDoubles}
	boolOps = bulkOps[bool]{bulkWriter.WriteBool, bulkWriter.WriteBools, bulkReader.ReadBool, bulkReader.ReadBools}
	binOps  = bulkOps[[]byte]{bulkWriter.WriteBinary, bulkWriter.WriteBinaries, bulkReader.ReadBinary, bulkReader.ReadBinaries}
	strOps  = bulkOps[string]{bulkWriter.WriteString, bulkWriter.WriteStrings, bulkReader.ReadString, bulkReader.ReadStrings}
)

// bulkKinds runs one check per element type: roundTrip encodes, decodes
// and cuts a value list; diff is the fuzz body.
var bulkKinds = []struct {
	name      string
	roundTrip func(t *testing.T, p proto.Protocol, rng *rand.Rand)
	diff      func(t *testing.T, p proto.Protocol, data []byte, n, mode int)
}{
	{"i64", func(t *testing.T, p proto.Protocol, rng *rand.Rand) {
		vs := []int64{0, 1, -1, 63, -64, 64, math.MaxInt64, math.MinInt64, 1 << 55, -1 << 55, 1 << 56, 1 << 62, -1 << 62}
		for range 300 {
			vs = append(vs, int64(rng.Uint64()>>rng.UintN(64)))
		}
		roundTrip(t, p, i64Ops, vs)
	}, func(t *testing.T, p proto.Protocol, data []byte, n, mode int) {
		i64Ops.diff(t, p, data, n, mode)
		sameI64Error(t, p, data, n)
	}},
	{"i32", func(t *testing.T, p proto.Protocol, rng *rand.Rand) {
		vs := []int32{0, 1, -1, math.MaxInt32, math.MinInt32}
		for range 300 {
			vs = append(vs, int32(rng.Uint32()>>rng.UintN(32)))
		}
		roundTrip(t, p, i32Ops, vs)
	}, i32Ops.diff},
	{"i16", func(t *testing.T, p proto.Protocol, rng *rand.Rand) {
		vs := []int16{0, 1, -1, math.MaxInt16, math.MinInt16}
		for range 100 {
			vs = append(vs, int16(rng.Uint32()))
		}
		roundTrip(t, p, i16Ops, vs)
	}, i16Ops.diff},
	{"i8", func(t *testing.T, p proto.Protocol, rng *rand.Rand) {
		roundTrip(t, p, i8Ops, []int8{0, 1, -1, math.MaxInt8, math.MinInt8})
	}, i8Ops.diff},
	{"double", func(t *testing.T, p proto.Protocol, rng *rand.Rand) {
		roundTrip(t, p, dblOps, []float64{0, -1.5, math.Inf(1), math.MaxFloat64, math.SmallestNonzeroFloat64, rng.NormFloat64()})
	}, dblOps.diff},
	{"bool", func(t *testing.T, p proto.Protocol, rng *rand.Rand) {
		roundTrip(t, p, boolOps, []bool{true, false, false, true, rng.IntN(2) == 0})
	}, boolOps.diff},
	{"binary", func(t *testing.T, p proto.Protocol, rng *rand.Rand) {
		roundTrip(t, p, binOps, [][]byte{{}, {1}, make([]byte, 127), make([]byte, 128), make([]byte, 300)})
	}, binOps.diff},
	{"string", func(t *testing.T, p proto.Protocol, rng *rand.Rand) {
		roundTrip(t, p, strOps, []string{"", "a", string(make([]byte, 40)), string(make([]byte, 200))})
	}, strOps.diff},
}

// roundTrip checks the bulk encoding of vs decodes back in bulk and that
// every truncation of it fails both ways.
func roundTrip[T any](t *testing.T, p proto.Protocol, o bulkOps[T], vs []T) {
	data := o.encode(t, p, vs)
	for mode := range 3 {
		r := newBulkReader(p, data, mode)
		got := make([]T, len(vs))
		require.NoError(t, o.gets(r, got))
		require.Equal(t, vs, got)
		require.Equal(t, len(data), r.Pos())
	}
	for cut := range len(data) {
		o.diff(t, p, data[:cut], len(vs), 1)
		r := newBulkReader(p, data[:cut], 1)
		require.ErrorIs(t, o.gets(r, make([]T, len(vs))), proto.ErrInvalidData)
	}
}

func TestBulkLists(t *testing.T) {
	for _, p := range protocols {
		for _, k := range bulkKinds {
			t.Run(p.String()+"/"+k.name, func(t *testing.T) {
				k.roundTrip(t, p, rand.New(rand.NewPCG(3, 4)))
			})
		}
	}
}

// TestBulkBinaryCopies checks copied binaries are non-nil, independent of
// the input and capped, so appending to one cannot clobber the next.
func TestBulkBinaryCopies(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			data := binOps.encode(t, p, [][]byte{{}, []byte("ab"), []byte("cd")})
			got := make([][]byte, 3)
			require.NoError(t, newBulkReader(p, data, 0).ReadBinaries(got))
			require.NotNil(t, got[0])
			clear(data)
			_ = append(got[1], 'x')
			require.Equal(t, [][]byte{{}, []byte("ab"), []byte("cd")}, got)
		})
	}
}

// TestBulkEncodeAllocs checks the bulk writers allocate nothing once the
// buffer has room.
func TestBulkEncodeAllocs(t *testing.T) {
	i64s, strs := make([]int64, 100), []string{"abc", "def"}
	for _, p := range protocols {
		w := newBulkWriter(p)
		allocs := testing.AllocsPerRun(100, func() {
			switch w := w.(type) {
			case *proto.BinaryWriter:
				w.Reset(w.Bytes()[:0])
			case *proto.CompactWriter:
				w.Reset(w.Bytes()[:0])
			}
			w.WriteI64s(i64s)
			w.WriteStrings(strs)
		})
		require.Zero(t, allocs, p.String())
	}
}

// FuzzBulkLists checks the whole-list readers against the per-element ones
// on arbitrary input: same verdict, same position, same values.
func FuzzBulkLists(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for pi, p := range protocols {
		for ki := range bulkKinds {
			w := newBulkWriter(p)
			w.WriteI64s([]int64{1, -300, math.MinInt64, int64(rng.Uint64())})
			w.WriteStrings([]string{"x", string(make([]byte, 130))})
			f.Add(uint8(pi), uint8(ki), uint8(4), w.Bytes())
		}
	}
	// Long i64 lists reach ReadI64s' 64-byte block path, with every
	// varint length and a malformed varint inside a block.
	for pi, p := range protocols {
		w := newBulkWriter(p)
		for i := range 200 {
			w.WriteI64s([]int64{int64(rng.Uint64() >> (i % 64))})
		}
		f.Add(uint8(pi), uint8(0), uint8(200), w.Bytes())
		bad := append(bytes.Repeat([]byte{0x81, 0x01}, 20), bytes.Repeat([]byte{0xff}, 9)...)
		bad = append(bad, 0x02)
		f.Add(uint8(pi), uint8(0), uint8(60), append(bad, make([]byte, 100)...))
	}
	f.Fuzz(func(t *testing.T, pi, ki, n uint8, data []byte) {
		p := protocols[int(pi)%len(protocols)]
		k := bulkKinds[int(ki)%len(bulkKinds)]
		k.diff(t, p, data, int(n), int(ki)%3)
	})
}

// sameI64Error checks the compact ReadI64s block decoder fails with exactly
// the error (kind and offset) element-by-element ReadI64 reports.
func sameI64Error(t *testing.T, p proto.Protocol, data []byte, n int) {
	if p != proto.Compact {
		return
	}
	r1 := newBulkReader(p, data, 1)
	var err1 error
	for range n {
		if _, err1 = r1.ReadI64(); err1 != nil {
			break
		}
	}
	err2 := newBulkReader(p, data, 1).ReadI64s(make([]int64, n))
	if err1 == nil {
		require.NoError(t, err2)
		return
	}
	require.Error(t, err2)
	require.Equal(t, err1.Error(), err2.Error())
}
