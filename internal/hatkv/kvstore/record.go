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

// The first byte of every stored value says how the rest is laid out, so
// the layout can evolve without guessing.
const (
	// recordV1 (store format 1): uvarint lengths,
	//	1 nfields { namelen name vallen val }*
	recordV1 = 1
	// recordVersion (store format 2) keeps a record in its wire form: the
	// rest is exactly a Thrift binary-protocol map<string, binary>,
	//	2 | 0x0b 0x0b count:i32 { len:i32 name len:i32 val }*
	// (big-endian), so a Get splices it into the reply without decoding
	// and re-encoding it (AppendWire).
	recordVersion = 2
)

// Fields are sorted by name in both layouts, which makes the encoding
// canonical and lets the decoder reject duplicates cheaply.

const (
	thriftString = 11 // Thrift's type id of string and binary
	// wireHeader is the map header: key type, value type, count.
	wireHeader = 6
)

// encodedSize returns the exact encoded size of r (current layout).
func encodedSize(r Record) int {
	n := 1 + wireHeader
	for name, v := range r {
		n += 8 + len(name) + len(v)
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

func sortedNames(r Record) []string {
	names := make([]string, 0, len(r))
	for name := range r {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// appendRecord appends the stored form of r to dst.
func appendRecord(dst []byte, r Record) []byte {
	return appendWire(append(dst, recordVersion), r, nil)
}

// appendWire appends r as a Thrift binary map<string, binary>, restricted
// to fields when given, names in order.
func appendWire(dst []byte, r Record, fields []string) []byte {
	names := sortedNames(r)
	if len(fields) > 0 {
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(fields, n) })
	}
	dst = append(dst, thriftString, thriftString)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(names)))
	for _, name := range names {
		v := r[name]
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(name)))
		dst = append(dst, name...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// EncodeRecord returns the stored form of r.
func EncodeRecord(r Record) []byte {
	return appendRecord(make([]byte, 0, encodedSize(r)), r)
}

// DecodeRecord parses a stored value of either layout. With fields given,
// only those fields are returned (absent ones are skipped). Values are
// copied, so the input may be LMDB memory that goes away after the
// transaction.
func DecodeRecord(b []byte, fields ...string) (Record, error) {
	if len(b) == 0 {
		return nil, &RecordError{Reason: "empty value"}
	}
	switch b[0] {
	case recordV1:
		return decodeV1(b, fields)
	case recordVersion:
		return decodeWire(b, fields)
	}
	return nil, &RecordError{Reason: "unknown version byte"}
}

// wireEntries walks a stored wire-form value (version byte included),
// checking every length against the data and the names' strict order,
// and calls fn for each field until it returns false.
func wireEntries(b []byte, fn func(name, val []byte) bool) error {
	if len(b) < 1 {
		return &RecordError{Reason: "bad map header"}
	}
	return mapEntries(b[1:], fn)
}

// mapEntries is wireEntries on the map itself (no version byte).
func mapEntries(b []byte, fn func(name, val []byte) bool) error {
	if len(b) < wireHeader || b[0] != thriftString || b[1] != thriftString {
		return &RecordError{Reason: "bad map header"}
	}
	count := uint64(binary.BigEndian.Uint32(b[2:]))
	p := wireHeader
	// Each field takes at least eight bytes, which bounds count before
	// any allocation sized by it.
	if count > uint64(len(b)-p)/8 {
		return &RecordError{Reason: "field count exceeds data"}
	}
	var prev []byte
	more := true
	for i := uint64(0); i < count; i++ {
		name, np, err := wireChunk(b, p, "field name")
		if err != nil {
			return err
		}
		if i > 0 && string(name) <= string(prev) {
			return &RecordError{Reason: "fields not strictly sorted"}
		}
		prev = name
		val, vp, err := wireChunk(b, np, "field value")
		if err != nil {
			return err
		}
		p = vp
		if more {
			more = fn(name, val)
		}
	}
	if p != len(b) {
		return &RecordError{Reason: "trailing bytes"}
	}
	return nil
}

func wireChunk(b []byte, p int, what string) ([]byte, int, error) {
	if len(b)-p < 4 {
		return nil, 0, &RecordError{Reason: "bad " + what + " length"}
	}
	l := uint64(binary.BigEndian.Uint32(b[p:]))
	p += 4
	if l > uint64(len(b)-p) {
		return nil, 0, &RecordError{Reason: what + " exceeds data"}
	}
	end := p + int(l)
	return b[p:end], end, nil
}

func decodeWire(b []byte, fields []string) (Record, error) {
	var size int
	if len(b) >= 1+wireHeader {
		size = int(min(binary.BigEndian.Uint32(b[3:]), uint32(len(b)/8)))
	}
	want := len(fields)
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
	base := func(s []byte) int { return cap(b) - cap(s) }
	err := wireEntries(b, func(name, val []byte) bool {
		if want == 0 {
			ns, vs := base(name), base(val)
			// Full slice expressions cap each value so that appending to
			// one can never overwrite its neighbour.
			rec[names[ns:ns+len(name)]] = whole[vs : vs+len(val) : vs+len(val)]
		} else if slices.Contains(fields, string(name)) {
			rec[string(name)] = append(make([]byte, 0, len(val)), val...)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// AppendWire appends a stored value's record to dst in its wire form (a
// Thrift binary map<string, binary>), restricted to fields when given.
// A whole record of the current layout is copied as it is stored; a
// format-1 record (a store opened read-only before migration) is decoded
// and encoded.
func AppendWire(dst, stored []byte, fields []string) ([]byte, error) {
	if len(stored) == 0 || stored[0] != recordVersion {
		rec, err := DecodeRecord(stored, fields...)
		if err != nil {
			return dst, err
		}
		return appendWire(dst, rec, nil), nil
	}
	if len(fields) == 0 {
		// Copy first, then check the copy: the copy streams the record in
		// (the hardware prefetches it), where a walk of LMDB's pages took
		// one dependent cache miss per field length (~0.6 µs a Get of a
		// YCSB record in a server profile); the walk then reads the copy.
		start := len(dst)
		dst = append(dst, stored[1:]...)
		if err := mapEntries(dst[start:], func(_, _ []byte) bool { return false }); err != nil {
			return dst[:start], err
		}
		return dst, nil
	}
	start := len(dst)
	dst = append(dst, stored[1:1+min(len(stored)-1, wireHeader)]...)
	n := uint32(0)
	err := wireEntries(stored, func(name, val []byte) bool {
		if slices.Contains(fields, string(name)) {
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(name)))
			dst = append(dst, name...)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(val)))
			dst = append(dst, val...)
			n++
		}
		return true
	})
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(dst[start+2:], n)
	return dst, nil
}

// WireFields calls fn for every field of a wire-form map (as AppendWire
// wrote it), for callers that transcode it (Thrift's compact protocol).
func WireFields(wire []byte, fn func(name, val []byte)) error {
	if len(wire) < wireHeader {
		return &RecordError{Reason: "bad map header"}
	}
	p := wireHeader
	count := int(binary.BigEndian.Uint32(wire[2:]))
	for i := 0; i < count; i++ {
		name, np, err := wireChunk(wire, p, "field name")
		if err != nil {
			return err
		}
		val, vp, err := wireChunk(wire, np, "field value")
		if err != nil {
			return err
		}
		fn(name, val)
		p = vp
	}
	if p != len(wire) {
		return &RecordError{Reason: "trailing bytes"}
	}
	return nil
}

// WireCount is the field count of a wire-form map.
func WireCount(wire []byte) int {
	if len(wire) < wireHeader {
		return 0
	}
	return int(binary.BigEndian.Uint32(wire[2:]))
}

func decodeV1(b []byte, fields []string) (Record, error) {
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
		p = vp
		if want > 0 && !slices.Contains(fields, string(name)) {
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
