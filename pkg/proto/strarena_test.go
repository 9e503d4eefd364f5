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

// TestReadStringShort checks ReadString at every length around the 16-byte
// single-store copy, with the string last in the input (no room to load 16
// bytes) and followed by others: values are exact, survive the input being
// overwritten, and are not clobbered by the strings decoded after them.
func TestReadStringShort(t *testing.T) {
	for _, p := range protocols {
		for _, tail := range []int{0, 1, 15, 16, 40} {
			t.Run(fmt.Sprintf("%v/tail%d", p, tail), func(t *testing.T) {
				w := newBulkWriter(p)
				var want []string
				for n := range 41 {
					want = append(want, strings.Repeat(string(rune('A'+n%26)), n))
					w.WriteString(want[n])
				}
				// the last string ends the input unless tail bytes follow
				in := append(w.Bytes(), make([]byte, tail)...)
				r := newBulkReader(p, in, 1)
				var got []string
				for range want {
					s, err := r.ReadString()
					require.NoError(t, err)
					got = append(got, s)
				}
				for i := range in {
					in[i] = 0xee
				}
				require.Equal(t, want, got)
			})
		}
	}
}
