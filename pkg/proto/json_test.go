package proto_test

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

func apacheJSON(mb *thrift.TMemoryBuffer) *thrift.TJSONProtocol { return thrift.NewTJSONProtocol(mb) }

// apacheBytes runs write on Apache's TJSONProtocol and returns the bytes.
func apacheBytes(t *testing.T, write func(context.Context, thrift.TProtocol) error) []byte {
	t.Helper()
	ctx := context.Background()
	mb := thrift.NewTMemoryBuffer()
	p := apacheJSON(mb)
	require.NoError(t, write(ctx, p))
	require.NoError(t, p.Flush(ctx))
	return append([]byte(nil), mb.Bytes()...)
}

// apacheRead runs read on Apache's TJSONProtocol over data.
func apacheRead(data []byte, read func(context.Context, thrift.TProtocol) error) error {
	mb := thrift.NewTMemoryBuffer()
	_, _ = mb.Write(data)
	return read(context.Background(), apacheJSON(mb))
}

// validUTF8 is what a string becomes through TJSONProtocol: encoding/json
// replaces each byte of invalid UTF-8 with U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

func jsonNormalize(s *AllTypes) *AllTypes {
	s.S = validUTF8(s.S)
	s.N.S = validUTF8(s.N.S)
	for i := range s.Set {
		s.Set[i] = validUTF8(s.Set[i])
	}
	m := map[string]int64{}
	for _, k := range sortedKeys(s.M) { // keys that collide: the last one written wins
		m[validUTF8(k)] = s.M[k]
	}
	s.M = m
	for i := range s.LN {
		s.LN[i].S = validUTF8(s.LN[i].S)
	}
	return normalize(s)
}

// TestJSONAllTypes: random values of every type through generated-style
// code, bare and as messages (Apache's side of every type is in
// TestJSONCrossTrees).
func TestJSONAllTypes(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		want := randAll(rand.New(rand.NewPCG(seed, 11)))
		ours, err := proto.Marshal(proto.JSON, nil, want)
		require.NoError(t, err)
		var got AllTypes
		require.NoError(t, proto.Unmarshal(proto.JSON, ours, nil, &got), "seed %d", seed)
		norm := jsonNormalize(want)
		require.Equal(t, norm, jsonNormalize(&got), "seed %d", seed)

		msg, err := proto.EncodeMessage(proto.JSON, nil, "all<\"types\">", proto.MessageType(1+seed%4), int32(seed)-150, want)
		require.NoError(t, err)
		got = AllTypes{}
		h, err := proto.DecodeMessage(proto.JSON, msg, nil, &got)
		require.NoError(t, err)
		require.Equal(t, proto.MessageHeader{Name: "all<\"types\">", Type: proto.MessageType(1 + seed%4), SeqID: int32(seed) - 150}, h)
		require.Equal(t, norm, jsonNormalize(&got))
		h, off, err := proto.DecodeMessageHeader(proto.JSON, msg, nil)
		require.NoError(t, err)
		require.Equal(t, "all<\"types\">", h.Name)
		require.Equal(t, byte('{'), msg[off])
	}
}

// TestJSONCrossWorkloads covers the generated code's whole-list paths
// (WriteBinaries, ReadStrings, ...) and map<string,binary>.
func TestJSONCrossWorkloads(t *testing.T) {
	for _, wl := range workloads() {
		t.Run(wl.name, func(t *testing.T) {
			ours, err := proto.Marshal(proto.JSON, nil, wl.val)
			require.NoError(t, err)
			theirs := apacheBytes(t, wl.apW)
			if wl.name != "YCSBMap" { // Go map order differs run to run
				require.Equal(t, string(theirs), string(ours))
			}
			require.NoError(t, apacheRead(ours, wl.apR))
			s := wl.fresh()
			require.NoError(t, proto.Unmarshal(proto.JSON, theirs, nil, s))
			require.Equal(t, wl.val, s)
		})
	}
}

