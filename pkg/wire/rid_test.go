package wire

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/metadata"
)

// A header block whose one pair is a 16-byte request id reads as that id
// alone; any other block (more pairs, another key, another length, bytes
// after it) does not, and goes to the general decoder.
func TestRequestIDOnly(t *testing.T) {
	block := func(b []byte) []byte { return b[4:] } // after the length
	generated := block(AppendHeaderBlockRID(nil, nil))
	cases := []struct {
		name  string
		block []byte
		id    string // "": not a request id alone
	}{
		{"generated", generated, string(generated[len(generated)-RequestIDSize:])},
		{"own hex id", block(AppendHeaderBlock(nil, metadata.MD{metadata.RequestIDKey: "0123456789abcdef"})), "0123456789abcdef"},
		{"own 16 bytes of anything", block(AppendHeaderBlock(nil, metadata.MD{metadata.RequestIDKey: "\x00ZZ-zz \xff\x10abcdefg"})), "\x00ZZ-zz \xff\x10abcdefg"},
		{"generated with another header", block(AppendHeaderBlockRID(nil, metadata.MD{"tenant": "t1"})), ""},
		{"a shorter id", block(AppendHeaderBlock(nil, metadata.MD{metadata.RequestIDKey: "req-1"})), ""},
		{"a longer id", block(AppendHeaderBlock(nil, metadata.MD{metadata.RequestIDKey: "0123456789abcdef0"})), ""},
		{"another key of the same length", block(AppendHeaderBlock(nil, metadata.MD{"x-request-ie": "0123456789abcdef"})), ""},
		{"a byte after it", append(append([]byte(nil), generated...), 0), ""},
		{"empty", nil, ""},
		{"no headers", block(AppendHeaderBlock(nil, nil)), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, ok := RequestIDOnly(tc.block)
			require.Equal(t, tc.id != "", ok)
			require.Equal(t, tc.id, string(id))
			if ok {
				md, err := ParseKV(tc.block)
				require.NoError(t, err)
				require.Equal(t, metadata.MD{metadata.RequestIDKey: tc.id}, md, "what the general decoder reads")
			}
		})
	}
	require.Regexp(t, "^[0-9a-f]{16}$", string(generated[len(generated)-RequestIDSize:]), "a generated id is RequestIDSize bytes")
}

// Whatever RequestIDOnly accepts, the general decoder reads as the id
// alone: a server keeping only the id loses nothing.
func FuzzRequestIDOnly(f *testing.F) {
	f.Add(AppendHeaderBlockRID(nil, nil)[4:])
	f.Add(AppendHeaderBlockRID(nil, metadata.MD{"k": "v"})[4:])
	f.Add([]byte(ridBlock))
	f.Fuzz(func(t *testing.T, in []byte) {
		id, ok := RequestIDOnly(in)
		if !ok {
			return
		}
		md, err := ParseKV(in)
		if err != nil || len(md) != 1 || md[metadata.RequestIDKey] != string(id) || len(id) != RequestIDSize {
			t.Fatalf("accepted %q as id %q; the decoder reads %v, %v", in, id, md, err)
		}
	})
}
