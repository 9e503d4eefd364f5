package hatkv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// WireBatch is one ScanStream message (a hatkv.ScanBatch) decoded without
// a map per record: each record stays in its wire form, the Thrift binary
// map<string, binary> the store keeps and the server sends. The generated
// decoder builds a Record map per record (a hash table and its inserts:
// the largest part of a client's CPU in a streamed scan of YCSB records);
// a reader that prints, forwards or picks a few fields needs none. Read
// batches with WireStream.Recv, reusing one: it keeps its memory.
//
// A record's Wire is valid until the next decode into the same batch
// (WireRecord.Record copies what it needs) and is read-only.
type WireBatch struct {
	Records []WireRecord
	buf     []byte // the wire forms that are copies, back to back
	spans   []span // per record: its bytes in buf
}

// WireRecord is a key and its record in wire form: the map header (key
// and value type, then the field count as a big-endian i32) and each
// field's name and value, each an i32 length and its bytes. A decoded
// record has been checked: its lengths fit, whatever order its fields
// are in (a store's are sorted by name; a decoding server's are not).
type WireRecord struct {
	Key  string
	Wire []byte
}

// wireMapHeader is the size of a wire-form map's header.
const wireMapHeader = 6

// Len is the record's field count.
func (r WireRecord) Len() int {
	if len(r.Wire) < wireMapHeader {
		return 0
	}
	return int(binary.BigEndian.Uint32(r.Wire[2:]))
}

// All yields the record's field names and values in wire order. The
// slices alias the batch.
func (r WireRecord) All() iter.Seq2[[]byte, []byte] {
	return func(yield func(name, val []byte) bool) {
		p := wireMapHeader
		for range r.Len() {
			name, np := wireChunk(r.Wire, p)
			val, vp := wireChunk(r.Wire, np)
			if np < 0 || vp < 0 || !yield(name, val) {
				return
			}
			p = vp
		}
	}
}

// Field returns the value of field name (aliasing the batch) and whether
// the record has it.
func (r WireRecord) Field(name string) ([]byte, bool) {
	for n, v := range r.All() {
		if string(n) == name {
			return v, true
		}
	}
	return nil, false
}

// Record builds the record's map, its values copied: it outlives the
// batch.
func (r WireRecord) Record() hatkv.Record {
	rec := make(hatkv.Record, r.Len())
	for n, v := range r.All() {
		rec[string(n)] = bytes.Clone(v)
	}
	return rec
}

// wireChunk cuts the length-prefixed bytes at p of b; -1 when they do not
// fit (only for a WireRecord built by hand: decoded ones were checked).
func wireChunk(b []byte, p int) ([]byte, int) {
	if p < 0 || len(b)-p < 4 {
		return nil, -1
	}
	n := int(binary.BigEndian.Uint32(b[p:]))
	p += 4
	if n > len(b)-p {
		return nil, -1
	}
	return b[p : p+n : p+n], p + n
}

// span is where a record's wire form is in a batch's buffer; start < 0:
// the record's Wire is set already (it aliases the message).
type span struct{ start, end int }

// reset empties the batch for the next message, keeping its memory.
func (b *WireBatch) reset() {
	clear(b.Records) // no keys or messages kept alive through the reused array
	b.Records, b.buf, b.spans = b.Records[:0], b.buf[:0], b.spans[:0]
}

// add appends a record: its wire form is wire, or b.buf[sp.start:sp.end].
func (b *WireBatch) add(key string, wire []byte, sp span) {
	b.Records = append(b.Records, WireRecord{Key: key, Wire: wire})
	b.spans = append(b.spans, sp)
}

// cut points the records kept in b.buf at their bytes, once b.buf no
// longer grows.
func (b *WireBatch) cut() {
	for i, sp := range b.spans {
		if sp.start >= 0 {
			b.Records[i].Wire = b.buf[sp.start:sp.end:sp.end]
		}
	}
}

