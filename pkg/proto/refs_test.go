package proto_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// refWriter is what both writers share for this test.
type refWriter interface {
	WriteStructBegin()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteStructEnd()
	WriteBinary(v []byte)
	WriteString(v string)
	WriteI32(v int32)
	SetRefs(refs *[]proto.Ref, min int)
	Bytes() []byte
}

// splice rebuilds the message a writer with refs describes.
func splice(buf []byte, refs []proto.Ref) []byte {
	var out []byte
	prev := 0
	for _, r := range refs {
		out = append(out, buf[prev:r.Off]...)
		out = append(out, r.Data...)
		prev = r.Off
	}
	return append(out, buf[prev:]...)
}

func TestWriteBinaryRefs(t *testing.T) {
	big := bytes.Repeat([]byte{0xab}, 300)
	huge := bytes.Repeat([]byte{0xcd}, 70000) // multi-byte compact varint length
	writers := map[string]func() refWriter{
		"binary":  func() refWriter { return proto.NewBinaryWriter([]byte("prefix")) },
		"compact": func() refWriter { return proto.NewCompactWriter([]byte("prefix")) },
	}
	tests := []struct {
		name     string
		values   [][]byte
		min      int
		wantRefs int
	}{
		{"none large enough", [][]byte{[]byte("a"), big}, 1000, 0},
		{"one", [][]byte{[]byte("a"), big, []byte("b")}, 256, 1},
		{"adjacent", [][]byte{big, huge}, 256, 2},
		{"empty value never a ref", [][]byte{{}, big}, 0, 1},
		{"all", [][]byte{big, []byte("xy"), huge, big}, 1, 4},
	}
	for wn, mk := range writers {
		for _, tt := range tests {
			t.Run(wn+"/"+tt.name, func(t *testing.T) {
				write := func(w refWriter) {
					w.WriteStructBegin()
					for i, v := range tt.values {
						w.WriteFieldBegin(proto.STRING, int16(i+1))
						w.WriteBinary(v)
						w.WriteFieldBegin(proto.I32, int16(100+i))
						w.WriteI32(int32(i))
					}
					w.WriteFieldStop()
					w.WriteStructEnd()
				}
				plain := mk()
				write(plain)
				var refs []proto.Ref
				w := mk()
				w.SetRefs(&refs, tt.min)
				write(w)
				require.Len(t, refs, tt.wantRefs)
				assert.Equal(t, len(plain.Bytes()), len(w.Bytes())+proto.RefsLen(refs))
				assert.Equal(t, plain.Bytes(), splice(w.Bytes(), refs))
				for _, r := range refs {
					assert.GreaterOrEqual(t, len(r.Data), max(tt.min, 1))
				}

				// Off again: values are copied as before.
				w.SetRefs(nil, 0)
				before := len(refs)
				w.WriteBinary(huge)
				assert.Len(t, refs, before)
				assert.True(t, bytes.HasSuffix(w.Bytes(), huge))
			})
		}
	}
}
