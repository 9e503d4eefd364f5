package proto_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// TestJSONHostile: input no Apache writer produces fails with a decode
// error, never a panic, and a declared size costs nothing before the
// bytes behind it are there.
func TestJSONHostile(t *testing.T) {
	deep := strings.Repeat(`{"1":{"rec":`, 80) + "{}" + strings.Repeat("}}", 80)
	deepList := `{"1":{"lst":` + strings.Repeat(`["lst",1,`, 80) + `["i8",0]` + strings.Repeat("]", 80) + "}}"
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", ``, proto.ErrTruncated},
		{"truncated", `{"1":{"i32":`, proto.ErrTruncated},
		{"truncated string", `{"1":{"str":"abc`, proto.ErrTruncated},
		{"not an object", `[[[[[[`, proto.ErrJSONSyntax},
		{"deep structs", deep, proto.ErrDepthLimit},
		{"deep lists", deepList, proto.ErrDepthLimit},
		{"count over the limit", `{"1":{"lst":["i32",2000000000,1]}}`, proto.ErrSizeLimit},
		{"count over the input", `{"1":{"lst":["i32",1000000,1]}}`, proto.ErrTruncated},
		{"map count over the input", `{"1":{"map":["i32","i32",99999,{}]}}`, proto.ErrTruncated},
		{"negative count", `{"1":{"set":["i32",-1]}}`, proto.ErrNegativeSize},
		{"count too small", `{"1":{"lst":["i32",1,1,2]}}`, proto.ErrJSONSyntax},
		{"bad escape", `{"1":{"str":"\x"}}`, proto.ErrJSONSyntax},
		{"short \\u escape", `{"1":{"str":"\u12"}}`, proto.ErrJSONSyntax},
		{"lone high surrogate", `{"1":{"str":"\ud800"}}`, proto.ErrJSONSyntax},
		{"high surrogate then other", `{"1":{"str":"\ud800\u0041"}}`, proto.ErrJSONSyntax},
		{"lone low surrogate", `{"1":{"str":"\udc00"}}`, proto.ErrJSONSyntax},
		{"raw control character", "{\"1\":{\"str\":\"a\nb\"}}", proto.ErrJSONSyntax},
		{"i8 out of range", `{"1":{"i8":300}}`, proto.ErrJSONSyntax},
		{"i32 fraction", `{"1":{"i32":1.5}}`, proto.ErrJSONSyntax},
		{"field id out of range", `{"40000":{"i32":1}}`, proto.ErrJSONSyntax},
		{"bad double", `{"1":{"dbl":0x10}}`, proto.ErrJSONSyntax},
		{"unknown type", `{"1":{"xyz":1}}`, proto.ErrBadType},
		{"two values in a field", `{"1":{"i32":1,"i32":2}}`, proto.ErrJSONSyntax},
		{"bad uuid", `{"1":{"uid":"00000000-0000-0000-0000-00000000000g"}}`, proto.ErrJSONSyntax},
		{"null", `{"1":{"rec":null}}`, proto.ErrJSONSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g Generic
			err := proto.Unmarshal(proto.JSON, []byte(tt.in), nil, &g)
			require.ErrorIs(t, err, tt.want)
			require.ErrorIs(t, err, proto.ErrInvalidData)
		})
	}

	lim := &proto.Limits{MaxMessageSize: 1 << 10, MaxDepth: 8, MaxStringLength: 4, MaxContainerSize: 2}
	for _, tt := range []struct{ name, in string }{
		{"text over any string's bound", `{"1":{"str":"abcdefghi"}}`}, // 8: base64 of 4 bytes
		{"container over the limit", `{"1":{"lst":["i8",3,1,2,3]}}`},
		{"message over the limit", `{"1":{"str":"` + strings.Repeat("a", 2000) + `"}}`},
	} {
		var g Generic
		require.ErrorIs(t, proto.Unmarshal(proto.JSON, []byte(tt.in), lim, &g), proto.ErrSizeLimit, tt.name)
	}
	// A string's limit is on its text, a binary value's on its bytes.
	str := &tree{v: tv{t: proto.STRUCT, ids: []int16{1}, elems: []tv{{t: proto.STRING}}}}
	bin := &tree{v: tv{t: proto.STRUCT, ids: []int16{1}, elems: []tv{{t: proto.STRING, bin: true}}}}
	require.ErrorIs(t, proto.Unmarshal(proto.JSON, []byte(`{"1":{"str":"abcde"}}`), lim, str), proto.ErrSizeLimit)
	require.ErrorIs(t, proto.Unmarshal(proto.JSON, []byte(`{"1":{"str":"QUJDREU="}}`), lim, bin), proto.ErrSizeLimit)
	require.NoError(t, proto.Unmarshal(proto.JSON, []byte(`{"1":{"str":"abcd"}}`), lim, str))
	require.NoError(t, proto.Unmarshal(proto.JSON, []byte(`{"1":{"str":"QUJDRA=="}}`), lim, bin))
	require.Equal(t, "ABCD", string(bin.got.elems[0].s))

	for _, tt := range []struct {
		name, in string
		want     error
	}{
		{"version", `[2,"x",1,0,{}]`, proto.ErrBadVersion},
		{"no body", `[1,"x",1,0]`, proto.ErrJSONSyntax},
		{"unclosed", `[1,"x",1,0,{}`, proto.ErrTruncated},
		{"negative type", `[1,"x",-1,0,{}]`, proto.ErrJSONSyntax},
	} {
		_, err := proto.NewDecoder(nil).Begin(proto.JSON, []byte(tt.in))
		require.ErrorIs(t, err, tt.want, tt.name)
		_, _, err = proto.DecodeMessageHeader(proto.JSON, []byte(tt.in), nil)
		if tt.name != "unclosed" { // the header alone is complete
			require.ErrorIs(t, err, proto.ErrInvalidData, tt.name)
		}
	}

	// A binary value's base64 is decoded when read as binary.
	x := &tree{v: tv{t: proto.STRUCT, ids: []int16{1}, elems: []tv{{t: proto.STRING, bin: true}}}}
	require.ErrorIs(t, proto.Unmarshal(proto.JSON, []byte(`{"1":{"str":"QQ=!"}}`), nil, x), proto.ErrJSONSyntax)
	for in, want := range map[string]string{`"QQ=="`: "A", `"QQ"`: "A", `"QUI="`: "AB", `"QUJD"`: "ABC", `""`: ""} {
		require.NoError(t, proto.Unmarshal(proto.JSON, []byte(`{"1":{"str":`+in+`}}`), nil, x), in)
		require.Equal(t, want, string(x.got.elems[0].s), in)
	}
}

