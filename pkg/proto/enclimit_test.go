package proto_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// limWriter is what both writers share for the limit tests.
type limWriter interface {
	WriteStructBegin()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteStructEnd()
	WriteString(v string)
	WriteBinary(v []byte)
	WriteI32(v int32)
	WriteI64s(v []int64)
	WriteStrings(v []string)
	WriteListBegin(elem proto.Type, n int)
	WriteMapBegin(key, val proto.Type, n int)
	SetRefs(refs *[]proto.Ref, min int)
	SetLimit(n int)
	Reset(buf []byte)
	Bytes() []byte
	Size() int
	Over() bool
}

// limShapes write the ways a message grows: strings one by one, a bulk
// string list, a bulk i64 list, structs in a list, a map of scalars
// written entry by entry, large binaries (as refs when the writer has
// them).
var limShapes = []struct {
	name  string
	write func(w limWriter)
}{
	{"strings", func(w limWriter) {
		w.WriteListBegin(proto.STRING, 500)
		for range 500 {
			w.WriteString(strings.Repeat("s", 100))
		}
	}},
	{"bulk-strings", func(w limWriter) {
		v := make([]string, 500)
		for i := range v {
			v[i] = strings.Repeat("b", 100)
		}
		w.WriteListBegin(proto.STRING, len(v))
		w.WriteStrings(v)
	}},
	{"bulk-i64", func(w limWriter) {
		v := make([]int64, 6000)
		for i := range v {
			v[i] = int64(i) << 40
		}
		w.WriteListBegin(proto.I64, len(v))
		w.WriteI64s(v)
	}},
	{"structs", func(w limWriter) {
		w.WriteListBegin(proto.STRUCT, 2000)
		for i := range 2000 {
			w.WriteStructBegin()
			w.WriteFieldBegin(proto.I32, 1)
			w.WriteI32(int32(i))
			w.WriteFieldBegin(proto.STRING, 2)
			w.WriteString("0123456789")
			w.WriteFieldStop()
			w.WriteStructEnd()
		}
	}},
	{"map", func(w limWriter) {
		w.WriteMapBegin(proto.I32, proto.I32, 4000)
		for i := range 4000 {
			w.WriteI32(int32(i))
			w.WriteI32(int32(-i))
		}
	}},
	{"binaries", func(w limWriter) {
		w.WriteListBegin(proto.STRING, 4)
		for range 4 {
			w.WriteBinary(make([]byte, 20000))
		}
	}},
	// Large binaries in structs: with refs, those after the first
	// struct's end come after the writer passed the limit, and count.
	{"binary-structs", func(w limWriter) {
		w.WriteListBegin(proto.STRUCT, 4)
		for range 4 {
			w.WriteStructBegin()
			w.WriteFieldBegin(proto.STRING, 1)
			w.WriteBinary(make([]byte, 20000))
			w.WriteFieldStop()
			w.WriteStructEnd()
		}
	}},
}

// writeLim writes shape as the body of a struct into a writer that was
// Reset to a 16-byte prefix, with limit lim (0: none) and refs of 8 KiB
// or more if refs.
func writeLim(w limWriter, shape func(limWriter), lim int, refs *[]proto.Ref) {
	w.Reset(make([]byte, 16, 64))
	w.SetRefs(refs, 8<<10)
	w.SetLimit(lim)
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.LIST, 1)
	shape(w)
	w.WriteFieldStop()
	w.WriteStructEnd()
}

// A writer with a limit writes exactly what one without writes while the
// message fits; past the limit it keeps nothing of it (the caller's
// prefix stays) and no more buffer than about the limit, and still
// reports the whole message's size.
func TestWriterLimit(t *testing.T) {
	writers := []struct {
		name string
		make func() limWriter
	}{
		{"binary", func() limWriter { return proto.NewBinaryWriter(nil) }},
		{"compact", func() limWriter { return proto.NewCompactWriter(nil) }},
	}
	for _, wr := range writers {
		for _, sh := range limShapes {
			for _, withRefs := range []bool{false, true} {
				name := wr.name + "/" + sh.name
				if withRefs {
					name += "/refs"
				}
				t.Run(name, func(t *testing.T) {
					var refs *[]proto.Ref
					if withRefs {
						refs = new([]proto.Ref)
					}
					w := wr.make()
					writeLim(w, sh.write, 0, refs)
					whole := w.Size()
					want := append([]byte(nil), w.Bytes()...)
					require.Greater(t, whole, 10000)
					require.Equal(t, len(want)-16+proto.RefsLen(refsOr(refs)), whole)
					wantRefs := 0
					if refs != nil {
						wantRefs = len(*refs)
						*refs = (*refs)[:0]
					}
					require.False(t, w.Over())

					// Exactly at the limit: the same bytes.
					writeLim(w, sh.write, whole, refs)
					require.False(t, w.Over())
					require.Equal(t, whole, w.Size())
					require.Equal(t, want, w.Bytes())
					if refs != nil {
						require.Len(t, *refs, wantRefs)
						*refs = (*refs)[:0]
					}

					// One byte short, and far short: over, the prefix
					// kept, the buffer bounded, the size whole.
					for _, lim := range []int{whole - 1, whole / 10, 1} {
						writeLim(w, sh.write, lim, refs)
						require.True(t, w.Over(), "limit %d", lim)
						require.Equal(t, whole, w.Size(), "limit %d", lim)
						require.Len(t, w.Bytes(), 16, "limit %d", lim)
						// The buffer grows by doubling towards the limit, and
						// past it by at most a struct's fixed fields or one
						// scalar entry (each is dropped once it passed).
						require.LessOrEqual(t, cap(w.Bytes()), max(2*lim, 64)+64, "limit %d", lim)
						if refs != nil {
							*refs = (*refs)[:0]
						}
					}

					// Reset takes the limit away.
					w.Reset(nil)
					w.WriteString(strings.Repeat("x", 100))
					require.False(t, w.Over())
					require.Equal(t, w.Size(), len(w.Bytes()))
				})
			}
		}
	}
}

func refsOr(refs *[]proto.Ref) []proto.Ref {
	if refs == nil {
		return nil
	}
	return *refs
}

// The error an encoding past its limit returns matches ErrSizeLimit and
// names both sizes.
func TestTooLargeError(t *testing.T) {
	err := error(&proto.TooLargeError{Size: 2048, Limit: 1024})
	require.True(t, errors.Is(err, proto.ErrSizeLimit))
	require.EqualError(t, err, "proto: message of 2048 bytes exceeds the encoding limit of 1024 bytes")
	err = &proto.TooLargeError{Size: 1024, Limit: 1024, More: true}
	require.True(t, errors.Is(err, proto.ErrSizeLimit))
	require.EqualError(t, err, "proto: message of more than 1024 bytes exceeds the encoding limit of 1024 bytes")
}

// A writer Reset, or made by its New function, has no limit.
func TestResetWriterNoLimit(t *testing.T) {
	var w proto.BinaryWriter
	w.Reset(nil)
	w.WriteString("abc")
	w.WriteFieldStop()
	require.False(t, w.Over())
	require.Equal(t, []byte{0, 0, 0, 3, 'a', 'b', 'c', 0}, w.Bytes())
	require.Equal(t, 8, w.Size())
	cw := proto.NewCompactWriter(nil)
	cw.WriteString("abc")
	cw.WriteFieldStop()
	require.False(t, cw.Over())
	require.Equal(t, []byte{3, 'a', 'b', 'c', 0}, cw.Bytes())
}