// TestJSONCrossTrees puts every type everywhere: map keys of every scalar
// type (Apache quotes numbers there), doubles NaN, ±Infinity, -0 and at
// the formatting boundaries, strings with every escape class, binary of
// every padding.
func TestJSONCrossTrees(t *testing.T) {
	for seed := uint64(0); seed < 400; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		x := &tree{v: randStruct(rng, 4)}
		ours, err := proto.Marshal(proto.JSON, nil, x)
		require.NoError(t, err)
		theirs := apacheBytes(t, x.v.apWrite)
		require.Equal(t, string(theirs), string(ours), "seed %d", seed)
		require.NoError(t, proto.Unmarshal(proto.JSON, theirs, nil, x), "seed %d: %s", seed, theirs)
		// Compared in binary: randScalar's NaN is math.NaN(), whose bits
		// survive "NaN".
		want, err := proto.Marshal(proto.Binary, nil, &tree{v: x.v})
		require.NoError(t, err)
		got, err := proto.Marshal(proto.Binary, nil, &tree{v: x.got})
		require.NoError(t, err)
		require.Equal(t, want, got, "seed %d: %s", seed, theirs)
		var ap tv
		require.NoError(t, apacheRead(ours, func(ctx context.Context, p thrift.TProtocol) (err error) {
			ap, err = x.v.apRead(ctx, p)
			return err
		}), "seed %d: %s", seed, ours)
		got, err = proto.Marshal(proto.Binary, nil, &tree{v: ap})
		require.NoError(t, err)
		require.Equal(t, want, got, "seed %d: %s", seed, ours)
	}
}