// jsonFuzzSeeds are valid messages or structs and a few hostile ones.
func jsonFuzzSeeds(f *testing.F, message bool) {
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range 4 {
		var b []byte
		var err error
		if message {
			b, err = proto.EncodeMessage(proto.JSON, nil, "seed", proto.MessageType(1+i%4), int32(i), randAll(rng))
		} else {
			b, err = proto.Marshal(proto.JSON, nil, &tree{v: randStruct(rng, 4)})
		}
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	if !message {
		for _, wl := range workloads() {
			b, err := proto.Marshal(proto.JSON, nil, wl.val)
			require.NoError(f, err)
			f.Add(b)
		}
	}
	f.Add([]byte(`{"1":{"str":"\ud83d\ude00\u0041"},"2":{"map":["dbl","tf",1,{"NaN":1}]}}`))
	f.Add([]byte(`[1,"x",1,0,{"1":{"lst":["lst",1,["i32",2,1,2]]}}]`))
}

// jsonFixedPoint: whatever decodes re-encodes to JSON that decodes to the
// same value; one pass first normalizes (invalid UTF-8 becomes U+FFFD,
// written raw the second time).
func jsonFixedPoint(t *testing.T, s *AllTypes) {
	b1, err := proto.Marshal(proto.JSON, nil, s)
	require.NoError(t, err)
	var s2, s3 AllTypes
	require.NoError(t, proto.Unmarshal(proto.JSON, b1, nil, &s2))
	b2, err := proto.Marshal(proto.JSON, nil, &s2)
	require.NoError(t, err)
	require.NoError(t, proto.Unmarshal(proto.JSON, b2, nil, &s3))
	b3, err := proto.Marshal(proto.JSON, nil, &s3)
	require.NoError(t, err)
	require.Equal(t, string(b2), string(b3))
}

func FuzzJSONMessage(f *testing.F) {
	jsonFuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, data []byte) {
		d := proto.NewDecoder(fuzzLimits)
		var g Generic
		_, err := d.Begin(proto.JSON, data)
		if err == nil {
			err = d.ReadBody(&g)
		}
		if err != nil {
			require.ErrorIs(t, err, proto.ErrInvalidData)
		}
		if _, _, err := proto.DecodeMessageHeader(proto.JSON, data, fuzzLimits); err != nil {
			require.ErrorIs(t, err, proto.ErrInvalidData)
		}
		var s AllTypes
		if _, err := d.Begin(proto.JSON, data); err == nil {
			if err := d.ReadBody(&s); err == nil {
				jsonFixedPoint(t, &s)
			} else {
				require.ErrorIs(t, err, proto.ErrInvalidData)
			}
		}
	})
}