// appendRecord appends rec in wire form, names sorted (as a store keeps
// them), and adds it under key.
func (b *WireBatch) appendRecord(key string, rec hatkv.Record) {
	names := make([]string, 0, len(rec))
	for n := range rec {
		names = append(names, n)
	}
	slices.Sort(names)
	start := len(b.buf)
	b.buf = appendMapBegin(b.buf, len(names))
	for _, n := range names {
		b.buf = appendChunk(b.buf, n)
		b.buf = appendChunk(b.buf, rec[n])
	}
	b.add(key, nil, span{start, len(b.buf)})
}

func appendMapBegin(dst []byte, n int) []byte {
	dst = append(dst, byte(proto.STRING), byte(proto.STRING))
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

func appendChunk[T string | []byte](dst []byte, v T) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}

// noRecord is the wire form of a record that is absent or empty (an
// empty map may name any types): read-only, shared.
var noRecord = emptyWireMap[:wireMapHeader:wireMapHeader]

// DecodeBinary decodes a ScanBatch as the generated decoders of
// hatkv.ScanBatch and hatkv.KeyRecord read it (unknown fields and fields
// of another type skipped, a later field replacing an earlier one, a
// record without a map an empty one) but without a map per record: a
// record is its map's bytes as they came (skipped, then taken with
// proto.BinaryReader.BytesFrom),
// aliasing the message when the reader aliases it (a large message, whose
// buffer then stays with the batch's records), else copied into the
// batch's buffer; of a JSON message, re-encoded entry by entry.
func (b *WireBatch) DecodeBinary(r *proto.BinaryReader) error {
	return decodeBatch(b, r, b.recordBinary)
}

// batchReader is what decodeBatch reads a ScanBatch with: the binary and
// the compact protocols' readers.
type batchReader interface {
	ReadStructBegin() error
	ReadFieldBegin() (proto.Type, int16, error)
	Skip(proto.Type) error
	ReadListBegin() (proto.Type, int, error)
	ReadStructEnd() error
}

// decodeBatch reads a ScanBatch's fields with r and each KeyRecord of its
// list with record.
func decodeBatch[R batchReader](b *WireBatch, r R, record func(R) error) error {
	b.reset()
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
		if id != 1 || t != proto.LIST {
			if err := r.Skip(t); err != nil {
				return err
			}
			continue
		}
		et, n, err := r.ReadListBegin()
		if err != nil {
			return err
		}
		if n > 0 && et != proto.STRUCT {
			return fmt.Errorf("%w: element type %v, want %v", proto.ErrBadType, et, proto.STRUCT)
		}
		b.reset()
		for range n {
			if err := record(r); err != nil {
				return err
			}
		}
	}
	b.cut()
	return r.ReadStructEnd()
}

// recordBinary decodes one KeyRecord into the batch.
func (b *WireBatch) recordBinary(r *proto.BinaryReader) error {
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	var (
		key   string
		wire  = noRecord
		start = len(b.buf)
		sp    = span{-1, -1}
	)
	for {
		t, id, ok := r.ReadFieldBeginFast()
		var err error
		if !ok {
			if t, id, err = r.ReadFieldBegin(); err != nil {
				return err
			}
			if t == proto.STOP {
				break
			}
		}
		switch {
		case id == 1 && t == proto.STRING:
			if key, err = r.ReadString(); err != nil {
				return err
			}
		case id == 2 && t == proto.MAP && r.SplitsBinary():
			b.buf = b.buf[:start] // a later map replaces an earlier one
			if err := b.entries(r.ReadMapBegin, r.ReadString, r.ReadBinary); err != nil {
				return err
			}
			wire, sp = nil, span{start, len(b.buf)}
		case id == 2 && t == proto.MAP:
			// Skip walks a map of strings in one loop, with ReadBinary's
			// checks, and copies nothing.
			at := r.Pos()
			err := r.Skip(proto.MAP)
			raw := r.BytesFrom(at)
			if len(raw) >= wireMapHeader {
				kt, vt := proto.Type(raw[0]), proto.Type(raw[1])
				if binary.BigEndian.Uint32(raw[2:]) > 0 && (kt != proto.STRING || vt != proto.STRING) {
					return fmt.Errorf("%w: map types %v/%v, want %v/%v", proto.ErrBadType, kt, vt, proto.STRING, proto.STRING)
				}
			}
			if err != nil {
				return err
			}
			b.buf, wire, sp = b.buf[:start], noRecord, span{-1, -1} // a later map replaces an earlier one
			switch {
			case binary.BigEndian.Uint32(raw[2:]) == 0:
			case r.Alias:
				wire = raw
			default:
				b.buf = append(b.buf, raw...)
				wire, sp = nil, span{start, len(b.buf)}
			}
		default:
			if err := r.Skip(t); err != nil {
				return err
			}
		}
	}
	b.add(key, wire, sp)
	return r.ReadStructEnd()
}

