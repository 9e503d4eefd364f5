package roundtrip_test

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/basetypes/basetypes"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/containers/containers"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// apacheFixtures reads testdata/apache_py.txt: value name -> protocol -> bytes.
func apacheFixtures(t *testing.T) map[string]map[string][]byte {
	f, err := os.Open("testdata/apache_py.txt")
	require.NoError(t, err)
	defer f.Close()
	out := map[string]map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		require.Len(t, parts, 3)
		b, err := hex.DecodeString(parts[2])
		require.NoError(t, err)
		if out[parts[0]] == nil {
			out[parts[0]] = map[string][]byte{}
		}
		out[parts[0]][parts[1]] = b
	}
	require.NoError(t, sc.Err())
	return out
}

// TestApacheInterop decodes what Apache Thrift's own library wrote; for
// values whose Go encoding has no unset default fields the bytes must match
// exactly.
func TestApacheInterop(t *testing.T) {
	fx := apacheFixtures(t)
	tests := []struct {
		name      string
		want      proto.Struct
		fresh     func() proto.Struct
		sameBytes bool
	}{
		{"containers", &containers.Containers{
			Ints: []int32{1, -2, 3}, Names: []string{"a"}, Counts: map[string]int64{"x": -9},
			Items: []*containers.Item{{Name: "i", Count: 1}, {Name: "j"}}, ByID: map[int32]*containers.Item{7: {Name: "seven"}},
			Matrix: [][]int32{{1, 2}, {}, {3}}, Deep: map[string][]map[int32][]string{"k": {{1: {"p"}}, {}}},
			ByBlob: map[string]int32{"\x00\x01": 4}, Flags: []bool{true, false, true},
			MaybeItems: []*containers.Item{{Name: "m"}}, ItemMaps: []map[string]*containers.Item{{"z": {Name: "zz", Count: 26}}},
		}, func() proto.Struct { return containers.NewContainers() }, false},
		{"allbase", &basetypes.AllBase{ABool: true, AByte: -7, AnI8: 127, AnI16: -30000, AnI32: 1 << 30, AnI64: -1 << 60,
			ADouble: 3.25, AString: "héllo", ABinary: []byte{0, 1, 255}},
			func() proto.Struct { return basetypes.NewAllBase() }, false},
		{"optionalbase", &basetypes.OptionalBase{ABool: ptr(false), AnI32: ptr[int32](0), AString: ptr("")},
			func() proto.Struct { return basetypes.NewOptionalBase() }, true},
	}
	for _, tc := range tests {
		for _, c := range codecs {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				in, ok := fx[tc.name][c.name]
				require.True(t, ok)
				got := tc.fresh()
				require.NoError(t, c.decode(in, got))
				assert.Equal(t, tc.want, got)
				if tc.sameBytes {
					b, err := c.encode(tc.want)
					require.NoError(t, err)
					assert.Equal(t, in, b)
				}
			})
		}
	}
}
