package emul

import (
	"encoding/binary"
	"fmt"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
)

// The emulations' private request/response encoding: compact binary, not
// the Thrift encoding of the generated hatkv code, so every emulation pays
// the same (small) marshalling cost and the comparison is about the
// transport. Records travel in kvstore's stored form (EncodeRecord), the
// same bytes Pilaf's exported value area holds.
//
// request:  u8 op | op-specific body (lengths and counts uvarint)
//
//	get       key, fields
//	multiget  n, n×key, fields
//	put       key, record
//	multiput  n, n×(key, record)
//	delete    key
//	scan      start key, count, fields
//	ping      (nothing)
//
// fields: n, n×name (n = 0: all fields); key/name/record: length, bytes.
//
// response: u8 status | body
//
//	ok: get → record; multiget → n×(u8 found, [record]); scan → n×(key,
//	record); writes → empty. Other statuses: a message.
const (
	opGet byte = iota + 1
	opMultiGet
	opPut
	opMultiPut
	opDelete
	opScan
	opPing // no store access: HERD's warm-up
)

const (
	stOK byte = iota
	stNotFound
	stInvalid
	stFull
	stInternal
)

func appendBytes(b []byte, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendFields(b []byte, fields []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(fields)))
	for _, f := range fields {
		b = appendString(b, f)
	}
	return b
}

// reader decodes a message; the first failure sticks, so callers check
// err once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrProtocol, what)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint(limit uint64) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > limit {
		r.fail("bad length")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns a sub-slice of the message (no copy).
func (r *reader) bytes() []byte {
	n := r.uvarint(uint64(len(r.b)))
	if r.err != nil {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string { return string(r.bytes()) }

func (r *reader) count() int { return int(r.uvarint(uint64(len(r.b)))) }

func (r *reader) fields() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.string())
	}
	return out
}

func (r *reader) record(fields []string) kvstore.Record {
	b := r.bytes()
	if r.err != nil {
		return nil
	}
	rec, err := kvstore.DecodeRecord(b, fields...)
	if err != nil {
		r.fail(err.Error())
		return nil
	}
	return rec
}

func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// statusErr turns a non-OK response into a typed error.
func statusErr(st byte, msg string) error {
	switch st {
	case stNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, msg)
	case stInvalid:
		return fmt.Errorf("%w: %s", ErrInvalid, msg)
	case stFull:
		return fmt.Errorf("%w: %s", ErrStoreFull, msg)
	}
	return fmt.Errorf("%w: %s", ErrRemote, msg)
}
