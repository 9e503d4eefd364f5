package hatkv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// encodeBatch encodes m in protocol p with the generated encoder.
func encodeBatch(t testing.TB, p proto.Protocol, m proto.Struct) []byte {
	t.Helper()
	if p == proto.Compact {
		w := proto.NewCompactWriter(nil)
		require.NoError(t, m.EncodeCompact(w))
		return w.Bytes()
	}
	w := proto.NewBinaryWriter(nil)
	require.NoError(t, m.EncodeBinary(w))
	return w.Bytes()
}

// decodeWith decodes data in protocol p into s, the input aliased or not.
func decodeWith(p proto.Protocol, data []byte, alias bool, s proto.Struct) error {
	if p == proto.Compact {
		r := proto.NewCompactReader(data, nil)
		r.Alias = alias
		return s.DecodeCompact(r)
	}
	r := proto.NewBinaryReader(data, nil)
	r.Alias = alias
	return s.DecodeBinary(r)
}

// recordsOf is what a WireBatch holds as the generated type: an absent or
// empty map reads as an empty Record either way.
func recordsOf(b *WireBatch) []*hatkv.KeyRecord {
	out := []*hatkv.KeyRecord{}
	for _, r := range b.Records {
		out = append(out, &hatkv.KeyRecord{Key: r.Key, Record: r.Record()})
	}
	return out
}

func normalize(recs []*hatkv.KeyRecord) []*hatkv.KeyRecord {
	out := []*hatkv.KeyRecord{}
	for _, r := range recs {
		rec := r.Record
		if rec == nil {
			rec = hatkv.Record{}
		}
		out = append(out, &hatkv.KeyRecord{Key: r.Key, Record: rec})
	}
	return out
}

// wideRecord is a record of n fields of size bytes.
func wideRecord(n, size int) hatkv.Record {
	rec := hatkv.Record{}
	for i := range n {
		rec[fmt.Sprintf("field%d", i)] = bytes.Repeat([]byte{byte('a' + i%26)}, size)
	}
	return rec
}

// TestWireBatchMatchesGenerated: a WireBatch holds what the generated
// ScanBatch decoder reads, in both protocols, aliasing the input or not,
// one batch reused across messages.
func TestWireBatchMatchesGenerated(t *testing.T) {
	big := &hatkv.ScanBatch{}
	for i := range 60 {
		big.Records = append(big.Records, &hatkv.KeyRecord{Key: fmt.Sprintf("user%08d", i), Record: wideRecord(10, 100)})
	}
	tests := []struct {
		name string
		m    *hatkv.ScanBatch
	}{
		{"no records", &hatkv.ScanBatch{}},
		{"empty list", &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{}}},
		{"one record", &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "k", Record: hatkv.Record{"f": []byte("v")}}}}},
		{"record without a map", &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "k"}, {Key: "l", Record: hatkv.Record{"x": []byte("y")}}}}},
		{"empty key, empty values", &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "", Record: hatkv.Record{"": {}, "z": {0, 1, 0}}}}}},
		{"binary values", &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "b", Record: hatkv.Record{"f": {0xff, 0, 0x0b, 0x0b}}}}}},
		{"60 YCSB records (a large message)", big},
	}
	var b WireBatch // reused: each decode replaces what the last left
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, alias := range []bool{false, true} {
			for _, tt := range tests {
				t.Run(fmt.Sprintf("%v/alias=%v/%s", p, alias, tt.name), func(t *testing.T) {
					data := encodeBatch(t, p, tt.m)
					var want hatkv.ScanBatch
					require.NoError(t, decodeWith(p, data, false, &want))
					require.NoError(t, decodeWith(p, data, alias, &b))
					assert.Equal(t, normalize(want.Records), recordsOf(&b))
					for i, r := range b.Records {
						assert.Equal(t, len(tt.m.Records[i].Record), r.Len(), "record %d", i)
						for name, val := range tt.m.Records[i].Record {
							got, ok := r.Field(name)
							assert.True(t, ok, "field %q", name)
							assert.Equal(t, val, got, "field %q", name)
						}
						_, ok := r.Field("no such field")
						assert.False(t, ok)
					}
					// Encoding it again gives the generated decoder the same batch.
					var again hatkv.ScanBatch
					require.NoError(t, decodeWith(p, encodeBatch(t, p, &b), false, &again))
					assert.Equal(t, normalize(want.Records), normalize(again.Records))
				})
			}
		}
	}
}

