package proto_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// TestCopiedStringsStayPut checks the reader's string arena: short copied
// strings share chunks, so they must survive the input being overwritten,
// the reader being reset and reused many times (past chunk boundaries), and
// must never be rewritten by later decodes.
func TestCopiedStringsStayPut(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			br := proto.NewBinaryReader(nil, nil)
			cr := proto.NewCompactReader(nil, nil)
			type kept struct {
				rec  *YCSBMap
				want map[string]string
			}
			var all []kept
			input := make([]byte, 0, 4096)
			for i := range 300 { // ~100 bytes of short strings each: many chunks
				key := strings.Repeat(string(rune('a'+i%26)), i%40) // 0..39: both sides of the cut-off
				src := &YCSBMap{Key: key, Fields: map[string][]byte{}}
				want := map[string]string{"": key}
				for j := range 5 {
					k := fmt.Sprintf("f%d-%d", i, j)
					src.Fields[k] = []byte(k)
					want[k] = k
				}
				enc, err := proto.Marshal(p, input[:0], src)
				require.NoError(t, err)
				got := new(YCSBMap)
				if p == proto.Binary {
					br.Reset(enc)
					require.NoError(t, got.DecodeBinary(br))
				} else {
					cr.Reset(enc)
					require.NoError(t, got.DecodeCompact(cr))
				}
				for j := range enc { // the input buffer is reused: scribble on it
					enc[j] = 0xee
				}
				all = append(all, kept{got, want})
			}
			for _, k := range all {
				require.Equal(t, k.want[""], k.rec.Key)
				require.Len(t, k.rec.Fields, 5)
				for f, v := range k.rec.Fields {
					require.Contains(t, k.want, f)
					require.Equal(t, f, string(v))
				}
			}
		})
	}
}
