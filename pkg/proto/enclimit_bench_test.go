package proto_test

import (
	"testing"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// BenchmarkWriteOneByOne measures the writers' per-value methods called
// on the concrete writer (inlined where they can be), as generated code
// calls them for lists of enums and typedefs, maps and strings, without
// a limit and with one that fits: what the limit's checks cost the fast
// path.
func BenchmarkWriteOneByOne(b *testing.B) {
	const items = 1000
	s16 := "0123456789abcdef"
	shapes := []struct {
		name string
		bin  func(w *proto.BinaryWriter)
		cmp  func(w *proto.CompactWriter)
	}{
		{"i64s", func(w *proto.BinaryWriter) {
			w.WriteListBegin(proto.I64, items)
			for i := range items {
				w.WriteI64(int64(i) << 20)
			}
		}, func(w *proto.CompactWriter) {
			w.WriteListBegin(proto.I64, items)
			for i := range items {
				w.WriteI64(int64(i) << 20)
			}
		}},
		{"enums", func(w *proto.BinaryWriter) {
			w.WriteListBegin(proto.I32, items)
			for i := range items {
				w.WriteI32(int32(i % 9))
			}
		}, func(w *proto.CompactWriter) {
			w.WriteListBegin(proto.I32, items)
			for i := range items {
				w.WriteI32(int32(i % 9))
			}
		}},
		{"map-i32-double", func(w *proto.BinaryWriter) {
			w.WriteMapBegin(proto.I32, proto.DOUBLE, items)
			for i := range items {
				w.WriteI32(int32(i))
				w.WriteDouble(float64(i))
			}
		}, func(w *proto.CompactWriter) {
			w.WriteMapBegin(proto.I32, proto.DOUBLE, items)
			for i := range items {
				w.WriteI32(int32(i))
				w.WriteDouble(float64(i))
			}
		}},
		{"bools", func(w *proto.BinaryWriter) {
			w.WriteListBegin(proto.BOOL, items)
			for i := range items {
				w.WriteBool(i&1 == 0)
			}
		}, func(w *proto.CompactWriter) {
			w.WriteListBegin(proto.BOOL, items)
			for i := range items {
				w.WriteBool(i&1 == 0)
			}
		}},
		// Container headers: a list of 1,000 lists of two i32s and one
		// of 1,000 maps of one entry (the compact headers' drop).
		{"small-lists", func(w *proto.BinaryWriter) {
			w.WriteListBegin(proto.LIST, items)
			for i := range items {
				w.WriteListBegin(proto.I32, 2)
				w.WriteI32(int32(i))
				w.WriteI32(int32(i))
			}
		}, func(w *proto.CompactWriter) {
			w.WriteListBegin(proto.LIST, items)
			for i := range items {
				w.WriteListBegin(proto.I32, 2)
				w.WriteI32(int32(i))
				w.WriteI32(int32(i))
			}
		}},
		{"small-maps", func(w *proto.BinaryWriter) {
			w.WriteListBegin(proto.MAP, items)
			for i := range items {
				w.WriteMapBegin(proto.I32, proto.I32, 1)
				w.WriteI32(int32(i))
				w.WriteI32(int32(i))
			}
		}, func(w *proto.CompactWriter) {
			w.WriteListBegin(proto.MAP, items)
			for i := range items {
				w.WriteMapBegin(proto.I32, proto.I32, 1)
				w.WriteI32(int32(i))
				w.WriteI32(int32(i))
			}
		}},
		{"strings16", func(w *proto.BinaryWriter) {
			w.WriteListBegin(proto.STRING, items)
			for range items {
				w.WriteString(s16)
			}
		}, func(w *proto.CompactWriter) {
			w.WriteListBegin(proto.STRING, items)
			for range items {
				w.WriteString(s16)
			}
		}},
	}
	buf := make([]byte, 0, 64<<10)
	for _, sh := range shapes {
		for _, lim := range []int{0, 1 << 20} {
			suffix := "/nolimit"
			if lim > 0 {
				suffix = "/limit"
			}
			b.Run(sh.name+"/binary"+suffix, func(b *testing.B) {
				w := proto.NewBinaryWriter(buf)
				b.ReportAllocs()
				for b.Loop() {
					w.Reset(buf)
					w.SetLimit(lim)
					w.WriteFieldBegin(proto.LIST, 1)
					sh.bin(w)
					w.WriteFieldStop()
				}
				b.SetBytes(int64(w.Len()))
			})
			b.Run(sh.name+"/compact"+suffix, func(b *testing.B) {
				w := proto.NewCompactWriter(buf)
				b.ReportAllocs()
				for b.Loop() {
					w.Reset(buf)
					w.SetLimit(lim)
					w.WriteStructBegin()
					w.WriteFieldBegin(proto.LIST, 1)
					sh.cmp(w)
					w.WriteFieldStop()
					w.WriteStructEnd()
				}
				b.SetBytes(int64(w.Len()))
			})
		}
	}
}
