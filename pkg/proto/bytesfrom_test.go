package proto_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// bytesFromStruct writes a string field and a map<string, binary> field.
type bytesFromStruct struct{}

func (bytesFromStruct) EncodeBinary(w *proto.BinaryWriter) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.STRING, 1)
	w.WriteString("key")
	w.WriteFieldBegin(proto.MAP, 2)
	w.WriteMapBegin(proto.STRING, proto.STRING, 1)
	w.WriteString("f")
	w.WriteBinary([]byte{0, 1, 2})
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (bytesFromStruct) EncodeCompact(*proto.CompactWriter) error { return nil }
func (bytesFromStruct) DecodeBinary(*proto.BinaryReader) error   { return nil }
func (bytesFromStruct) DecodeCompact(*proto.CompactReader) error { return nil }

// mapBytes reads the struct, keeping the map's bytes and whether the
// reader split binary values.
type mapBytes struct {
	raw   []byte
	split bool
}

func (m *mapBytes) DecodeBinary(r *proto.BinaryReader) error {
	m.split = r.SplitsBinary()
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			break
		}
		at := r.Pos()
		if err := r.Skip(t); err != nil {
			return err
		}
		if id == 2 {
			m.raw = r.BytesFrom(at)
		}
	}
	return r.ReadStructEnd()
}

func (m *mapBytes) EncodeBinary(*proto.BinaryWriter) error     { return nil }
func (m *mapBytes) EncodeCompact(*proto.CompactWriter) error   { return nil }
func (m *mapBytes) DecodeCompact(r *proto.CompactReader) error { return r.Skip(proto.STRUCT) }

// TestBytesFrom: BytesFrom is the input between an earlier Pos and now,
// aliased whatever Alias says; outside that range it is nil. A JSON
// message's reader says it splits binary values.
func TestBytesFrom(t *testing.T) {
	w := proto.NewBinaryWriter(nil)
	require.NoError(t, bytesFromStruct{}.EncodeBinary(w))
	data := w.Bytes()
	wantMap := []byte{byte(proto.STRING), byte(proto.STRING), 0, 0, 0, 1, 0, 0, 0, 1, 'f', 0, 0, 0, 3, 0, 1, 2}
	for _, alias := range []bool{false, true} {
		r := proto.NewBinaryReader(data, nil)
		r.Alias = alias
		var m mapBytes
		require.NoError(t, m.DecodeBinary(r))
		assert.Equal(t, wantMap, m.raw)
		assert.Same(t, &data[len(data)-1-len(wantMap)], &m.raw[0], "alias=%v: a sub-slice of the input", alias)
		assert.Equal(t, len(m.raw), cap(m.raw), "capped: appending to it cannot write over the input")
		assert.False(t, m.split)
		assert.Equal(t, data, r.BytesFrom(0))
		assert.Empty(t, r.BytesFrom(r.Pos()))
		assert.Nil(t, r.BytesFrom(-1))
		assert.Nil(t, r.BytesFrom(r.Pos()+1))
	}
	var c proto.JSONCodec
	js, err := c.AppendStruct(nil, bytesFromStruct{})
	require.NoError(t, err)
	var m mapBytes
	require.NoError(t, c.Unmarshal(js, nil, &m))
	assert.True(t, m.split)
}

// TestSkipStrings: Skip takes a map or list of strings in one loop with
// the checks and errors of reading each value.
func TestSkipStrings(t *testing.T) {
	be := func(v int32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	mapOf := func(n int32, entries ...[]byte) []byte {
		return cat(append([][]byte{{byte(proto.STRING), byte(proto.STRING)}, be(n)}, entries...)...)
	}
	listOf := func(n int32, entries ...[]byte) []byte {
		return cat(append([][]byte{{byte(proto.STRING)}, be(n)}, entries...)...)
	}
	str := func(s string) []byte { return cat(be(int32(len(s))), []byte(s)) }
	lim := &proto.Limits{MaxStringLength: 8, MaxContainerSize: 100, MaxDepth: 4, MaxMessageSize: 1 << 20}
	tests := []struct {
		name string
		t    proto.Type
		data []byte
		want error // nil: all of data skipped
		pos  int   // where the error is reported
	}{
		{"map", proto.MAP, mapOf(2, str("a"), str("1"), str(""), str("longer")), nil, 0},
		{"list", proto.LIST, listOf(3, str("x"), str(""), str("yz")), nil, 0},
		{"map value at the string limit", proto.MAP, mapOf(1, str("a"), str("12345678")), nil, 0},
		{"map value past the string limit", proto.MAP, mapOf(1, str("a"), str("123456789")), proto.ErrSizeLimit, 6 + 5},
		{"negative length", proto.MAP, mapOf(1, str("a"), be(-1), []byte("xxxx")), proto.ErrNegativeSize, 6 + 5},
		{"value past the input", proto.LIST, listOf(2, str("a"), be(5), []byte("abc")), proto.ErrTruncated, 5 + 5 + 4},
		{"length cut short", proto.LIST, listOf(2, str("abcde"), []byte{0, 0}), proto.ErrTruncated, 5 + 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := proto.NewBinaryReader(tt.data, lim)
			err := r.Skip(tt.t)
			if tt.want == nil {
				require.NoError(t, err)
				assert.Equal(t, len(tt.data), r.Pos())
				return
			}
			require.ErrorIs(t, err, tt.want)
			var de *proto.DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tt.pos, de.Pos)
		})
	}
}