func FuzzJSONStruct(f *testing.F) {
	jsonFuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		var g Generic
		if err := proto.Unmarshal(proto.JSON, data, fuzzLimits, &g); err != nil {
			require.ErrorIs(t, err, proto.ErrInvalidData)
		}
		for _, wl := range workloads() {
			if err := proto.Unmarshal(proto.JSON, data, fuzzLimits, wl.fresh()); err != nil {
				require.ErrorIs(t, err, proto.ErrInvalidData)
			}
		}
		// The transcoder alone: JSON that becomes binary becomes the same
		// JSON again (strings as text: it cannot know binary values).
		bin, err := proto.JSONToBinary(data, false, fuzzLimits)
		if err != nil {
			require.ErrorIs(t, err, proto.ErrInvalidData)
			return
		}
		js, err := proto.BinaryToJSON(bin, false, fuzzLimits)
		require.NoError(t, err)
		bin2, err := proto.JSONToBinary(js, false, fuzzLimits)
		require.NoError(t, err)
		js2, err := proto.BinaryToJSON(bin2, false, fuzzLimits)
		require.NoError(t, err)
		require.Equal(t, string(js), string(js2))
	})
}

// FuzzJSONRoundTrip: binary -> JSON -> binary is the identity for valid
// input, i.e. binary our writer produces from a value whose strings are
// UTF-8 and whose NaNs are math.NaN() (TJSONProtocol, like Apache's Go
// library, has one NaN and writes U+FFFD for invalid UTF-8).
func FuzzJSONRoundTrip(f *testing.F) {
	addSeeds(f, proto.Binary, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		var s AllTypes
		if proto.Unmarshal(proto.Binary, data, fuzzLimits, &s) != nil {
			return
		}
		jsonNormalize(&s)
		for i := range s.LN {
			s.LN[i].S = validUTF8(s.LN[i].S)
		}
		canonNaNs(&s)
		bin, err := proto.Marshal(proto.Binary, nil, &s)
		require.NoError(t, err)
		js, err := proto.Marshal(proto.JSON, nil, &s)
		require.NoError(t, err)
		var back AllTypes
		require.NoError(t, proto.Unmarshal(proto.JSON, js, nil, &back))
		again, err := proto.Marshal(proto.Binary, nil, &back)
		require.NoError(t, err)
		require.Equal(t, bin, again)
		// The bare transcoders on it (Bin, binary but base64 only with
		// the writer's refs, made UTF-8 to travel as text):
		s.Bin = []byte(validUTF8(string(s.Bin)))
		for k, l := range s.MB {
			for i := range l {
				l[i] = []byte(validUTF8(string(l[i])))
			}
			s.MB[k] = l
		}
		bin, err = proto.Marshal(proto.Binary, nil, &s)
		require.NoError(t, err)
		js, err = proto.BinaryToJSON(bin, false, nil)
		require.NoError(t, err)
		again, err = proto.JSONToBinary(js, false, nil)
		require.NoError(t, err)
		require.Equal(t, bin, again)
	})
}

func canonNaNs(s *AllTypes) {
	if math.IsNaN(s.D) {
		s.D = math.NaN()
	}
	for i, d := range s.LD {
		if math.IsNaN(d) {
			s.LD[i] = math.NaN()
		}
	}
}
