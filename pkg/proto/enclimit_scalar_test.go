package proto_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// scalarWriter is what the one-by-one shapes write with.
type scalarWriter interface {
	limWriter
	WriteI64(v int64)
	WriteDouble(v float64)
	WriteBool(v bool)
	WriteSetBegin(elem proto.Type, n int)
}

// oneByOne are results written value by value, as generated code writes
// lists of enums and typedefs and every map: items values each.
var oneByOne = []struct {
	name  string
	write func(w scalarWriter, items int)
}{
	{"i64-list", func(w scalarWriter, items int) {
		w.WriteListBegin(proto.I64, items)
		for i := range items {
			w.WriteI64(int64(i) << 40)
		}
	}},
	{"enum-list", func(w scalarWriter, items int) {
		w.WriteListBegin(proto.I32, items)
		for i := range items {
			w.WriteI32(int32(i%7) + 1<<20)
		}
	}},
	{"map-i32-double", func(w scalarWriter, items int) {
		w.WriteMapBegin(proto.I32, proto.DOUBLE, items)
		for i := range items {
			w.WriteI32(int32(i))
			w.WriteDouble(float64(i) / 3)
		}
	}},
	{"bool-list", func(w scalarWriter, items int) {
		w.WriteListBegin(proto.BOOL, items)
		for i := range items {
			w.WriteBool(i%3 == 0)
		}
	}},
	// Empty containers: past the limit each header is dropped when it
	// is written, as no value comes to drop it (the compact writer kept
	// its headers until the struct's end: 32 MiB of them allocated
	// 201 MB against a room of 1 MiB).
	{"empty-lists", func(w scalarWriter, items int) {
		w.WriteListBegin(proto.LIST, items)
		for range items {
			w.WriteListBegin(proto.I32, 0)
		}
	}},
	{"empty-sets", func(w scalarWriter, items int) {
		w.WriteListBegin(proto.SET, items)
		for range items {
			w.WriteSetBegin(proto.I64, 0)
		}
	}},
	{"empty-maps", func(w scalarWriter, items int) {
		w.WriteListBegin(proto.MAP, items)
		for range items {
			w.WriteMapBegin(proto.I32, proto.STRING, 0)
		}
	}},
	{"short-lists", func(w scalarWriter, items int) {
		w.WriteListBegin(proto.LIST, items)
		for range items {
			w.WriteListBegin(proto.I32, 1)
			w.WriteI32(7)
		}
	}},
	{"strings", func(w scalarWriter, items int) {
		s := strings.Repeat("s", 1<<10)
		w.WriteListBegin(proto.STRING, items)
		for range items {
			w.WriteString(s)
		}
	}},
}

// A result written value by value 32 times past the limit is counted,
// not kept: the writer allocates about what it keeps (a buffer grown by
// doubling to the limit), where it appended the values until the
// struct's end before (32 MiB of i64s against 1 MiB: 201 MB allocated),
// and Size is the whole message's, exactly.
func TestWriterLimitOneByOne(t *testing.T) {
	const room = 1 << 20
	writers := []struct {
		name string
		make func() scalarWriter
	}{
		{"binary", func() scalarWriter { return proto.NewBinaryWriter(nil) }},
		{"compact", func() scalarWriter { return proto.NewCompactWriter(nil) }},
	}
	for _, wr := range writers {
		for _, sh := range oneByOne {
			t.Run(wr.name+"/"+sh.name, func(t *testing.T) {
				w := wr.make()
				write := func(w scalarWriter, items, lim int) {
					writeLim(w, func(lw limWriter) { sh.write(lw.(scalarWriter), items) }, lim, nil)
				}
				// The items that make 32 times the room, from a small sample's size.
				write(w, 1000, 0)
				items := 1000 * 32 * room / w.Size()
				write(w, items, 0)
				whole := w.Size()
				require.Greater(t, whole, 31*room)

				w = wr.make() // a fresh buffer: what it grows to counts
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				write(w, items, room)
				runtime.ReadMemStats(&after)
				alloc := after.TotalAlloc - before.TotalAlloc
				t.Logf("%d bytes against a room of %d: %d bytes allocated", whole, room, alloc)
				require.True(t, w.Over())
				require.Equal(t, whole, w.Size())
				require.Len(t, w.Bytes(), 16)
				require.Less(t, alloc, uint64(8*room))
			})
		}
	}
}

// A million 1 KiB strings (1,024 times the room) are counted without
// growing the buffer: past the limit a length prefix is counted, not
// appended (26.5 MB allocated before).
func TestWriterLimitStringsFarPast(t *testing.T) {
	const room, items, size = 1 << 20, 1 << 20, 1 << 10
	s := strings.Repeat("s", size)
	for _, wr := range []struct {
		name string
		w    scalarWriter
		each int // a string's encoding
	}{
		{"binary", proto.NewBinaryWriter(nil), 4 + size},
		{"compact", proto.NewCompactWriter(nil), 2 + size},
	} {
		t.Run(wr.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			writeLim(wr.w, func(lw limWriter) {
				lw.WriteListBegin(proto.STRING, items)
				for range items {
					lw.WriteString(s)
				}
			}, room, nil)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes against a room of %d: %d bytes allocated", wr.w.Size(), room, alloc)
			require.True(t, wr.w.Over())
			// The struct's field and list headers, the strings, the stop.
			headers := map[string]int{"binary": 3 + 5 + 1, "compact": 1 + 4 + 1}[wr.name]
			require.Equal(t, headers+items*wr.each, wr.w.Size())
			require.Less(t, alloc, uint64(8*room))
		})
	}
}
