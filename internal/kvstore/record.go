package kvstore

import (
	"encoding/binary"
	"slices"
)

// Record is a YCSB-style record: field name to value.
type Record map[string][]byte

// KV is a key and its record, as returned by Scan and taken by MultiPut.
type KV struct {
	Key    string
	Record Record
}

// recordVersion is the first byte of every stored value, so the layout
// can evolve without guessing.
const recordVersion = 1

// Encoding (all lengths uvarint):
//
//	version(1) nfields { namelen name vallen val }*
//
// Fields are sorted by name, which makes the encoding canonical and lets
// the decoder reject duplicates cheaply.

// encodedSize returns the exact encoded size of r.
func encodedSize(r Record) int {
	n := 1 + uvarintLen(uint64(len(r)))
	for name, v := range r {
		n += uvarintLen(uint64(len(name))) + len(name) + uvarintLen(uint64(len(v))) + len(v)
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// appendRecord appends the encoding of r to dst.
func appendRecord(dst []byte, r Record) []byte {
	names := make([]string, 0, len(r))
	for name := range r {
		names = append(names, name)
	}
	slices.Sort(names)
	dst = append(dst, recordVersion)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, name := range names {
		v := r[name]
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// EncodeRecord returns the stored form of r.
func EncodeRecord(r Record) []byte {
	return appendRecord(make([]byte, 0, encodedSize(r)), r)
}

// DecodeRecord parses a stored value. With fields given, only those
// fields are returned (absent ones are skipped). Values are copied, so the
// input may be LMDB memory that goes away after the transaction.
func DecodeRecord(b []byte, fields ...string) (Record, error) {
	if len(b) == 0 {
		return nil, &RecordError{Reason: "empty value"}
	}
	if b[0] != recordVersion {
		return nil, &RecordError{Reason: "unknown version byte"}
	}
	p := 1
	count, n := binary.Uvarint(b[p:])
	if n <= 0 || n != uvarintLen(count) {
		return nil, &RecordError{Reason: "bad field count"}
	}
	p += n
	// Each field takes at least two bytes, which bounds count before any
	// allocation sized by it.
	if count > uint64(len(b)-p)/2 {
		return nil, &RecordError{Reason: "field count exceeds data"}
	}
	want := len(fields)
	size := int(count)
	if want > 0 && want < size {
		size = want
	}
	rec := make(Record, size)
	// For whole records, one copy of the input backs every value and one
	// string backs every name: three allocations instead of two per field.
	var whole []byte
	var names string
	if want == 0 {
		whole = append(make([]byte, 0, len(b)), b...)
		names = string(b)
	}
	var prev []byte
	for i := uint64(0); i < count; i++ {
		name, np, err := chunk(b, p, "field name")
		if err != nil {
			return nil, err
		}
		if i > 0 && string(name) <= string(prev) {
			return nil, &RecordError{Reason: "fields not strictly sorted"}
		}
		prev = name
		val, vp, err := chunk(b, np, "field value")
		if err != nil {
			return nil, err
		}
		if want == 0 {
			vs := vp - len(val)
			// Full slice expressions cap each value so that appending to
			// one can never overwrite its neighbour.
			rec[names[np-len(name):np]] = whole[vs:vp:vp]
			p = vp
			continue
		}
		p = vp
		if !slices.Contains(fields, string(name)) {
			continue
		}
		rec[string(name)] = append(make([]byte, 0, len(val)), val...)
	}
	if p != len(b) {
		return nil, &RecordError{Reason: "trailing bytes"}
	}
	return rec, nil
}

func chunk(b []byte, p int, what string) ([]byte, int, error) {
	l, n := binary.Uvarint(b[p:])
	// Non-minimal varints are refused so that every accepted value has
	// exactly one encoding.
	if n <= 0 || n != uvarintLen(l) {
		return nil, 0, &RecordError{Reason: "bad " + what + " length"}
	}
	p += n
	if l > uint64(len(b)-p) {
		return nil, 0, &RecordError{Reason: what + " exceeds data"}
	}
	end := p + int(l)
	return b[p:end], end, nil
}