// TestWireBatchJSON: a JSON message's binary values are base64 text, so
// its maps are read entry by entry (no raw bytes to keep).
func TestWireBatchJSON(t *testing.T) {
	m := &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "k", Record: hatkv.Record{"f": {0, 1, 2}, "g": []byte("text")}}, {Key: "l"}}}
	var c proto.JSONCodec
	data, err := c.AppendStruct(nil, m)
	require.NoError(t, err)
	var b WireBatch
	require.NoError(t, c.Unmarshal(data, nil, &b))
	assert.Equal(t, normalize(m.Records), recordsOf(&b))
	out, err := c.AppendStruct(nil, &b)
	require.NoError(t, err)
	var again hatkv.ScanBatch
	require.NoError(t, c.Unmarshal(out, nil, &again))
	assert.Equal(t, normalize(m.Records), normalize(again.Records))
}

// TestWireBatchAliases: a record of an aliased input is the input's bytes
// (no copy); of a copied one, the batch's own.
func TestWireBatchAliases(t *testing.T) {
	data := encodeBatch(t, proto.Binary, &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "k", Record: hatkv.Record{"f": []byte("value")}}}})
	for _, alias := range []bool{true, false} {
		var b WireBatch
		require.NoError(t, decodeWith(proto.Binary, data, alias, &b))
		require.Len(t, b.Records, 1)
		w := b.Records[0].Wire
		in := bytes.Index(data, w)
		require.GreaterOrEqual(t, in, 0)
		assert.Equal(t, alias, &data[in] == &w[0], "alias=%v", alias)
	}
}

// TestWireBatchBadInput: what the generated decoder refuses, a WireBatch
// refuses with the same kind of error.
func TestWireBatchBadInput(t *testing.T) {
	good := encodeBatch(t, proto.Binary, &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "k", Record: hatkv.Record{"f": []byte("v")}}}})
	mapAt := bytes.Index(good, []byte{byte(proto.STRING), byte(proto.STRING), 0, 0, 0, 1})
	require.Greater(t, mapAt, 0)
	with := func(at int, b ...byte) []byte {
		out := bytes.Clone(good)
		copy(out[at:], b)
		return out
	}
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"truncated", good[:len(good)-3], proto.ErrTruncated},
		{"list of i32", with(1+2, byte(proto.I32)), proto.ErrBadType},
		{"map of i32 to string", with(mapAt, byte(proto.I32)), proto.ErrBadType},
		{"field value longer than the message", with(mapAt+6+4+1, 0, 0, 0, 0x7f), proto.ErrTruncated},
		{"negative record count", with(1+2+1, 0xff, 0xff, 0xff, 0xff), proto.ErrNegativeSize},
		{"map count past the data", with(mapAt+2, 0, 0, 1, 0), proto.ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gen hatkv.ScanBatch
			require.ErrorIs(t, decodeWith(proto.Binary, tt.data, true, &gen), tt.want, "the generated decoder")
			var b WireBatch
			require.ErrorIs(t, decodeWith(proto.Binary, tt.data, true, &b), tt.want)
			require.ErrorIs(t, decodeWith(proto.Binary, tt.data, false, &b), tt.want)
		})
	}
}

// TestWireRecordByHand: a WireRecord whose bytes do not hold up (built by
// hand, not decoded) yields the fields that fit and no more.
func TestWireRecordByHand(t *testing.T) {
	w := appendChunk(appendChunk(appendMapBegin(nil, 3), "a"), "1")
	w = binary.BigEndian.AppendUint32(w, 99) // a name longer than the rest
	r := WireRecord{Key: "k", Wire: w}
	assert.Equal(t, 3, r.Len())
	assert.Equal(t, hatkv.Record{"a": []byte("1")}, r.Record())
	assert.Equal(t, 0, WireRecord{}.Len())
	assert.Equal(t, hatkv.Record{}, WireRecord{Wire: []byte{1}}.Record())
}

// FuzzWireBatch: on any input a WireBatch decodes exactly when the
// generated decoder does, to the same records, in both protocols, aliased
// or not; it never panics.
func FuzzWireBatch(f *testing.F) {
	seeds := []*hatkv.ScanBatch{
		{},
		{Records: []*hatkv.KeyRecord{{Key: "k", Record: hatkv.Record{"f": []byte("v"), "g": {}}}, {Key: "l"}}},
		{Records: []*hatkv.KeyRecord{{Key: "user1", Record: wideRecord(3, 5)}}},
	}
	for _, s := range seeds {
		f.Add(encodeBatch(f, proto.Binary, s))
		f.Add(encodeBatch(f, proto.Compact, s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
			var gen hatkv.ScanBatch
			gerr := decodeWith(p, data, false, &gen)
			for _, alias := range []bool{false, true} {
				var b WireBatch
				err := decodeWith(p, data, alias, &b)
				if gerr != nil {
					require.Error(t, err, "%v alias=%v: the generated decoder failed with %v", p, alias, gerr)
					continue
				}
				require.NoError(t, err, "%v alias=%v", p, alias)
				require.Equal(t, normalize(gen.Records), recordsOf(&b), "%v alias=%v", p, alias)
			}
		}
	})
}