// TestJSONExactBytes pins the encoding of the details Apache's Go library
// decides, independently of it.
func TestJSONExactBytes(t *testing.T) {
	tests := []struct {
		name string
		v    tv
		want string
	}{
		{"bool", tv{t: proto.BOOL, i: 1}, `{"1":{"tf":1}}`},
		{"i8", tv{t: proto.I8, i: -128}, `{"1":{"i8":-128}}`},
		{"NaN", tv{t: proto.DOUBLE, d: math.NaN()}, `{"1":{"dbl":"NaN"}}`},
		{"-Inf", tv{t: proto.DOUBLE, d: math.Inf(-1)}, `{"1":{"dbl":"-Infinity"}}`},
		{"-0", tv{t: proto.DOUBLE, d: math.Copysign(0, -1)}, `{"1":{"dbl":-0}}`},
		{"1e21", tv{t: proto.DOUBLE, d: 1e21}, `{"1":{"dbl":1e+21}}`},
		{"string", tv{t: proto.STRING, s: []byte("<é\x00\u2028😀\xff")}, `{"1":{"str":"\u003cé\u0000\u2028😀\ufffd"}}`},
		{"binary", tv{t: proto.STRING, bin: true, s: []byte{0xfb, 0xff}}, `{"1":{"str":"+/8="}}`},
		{"uuid", tv{t: proto.UUID, u: [16]byte{0: 0xab, 15: 0x01}}, `{"1":{"uid":"ab000000-0000-0000-0000-000000000001"}}`},
		{"list", tv{t: proto.LIST, et: proto.I32, elems: []tv{{t: proto.I32, i: 1}, {t: proto.I32, i: -2}}}, `{"1":{"lst":["i32",2,1,-2]}}`},
		{"empty set", tv{t: proto.SET, et: proto.STRING}, `{"1":{"set":["str",0]}}`},
		{"map", tv{t: proto.MAP, et: proto.DOUBLE, vt: proto.BOOL, elems: []tv{{t: proto.DOUBLE, d: 0.5}, {t: proto.BOOL}, {t: proto.DOUBLE, d: math.Inf(1)}, {t: proto.BOOL, i: 1}}},
			`{"1":{"map":["dbl","tf",2,{"0.5":0,"Infinity":1}]}}`},
		{"empty map", tv{t: proto.MAP, et: proto.I64, vt: proto.STRUCT}, `{"1":{"map":["i64","rec",0,{}]}}`},
		{"struct", tv{t: proto.STRUCT, ids: []int16{-1, 32767}, elems: []tv{{t: proto.I16, i: 7}, {t: proto.STRUCT}}},
			`{"1":{"rec":{"-1":{"i16":7},"32767":{"rec":{}}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &tree{v: tv{t: proto.STRUCT, ids: []int16{1}, elems: []tv{tt.v}}}
			ours, err := proto.Marshal(proto.JSON, nil, x)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(ours))
			require.Equal(t, tt.want, string(apacheBytes(t, x.v.apWrite)))
		})
	}
	msg, err := proto.EncodeMessage(proto.JSON, nil, "ping", proto.Oneway, -1, &Generic{})
	require.NoError(t, err)
	require.Equal(t, `[1,"ping",4,-1,{}]`, string(msg))
}

// TestJSONReadsWhatOthersWrite: input Apache's other libraries write (or
// accept) that Go's writer never produces: whitespace, unquoted keys,
// unpadded base64, \u escapes and surrogate pairs, quoted numbers.
func TestJSONReadsWhatOthersWrite(t *testing.T) {
	shape := tv{t: proto.STRUCT, ids: []int16{1, 2, 3, 4, 5}, elems: []tv{
		{t: proto.STRING}, {t: proto.STRING, bin: true}, {t: proto.MAP, et: proto.I32, vt: proto.DOUBLE, elems: []tv{{t: proto.I32}, {t: proto.DOUBLE}}},
		{t: proto.BOOL}, {t: proto.I64},
	}}
	in := " { \"1\" : { \"str\" : \"\\u00e9\\ud83d\\ude00\\/\\\"\" } ,\n\"2\":{\"str\":\"QUJD RA\"}, 3:{\"map\":[\"i32\",\"dbl\",1,{\"7\":\"1.5e3\"}]},\t\"4\":{\"tf\":\"1\"},\"5\":{\"i64\":\"-9223372036854775808\"} } "
	// base64 with a space is not base64: Apache fails it too.
	x := &tree{v: shape}
	shape.elems[0].s, shape.elems[1].s = []byte{}, []byte{}
	require.ErrorIs(t, proto.Unmarshal(proto.JSON, []byte(in), nil, x), proto.ErrInvalidData)
	in = strings.Replace(in, "QUJD RA", "QUJDRA", 1)
	require.NoError(t, proto.Unmarshal(proto.JSON, []byte(in), nil, x))
	require.Equal(t, "é😀/\"", string(x.got.elems[0].s))
	require.Equal(t, "ABCD", string(x.got.elems[1].s))
	require.Equal(t, 1500.0, x.got.elems[2].elems[1].d)
	require.Equal(t, int64(1), x.got.elems[3].i)
	require.Equal(t, int64(math.MinInt64), x.got.elems[4].i)
}

// TestJSONStringQuoting: our quoting is encoding/json's, which Apache's Go
// library uses, and our unquoting inverts it.
func TestJSONStringQuoting(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 2000 {
		s := randBytes(rng, 40)
		if i%2 == 0 {
			for j := range s {
				const alphabet = "a<>&\"\\\x00\x1f\x7f\xe2\x80\xa8\xf0\x9f\x98\x80é"
				s[j] = alphabet[int(s[j])%len(alphabet)]
			}
		}
		want, err := json.Marshal(string(s))
		require.NoError(t, err)
		got := proto.AppendJSONString(nil, s)
		require.Equal(t, string(want), string(got))
		var back string
		require.NoError(t, json.Unmarshal(got, &back))
		x := &tree{v: tv{t: proto.STRUCT, ids: []int16{1}, elems: []tv{{t: proto.STRING}}}}
		require.NoError(t, proto.Unmarshal(proto.JSON, []byte(`{"1":{"str":`+string(got)+`}}`), nil, x))
		require.Equal(t, back, string(x.got.elems[0].s))
	}
}
