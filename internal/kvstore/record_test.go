package kvstore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		rec    Record
		fields []string
		want   Record
	}{
		{"empty", Record{}, nil, Record{}},
		{"one", Record{"f": []byte("v")}, nil, Record{"f": []byte("v")}},
		{"empty value", Record{"f": {}}, nil, Record{"f": {}}},
		{"ycsb", ycsbRecord("k", 10, 100), nil, ycsbRecord("k", 10, 100)},
		{"subset", Record{"a": []byte("1"), "b": []byte("2"), "c": []byte("3")}, []string{"c", "a", "zz"},
			Record{"a": []byte("1"), "c": []byte("3")}},
		{"long value", Record{"big": bytes.Repeat([]byte{0xff}, 70000)}, nil, Record{"big": bytes.Repeat([]byte{0xff}, 70000)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := EncodeRecord(tc.rec)
			assert.Equal(t, encodedSize(tc.rec), len(enc))
			assert.Equal(t, byte(recordVersion), enc[0])
			got, err := DecodeRecord(enc, tc.fields...)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, enc, EncodeRecord(tc.rec), "encoding must be deterministic")
		})
	}
}

func TestRecordDecodeErrors(t *testing.T) {
	valid := EncodeRecord(Record{"a": []byte("x"), "b": []byte("y")})
	uv := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"bad version", append([]byte{9}, valid[1:]...)},
		{"truncated", valid[:len(valid)-1]},
		{"trailing", append(append([]byte(nil), valid...), 0)},
		{"huge count", uv([]byte{1}, 1<<40)},
		{"bad count varint", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"name past end", append(uv(uv([]byte{1}, 1), 50), 'a', 0)},
		{"value past end", append(uv(uv([]byte{1}, 1), 1), 'a', 9, 'x')},
		{"duplicate", []byte{1, 2, 1, 'a', 0, 1, 'a', 0}},
		{"unsorted", []byte{1, 2, 1, 'b', 0, 1, 'a', 0}},
		{"non-minimal count", []byte{1, 0x80, 0}},
		{"non-minimal length", []byte{1, 1, 0x81, 0, 'a', 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRecord(tc.in)
			require.ErrorIs(t, err, ErrCorruptRecord)
			var re *RecordError
			require.ErrorAs(t, err, &re)
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(EncodeRecord(Record{}))
	f.Add(EncodeRecord(Record{"field0": []byte("value")}))
	f.Add(EncodeRecord(ycsbRecord("user1", 3, 8)))
	f.Add([]byte{1, 2, 1, 'a', 0, 1, 'a', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := DecodeRecord(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptRecord)
			return
		}
		// Anything accepted must be canonical: re-encoding gives the input.
		require.Equal(t, b, EncodeRecord(rec))
		sub, err := DecodeRecord(b, "field0")
		require.NoError(t, err)
		require.LessOrEqual(t, len(sub), 1)
	})
}

func TestDecodedValuesAreIndependent(t *testing.T) {
	enc := EncodeRecord(Record{"a": []byte("11"), "b": []byte("22")})
	rec, err := DecodeRecord(enc)
	require.NoError(t, err)
	rec["a"] = append(rec["a"], 'x')
	rec["a"][0] = '9'
	assert.Equal(t, []byte("22"), rec["b"])
	enc[len(enc)-1] = 'z'
	assert.Equal(t, []byte("22"), rec["b"], "decoded values must not alias the input")
}

func TestCloneRecord(t *testing.T) {
	orig := Record{"a": []byte("1"), "b": []byte("22"), "e": {}}
	c := cloneRecord(orig)
	assert.Equal(t, orig, c)
	orig["a"][0] = 'x'
	c["b"] = append(c["b"], '3')
	assert.Equal(t, []byte("1"), c["a"])
	assert.Equal(t, []byte("22"), orig["b"])
	assert.Nil(t, cloneRecord(nil))
}
