package proto_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// shapeStruct is a struct whose field 1 is what write writes (limShapes),
// for the JSON codec, which takes Structs.
type shapeStruct struct {
	name  string
	write func(limWriter)
}

func (s shapeStruct) EncodeBinary(w *proto.BinaryWriter) error {
	w.WriteStructBegin()
	t := proto.LIST
	if s.name == "map" {
		t = proto.MAP
	}
	w.WriteFieldBegin(t, 1)
	s.write(w)
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (shapeStruct) EncodeCompact(*proto.CompactWriter) error { return errors.New("unused") }
func (shapeStruct) DecodeBinary(*proto.BinaryReader) error   { return errors.New("unused") }
func (shapeStruct) DecodeCompact(*proto.CompactReader) error { return errors.New("unused") }

// jsonShapes are limShapes and two that JSON adds: strings that are
// mostly escapes (their JSON is six times their bytes) and an i64 list of
// zeros written one by one (its JSON is a quarter of its binary form).
var jsonShapes = append(limShapes[:len(limShapes):len(limShapes)], []struct {
	name  string
	write func(w limWriter)
}{
	{"escapes", func(w limWriter) {
		w.WriteListBegin(proto.STRING, 300)
		for range 300 {
			w.WriteString(strings.Repeat("\x01", 100))
		}
	}},
	{"i64-zeros", func(w limWriter) {
		w.WriteListBegin(proto.I64, 6000)
		bw := w.(*proto.BinaryWriter)
		for range 6000 {
			bw.WriteI64(0)
		}
	}},
}...)

// A JSON encoding with a limit is the same as without while it fits;
// past the limit it returns dst unchanged and a *TooLargeError saying
// "more than" the limit, having built about the limit, not the message:
// the memory it allocates beyond what writing the shape costs anyway
// (its own values, the scalars a binary writer adds between checks)
// stays under a few times the limit (a buffer grown to a size by
// appending allocates up to about five times it; the binary form's and
// the JSON's buffers both), and, where the binary form is within four
// times the limit, what a second pass holds: the binary form. Where the
// JSON is smaller than the binary form (i64-zeros), a limit between the
// two still lets it through.
func TestJSONLimit(t *testing.T) {
	const boundFactor = 12
	for _, sh := range jsonShapes {
		t.Run(sh.name, func(t *testing.T) {
			body := shapeStruct{sh.name, sh.write}
			var c proto.JSONCodec
			prefix := []byte("pre!")
			want, err := c.AppendMessage(append([]byte(nil), prefix...), "m", proto.Reply, 7, body)
			require.NoError(t, err)
			whole := len(want) - len(prefix)
			require.Greater(t, whole, 10000)

			// Exactly at the limit: the same bytes.
			c.SetLimit(whole)
			got, err := c.AppendMessage(append([]byte(nil), prefix...), "m", proto.Reply, 7, body)
			require.NoError(t, err)
			require.Equal(t, want, got)

			bw := proto.NewBinaryWriter(nil)
			bw.SetRefs(new([]proto.Ref), 1)
			bw.WriteMessageBegin("m", proto.Reply, 7)
			require.NoError(t, body.EncodeBinary(bw))
			bin := bw.Size()
			// What writing the shape costs anyway: into a binary writer
			// that keeps nothing.
			base := allocDuring(func() {
				w := proto.NewBinaryWriter(make([]byte, 0, 64))
				w.SetLimit(1)
				require.NoError(t, body.EncodeBinary(w))
			})
			for _, lim := range []int{whole - 1, whole / 10, 200} {
				var fresh proto.JSONCodec
				dst := append(make([]byte, 0, 64), prefix...)
				var got []byte
				var err error
				alloc := allocDuring(func() {
					fresh.SetLimit(lim)
					got, err = fresh.AppendMessage(dst, "m", proto.Reply, 7, body)
				})
				var tl *proto.TooLargeError
				require.ErrorAs(t, err, &tl, "limit %d", lim)
				require.Equal(t, proto.TooLargeError{Size: lim, Limit: lim, More: true}, *tl)
				require.Equal(t, prefix, got, "dst unchanged")
				bound := base + uint64(boundFactor*lim+8<<10)
				if bin > lim && bin <= 4*lim {
					bound += uint64(bin) // the second pass's buffer
				}
				t.Logf("limit %d of %d (binary %d): %d bytes allocated, %d writing the shape", lim, whole, bin, alloc, base)
				require.Less(t, alloc, bound, "limit %d of %d", lim, whole)
			}

			// The limit holds for one encoding only.
			got, err = c.AppendMessage(append([]byte(nil), prefix...), "m", proto.Reply, 7, body)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// allocDuring is the memory f allocates.
func allocDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A JSON message far past its limit costs a bounded buffer whatever its
// size: 16 and 64 times the limit allocate under 8 times the limit (the
// server's bound, TestReplyNotBuiltPastRoom). Between the limit and four
// times it, the binary form is written a second time, into a buffer of
// its size, to find whether its JSON fits (logged).
func TestJSONLimitFarPast(t *testing.T) {
	const lim = 64 << 10
	items := make([]string, 64*lim/1024)
	for i := range items {
		items[i] = strings.Repeat("k", 1024)
	}
	allocFor := func(n int) uint64 {
		body := shapeStruct{"strings", func(w limWriter) {
			w.WriteListBegin(proto.STRING, n)
			for _, s := range items[:n] {
				w.WriteString(s)
			}
		}}
		var c proto.JSONCodec
		var err error
		alloc := allocDuring(func() {
			c.SetLimit(lim)
			_, err = c.AppendMessage(nil, "m", proto.Reply, 1, body)
		})
		require.ErrorIs(t, err, proto.ErrSizeLimit)
		return alloc
	}
	for _, times := range []int{2, 16, 64} {
		alloc := allocFor(times * lim / 1024)
		t.Logf("limit %d, message %dx: %d bytes allocated", lim, times, alloc)
		if times > 4 {
			require.Less(t, alloc, uint64(8*lim))
		}
	}
}