// entries reads a map<string, binary> entry by entry into b.buf in wire
// form.
func (b *WireBatch) entries(begin func() (proto.Type, proto.Type, int, error), name func() (string, error), value func() ([]byte, error)) error {
	kt, vt, n, err := begin()
	if err != nil {
		return err
	}
	if n > 0 && (kt != proto.STRING || vt != proto.STRING) {
		return fmt.Errorf("%w: map types %v/%v, want %v/%v", proto.ErrBadType, kt, vt, proto.STRING, proto.STRING)
	}
	b.buf = appendMapBegin(b.buf, n)
	for range n {
		k, err := name()
		if err != nil {
			return err
		}
		v, err := value()
		if err != nil {
			return err
		}
		b.buf = appendChunk(appendChunk(b.buf, k), v)
	}
	return nil
}

// DecodeCompact is DecodeBinary for the compact protocol: each map is
// transcoded into the binary protocol's form, entry by entry, into the
// batch's buffer.
func (b *WireBatch) DecodeCompact(r *proto.CompactReader) error {
	return decodeBatch(b, r, b.recordCompact)
}

func (b *WireBatch) recordCompact(r *proto.CompactReader) error {
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	var (
		key   string
		wire  = noRecord
		start = len(b.buf)
		sp    = span{-1, -1}
	)
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			break
		}
		switch {
		case id == 1 && t == proto.STRING:
			if key, err = r.ReadString(); err != nil {
				return err
			}
		case id == 2 && t == proto.MAP:
			b.buf = b.buf[:start]
			if err := b.entries(r.ReadMapBegin, r.ReadString, r.ReadBinary); err != nil {
				return err
			}
			wire, sp = nil, span{start, len(b.buf)}
		default:
			if err := r.Skip(t); err != nil {
				return err
			}
		}
	}
	b.add(key, wire, sp)
	return r.ReadStructEnd()
}

// EncodeBinary writes the batch as a hatkv.ScanBatch.
func (b *WireBatch) EncodeBinary(w *proto.BinaryWriter) error {
	return b.encode(w, func(name []byte) { w.WriteString(string(name)) })
}

// EncodeCompact writes the batch as a hatkv.ScanBatch.
func (b *WireBatch) EncodeCompact(w *proto.CompactWriter) error {
	return b.encode(w, func(name []byte) { w.WriteBinary(name) })
}

// encode writes the batch field by field (names through name: a JSON
// writer must see them as strings).
func (b *WireBatch) encode(w fieldWriter, name func([]byte)) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.LIST, 1)
	w.WriteListBegin(proto.STRUCT, len(b.Records))
	for _, kr := range b.Records {
		w.WriteStructBegin()
		w.WriteFieldBegin(proto.STRING, 1)
		w.WriteString(kr.Key)
		w.WriteFieldBegin(proto.MAP, 2)
		w.WriteMapBegin(proto.STRING, proto.STRING, kr.Len())
		for n, v := range kr.All() {
			name(n)
			w.WriteBinary(v)
		}
		w.WriteFieldStop()
		w.WriteStructEnd()
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

var _ proto.Struct = (*WireBatch)(nil)
