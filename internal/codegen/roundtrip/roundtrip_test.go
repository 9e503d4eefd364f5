// Package roundtrip_test encodes values of the golden generated packages
// with both protocols and decodes them back. It lives apart from
// internal/codegen so that a stale golden package never stops
// `go test ./internal/codegen -update` from compiling.
package roundtrip_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/basetypes/basetypes"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/containers/containers"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/enums/enums"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/exceptions/exceptions"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/fields/fields"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/includes/app/core"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/includes/base/shared"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/includes/plain"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/includes/star/ns"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/mapkeys/mapkeys"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/typedefs/typedefs"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/unions/unions"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

func ptr[T any](v T) *T { return &v }

type codec struct {
	name   string
	encode func(proto.Struct) ([]byte, error)
	decode func([]byte, proto.Struct) error
}

var codecs = []codec{
	{"binary",
		func(s proto.Struct) ([]byte, error) {
			w := proto.NewBinaryWriter(nil)
			err := s.EncodeBinary(w)
			return w.Bytes(), err
		},
		func(b []byte, s proto.Struct) error { return s.DecodeBinary(proto.NewBinaryReader(b, nil)) }},
	{"compact",
		func(s proto.Struct) ([]byte, error) {
			w := proto.NewCompactWriter(nil)
			err := s.EncodeCompact(w)
			return w.Bytes(), err
		},
		func(b []byte, s proto.Struct) error { return s.DecodeCompact(proto.NewCompactReader(b, nil)) }},
}

