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
		// Anything accepted must be canonical: re-encoding in the input's
		// layout gives the input.
		require.Equal(t, b, encodeAs(b[0], rec))
		sub, err := DecodeRecord(b, "field0")
		require.NoError(t, err)
		require.LessOrEqual(t, len(sub), 1)
	})
}

// encodeAs encodes r in the layout of the given version byte: format 1's
// (uvarint lengths, which stores from before migration hold) or the
// current wire form.
func encodeAs(version byte, r Record) []byte {
	if version != recordV1 {
		return EncodeRecord(r)
	}
	dst := []byte{recordV1}
	names := sortedNames(r)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, name := range names {
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		dst = binary.AppendUvarint(dst, uint64(len(r[name])))
		dst = append(dst, r[name]...)
	}
	return dst
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

func TestRecordLayouts(t *testing.T) {
	rec := Record{"b": []byte("22"), "a": []byte("1"), "e": {}}
	v1 := encodeAs(recordV1, rec)
	v2 := EncodeRecord(rec)
	assert.Equal(t, []byte{2, 11, 11, 0, 0, 0, 3,
		0, 0, 0, 1, 'a', 0, 0, 0, 1, '1',
		0, 0, 0, 1, 'b', 0, 0, 0, 2, '2', '2',
		0, 0, 0, 1, 'e', 0, 0, 0, 0}, v2, "a Thrift binary map<string, binary> after the version byte")
	for _, in := range [][]byte{v1, v2} {
		got, err := DecodeRecord(in)
		require.NoError(t, err)
		assert.Equal(t, rec, got)
		for _, fields := range [][]string{nil, {"b"}, {"e", "zz", "a"}, {"zz"}} {
			w, err := AppendWire([]byte("prefix"), in, fields)
			require.NoError(t, err)
			assert.Equal(t, appendWire([]byte("prefix"), rec, fields), w, "layout %d fields %v", in[0], fields)
			n := 0
			require.NoError(t, WireFields(w[len("prefix"):], func(name, val []byte) {
				assert.Equal(t, rec[string(name)], val)
				n++
			}))
			assert.Equal(t, WireCount(w[len("prefix"):]), n)
		}
	}
}

func TestWireDecodeErrors(t *testing.T) {
	valid := EncodeRecord(Record{"a": []byte("x"), "b": []byte("y")})
	be := func(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
	hdr := func(n uint32) []byte { return be([]byte{2, 11, 11}, n) }
	// wire builds a record of count n from name, value pairs.
	wire := func(n uint32, kv ...string) []byte {
		b := hdr(n)
		for _, s := range kv {
			b = append(be(b, uint32(len(s))), s...)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
	}{
		{"short header", []byte{2, 11, 11, 0}},
		{"key type", append([]byte{2, 8, 11}, valid[3:]...)},
		{"value type", append([]byte{2, 11, 12}, valid[3:]...)},
		{"huge count", hdr(1 << 30)},
		{"truncated", valid[:len(valid)-1]},
		{"trailing", append(append([]byte(nil), valid...), 0)},
		{"name past end", append(be(hdr(1), 50), 'a')},
		{"value past end", append(be(wire(1, "a"), 9), 'x')},
		{"short length", append(wire(1, "a"), 0, 0)},
		{"duplicate", wire(2, "a", "", "a", "")},
		{"unsorted", wire(2, "b", "", "a", "")},
		{"count too small", wire(1, "a", "", "b", "")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRecord(tc.in)
			require.ErrorIs(t, err, ErrCorruptRecord)
			// A whole record is copied before it is checked: a bad one
			// must still leave dst as it was.
			whole, err := AppendWire([]byte("x"), tc.in, nil)
			require.ErrorIs(t, err, ErrCorruptRecord)
			assert.Equal(t, []byte("x"), whole, "nothing appended on error")
			out, err := AppendWire([]byte("x"), tc.in, []string{"a"})
			require.ErrorIs(t, err, ErrCorruptRecord)
			assert.Equal(t, []byte("x"), out, "nothing appended on error")
		})
	}
}

// FuzzAppendWire: AppendWire accepts exactly what DecodeRecord accepts,
// and its output is the record DecodeRecord reads.
func FuzzAppendWire(f *testing.F) {
	f.Add(EncodeRecord(Record{}), "")
	f.Add(EncodeRecord(Record{"field0": []byte("value"), "f1": nil}), "field0")
	f.Add(encodeAs(recordV1, ycsbRecord("user1", 3, 8)), "field1")
	f.Fuzz(func(t *testing.T, b []byte, field string) {
		var fields []string
		if field != "" {
			fields = []string{field}
		}
		rec, derr := DecodeRecord(b, fields...)
		w, werr := AppendWire(nil, b, fields)
		if derr != nil {
			require.ErrorIs(t, werr, ErrCorruptRecord)
			return
		}
		require.NoError(t, werr)
		got, err := DecodeRecord(append([]byte{recordVersion}, w...))
		require.NoError(t, err)
		require.Equal(t, rec, got)
	})
}