var uuid = [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		name  string
		in    proto.Struct
		fresh func() proto.Struct
	}{
		{"all base", &basetypes.AllBase{ABool: true, AByte: -7, AnI8: 127, AnI16: -30000, AnI32: 1 << 30, AnI64: -1 << 60,
			ADouble: 3.25, AString: "héllo", ABinary: []byte{0, 1, 255}, AUUID: uuid},
			func() proto.Struct { return basetypes.NewAllBase() }},
		{"optional base set", &basetypes.OptionalBase{ABool: ptr(false), AByte: ptr[int8](1), AnI16: ptr[int16](2), AnI32: ptr[int32](0),
			AnI64: ptr[int64](4), ADouble: ptr(0.0), AString: ptr(""), ABinary: []byte{}, AUUID: ptr(uuid)},
			func() proto.Struct { return basetypes.NewOptionalBase() }},
		{"optional base unset", &basetypes.OptionalBase{}, func() proto.Struct { return basetypes.NewOptionalBase() }},
		{"containers", &containers.Containers{
			Ints: []int32{1, -2, 3}, Names: []string{"a", "b"}, Counts: map[string]int64{"x": 1, "y": -9},
			Items: []*containers.Item{{Name: "i", Count: 1}, {Name: "j"}}, ItemSet: []*containers.Item{{Count: 5}},
			ByID: map[int32]*containers.Item{7: {Name: "seven"}}, Matrix: [][]int32{{1, 2}, {}, {3}},
			Deep:  map[string][]map[int32][]string{"k": {{1: {"p", "q"}}, {}}},
			Blobs: [][]byte{{1}, {2, 3}}, ByBlob: map[string]int32{"\x00\x01": 4}, Flags: []bool{true, false, true},
			ByDouble: map[float64][16]byte{1.5: uuid}, MaybeItems: []*containers.Item{{Name: "m"}},
			ItemMaps: []map[string]*containers.Item{{"z": {Name: "zz", Count: 26}}},
		}, func() proto.Struct { return containers.NewContainers() }},
		{"typedefs", &typedefs.Uses{User: 1, Owner: 2, Kind: typedefs.KindAlias(typedefs.Kind_B), Blob: typedefs.Blob("b"),
			Owners: typedefs.Owners{3, 4}, Blobs: typedefs.BlobsByUser{5: typedefs.Blob("five")},
			Where: &typedefs.Pt2{X: 1, Y: 2}, Path: typedefs.Path{{X: 3}, {Y: 4}}, MaybeOwner: ptr[typedefs.OwnerId](9),
			Points: map[typedefs.AccountId]*typedefs.Pt{6: {X: 6}}},
			func() proto.Struct { return typedefs.NewUses() }},
		{"enums", &enums.Palette{Primary: enums.Color_BLACK, Secondary: ptr(enums.Color_RED), All: []enums.Color{enums.Color_BLUE},
			Names: map[enums.Color]string{enums.Color_GREEN: "g"}, Tertiary: enums.Color_RED},
			func() proto.Struct { return enums.NewPalette() }},
		{"union int", &unions.Value{IntValue: ptr[int32](5)}, func() proto.Struct { return unions.NewValue() }},
		{"union struct", &unions.Holder{Value: &unions.Value{Inner: &unions.Inner{S: "in"}}, Maybe: &unions.Value{ListValue: []int64{1}}},
			func() proto.Struct { return unions.NewHolder() }},
		{"union empty", &unions.Value{}, func() proto.Struct { return unions.NewValue() }},
		{"exception", &exceptions.Invalid{Reason: "bad", Fields: []string{"a"}}, func() proto.Struct { return exceptions.NewInvalid() }},
		{"map keys", &mapkeys.Keys{
			ByList:   []mapkeys.MapEntry[[]int32, string]{{Key: []int32{1, 2}, Value: "a"}, {Key: []int32{1, 2}, Value: "dup"}},
			BySet:    []mapkeys.MapEntry[[]string, int32]{{Key: []string{"s"}, Value: 1}},
			ByMap:    []mapkeys.MapEntry[map[int32]int32, bool]{{Key: map[int32]int32{1: 1}, Value: true}},
			ByStruct: []mapkeys.MapEntry[*mapkeys.Key, *mapkeys.Key]{{Key: &mapkeys.Key{A: 1}, Value: &mapkeys.Key{B: "v"}}},
			Nested: [][]mapkeys.MapEntry[mapkeys.IntList, []mapkeys.MapEntry[*mapkeys.Key, int32]]{{
				{Key: mapkeys.IntList{9}, Value: []mapkeys.MapEntry[*mapkeys.Key, int32]{{Key: &mapkeys.Key{A: 2}, Value: 3}}}}},
			Maybe: []mapkeys.MapEntry[*mapkeys.Key, string]{{Key: &mapkeys.Key{}, Value: ""}},
		}, func() proto.Struct { return mapkeys.NewKeys() }},
		{"includes", &core.Main{S: &shared.SharedStruct{Key: 1, Value: "v"}, Mode: shared.Mode_ON, Items: shared.SharedList{{Key: 2}},
			Plain: &plain.PlainThing{N: 3}, Star: &ns.StarThing{N: 4}, ByMode: map[shared.Mode]*shared.SharedStruct{shared.Mode_OFF: {Value: "off"}}},
			func() proto.Struct { return core.NewMain() }},
		{"required and defaults", &fields.Fields{ReqInt: 1, OptInt: ptr[int32](2), OptDef: 8, DefInt: 9, ReqStr: "r", DefStr: "d",
			ReqSub: &fields.Sub{V: 1}, DefSub: &fields.Sub{}, OptList: []int32{1}, OptListDef: &[]int32{5}, ListDef: []int32{},
			ReqList: []string{"x"}, SubDef: &fields.Sub{V: 4}, Ratio: 0.25, On: true, MaybeOn: true, ZeroDef: 3},
			func() proto.Struct { return fields.NewFields() }},
	}
	for _, tc := range cases {
		for _, c := range codecs {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				b, err := c.encode(tc.in)
				require.NoError(t, err)
				out := tc.fresh()
				require.NoError(t, c.decode(b, out))
				assert.Equal(t, tc.in, out)
			})
		}
	}
}

func TestDefaultsAndAccessors(t *testing.T) {
	f := fields.NewFields()
	assert.Equal(t, int32(7), f.OptDef)
	assert.Equal(t, int32(9), f.DefInt)
	assert.Equal(t, "x", f.DefStr)
	assert.Equal(t, []int32{3}, f.ListDef)
	assert.True(t, f.On)
	assert.False(t, f.IsSetOptInt())
	assert.Equal(t, int32(0), f.GetOptInt())
	assert.False(t, f.IsSetOptDef(), "an optional field holding its default is unset, as in Apache")
	assert.Equal(t, []int32{1, 2}, f.GetOptListDef())
	assert.Equal(t, int32(4), f.GetSubDef().V)
	f.OptInt = ptr[int32](5)
	assert.True(t, f.IsSetOptInt())
	assert.Equal(t, int32(5), f.GetOptInt())

	p := enums.NewPalette()
	assert.Equal(t, enums.Color_GREEN, p.Primary)
	assert.Equal(t, "GREEN", p.Primary.String())
	c, err := enums.ColorFromString("BLUE")
	require.NoError(t, err)
	assert.Equal(t, enums.Color(6), c)
	_, err = enums.ColorFromString("PINK")
	assert.Error(t, err)
	assert.Equal(t, enums.Color_BLUE, p.GetTertiary())
}

func TestRequiredFields(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			// A nil required struct cannot be encoded.
			_, err := c.encode(&fields.Fields{ReqList: []string{}})
			var rf *proto.RequiredFieldErr
			require.ErrorAs(t, err, &rf)
			assert.Equal(t, "req_sub", rf.Field)

			// Decoding input without the required field fails.
			b, err := c.encode(&exceptions.Empty{})
			require.NoError(t, err)
			err = c.decode(b, exceptions.NewInvalid())
			require.ErrorIs(t, err, proto.ErrInvalidData)
			require.ErrorAs(t, err, &rf)
			assert.Equal(t, "Invalid", rf.Struct)
			assert.Equal(t, "reason", rf.Field)
		})
	}
}

func TestUnionAtMostOneField(t *testing.T) {
	for _, c := range codecs {
		_, err := c.encode(&unions.Value{IntValue: ptr[int32](1), StringValue: ptr("two")})
		require.ErrorIs(t, err, proto.ErrInvalidData, c.name)
		assert.Equal(t, 2, (&unions.Value{IntValue: ptr[int32](1), Raw: []byte{}}).CountSetFieldsValue())
	}
}

func TestSkipsUnknownAndMistypedFields(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			// Containers' field ids 1..14 overlap AllBase's 1..10 with other
			// wire types: every one is skipped, nothing fails.
			b, err := c.encode(&containers.Containers{Ints: []int32{1}, Names: []string{"n"}, Counts: map[string]int64{"c": 1},
				Deep: map[string][]map[int32][]string{"d": {{1: {"x"}}}}, Flags: []bool{true}})
			require.NoError(t, err)
			out := basetypes.NewAllBase()
			require.NoError(t, c.decode(b, out))
			assert.Equal(t, basetypes.NewAllBase(), out)

			// A struct with more fields decodes into one with fewer.
			b, err = c.encode(&basetypes.AllBase{AString: "s", AnI32: 3})
			require.NoError(t, err)
			small := &containers.Item{}
			require.NoError(t, c.decode(b, small))
			assert.Equal(t, &containers.Item{}, small)
		})
	}
}

func TestExceptionsAreErrors(t *testing.T) {
	var err error = &exceptions.NotFound{Message: "gone", ID: 4}
	var nf *exceptions.NotFound
	require.True(t, errors.As(err, &nf))
	assert.Contains(t, err.Error(), "gone")
}

func TestTruncatedInputFails(t *testing.T) {
	for _, c := range codecs {
		b, err := c.encode(&containers.Containers{Names: []string{"abcdef"}, Ints: []int32{1, 2, 3}})
		require.NoError(t, err)
		for cut := 0; cut < len(b)-1; cut++ {
			err := c.decode(b[:cut], containers.NewContainers())
			require.ErrorIs(t, err, proto.ErrInvalidData, "%s cut at %d", c.name, cut)
		}
	}
}

// TestDecodeMutatedInput flips bytes of valid encodings: decoding must
// either succeed or fail with ErrInvalidData, never panic.
func TestDecodeMutatedInput(t *testing.T) {
	inputs := []struct {
		in    proto.Struct
		fresh func() proto.Struct
	}{
		{&containers.Containers{Ints: []int32{1, 2}, Counts: map[string]int64{"a": 1}, Items: []*containers.Item{{Name: "x"}},
			Deep: map[string][]map[int32][]string{"k": {{1: {"v"}}}}, Flags: []bool{true}},
			func() proto.Struct { return containers.NewContainers() }},
		{&mapkeys.Keys{ByStruct: []mapkeys.MapEntry[*mapkeys.Key, *mapkeys.Key]{{Key: &mapkeys.Key{A: 1}, Value: &mapkeys.Key{B: "b"}}},
			ByList: []mapkeys.MapEntry[[]int32, string]{{Key: []int32{4}, Value: "v"}}},
			func() proto.Struct { return mapkeys.NewKeys() }},
	}
	for _, c := range codecs {
		for _, in := range inputs {
			b, err := c.encode(in.in)
			require.NoError(t, err)
			for i := range b {
				for _, x := range []byte{0x01, 0x80, 0xff} {
					m := append([]byte(nil), b...)
					m[i] ^= x
					require.NotPanics(t, func() {
						if err := c.decode(m, in.fresh()); err != nil {
							require.ErrorIs(t, err, proto.ErrInvalidData, "%s byte %d ^ %#x", c.name, i, x)
						}
					})
				}
			}
		}
	}
}
