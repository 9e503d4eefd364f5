package wire

import (
	"bufio"
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

func TestGetBufSize(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		large bool // served by the size-classed pool
	}{
		{"zero", 0, false},
		{"small", 4 << 10, false},
		{"just below", largeMin - 1, false},
		{"smallest large", largeMin, true},
		{"128KiB frame", 128<<10 + HeaderSize + 40, true},
		{"largest pooled", maxPooledBuf, true},
		{"beyond the pool", maxPooledBuf + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bp := GetBufSize(tt.n)
			require.NotNil(t, bp)
			assert.Empty(t, *bp)
			if tt.large {
				assert.GreaterOrEqual(t, cap(*bp), tt.n)
			}
			PutBuf(bp)
		})
	}
}

func TestLargePoolReusesAndBounds(t *testing.T) {
	const n = 100 << 10
	b := getLarge(n)
	require.GreaterOrEqual(t, cap(b), n)
	b = append(b, 1, 2, 3)
	putLarge(b)
	again := getLarge(n)
	assert.Equal(t, unsafeData(b), unsafeData(again), "the buffer just returned is handed out first")
	assert.Empty(t, again)
	putLarge(again)

	// A class never holds more than largePerClass buffers.
	held := make([][]byte, 0, largePerClass+8)
	for range largePerClass + 8 {
		held = append(held, make([]byte, 0, 7*largeStep))
	}
	for _, h := range held {
		putLarge(h)
	}
	lc := &largeClasses[7]
	lc.mu.Lock()
	assert.LessOrEqual(t, len(lc.bufs), largePerClass)
	lc.mu.Unlock()
	for range largePerClass + 8 {
		getLarge(7 * largeStep) // empty the class for the other tests
	}
	assert.LessOrEqual(t, largeHeld.Load(), int64(largeRetain))
}

func unsafeData(b []byte) *byte { return &b[:1][0] }

// collect runs a collection and waits for the pool's trim that follows it.
func collect(t *testing.T) {
	t.Helper()
	before := trims.Load()
	runtime.GC()
	require.Eventually(t, func() bool { return trims.Load() > before },
		5*time.Second, time.Millisecond, "no trim after a collection")
}

func classLen(c int) int {
	lc := &largeClasses[c]
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return len(lc.bufs)
}

// TestLargePoolTrimsToDemand: buffers nobody took for a whole collection
// cycle are dropped, those handed out during it are kept.
func TestLargePoolTrimsToDemand(t *testing.T) {
	const class = 11 // 176 KiB: no other test uses it
	size := class * largeStep
	tests := []struct {
		name     string
		put      int
		taken    int // handed out (and returned) between the two trims
		wantKept int
	}{
		{"idle buffers go", 6, 0, 0},
		{"buffers in use stay", 6, 4, 4},
		{"all in use, all stay", 5, 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trimOnce.Do(armTrim)
			collect(t) // start from a trimmed, empty class
			collect(t)
			require.Zero(t, classLen(class))
			for range tt.put {
				putLarge(make([]byte, 0, size))
			}
			collect(t) // marks what is held now
			got := make([][]byte, 0, tt.taken)
			for range tt.taken {
				got = append(got, getLarge(size))
			}
			for _, b := range got {
				putLarge(b)
			}
			collect(t) // drops what was not taken
			assert.Equal(t, tt.wantKept, classLen(class))
			for range classLen(class) {
				getLarge(size) // leave the class empty
			}
		})
	}
}

// TestReadFrameLargeUsesPool checks a large frame is read whole into a
// pooled buffer and a small destination goes back to the small pool.
func TestReadFrameLargeUsesPool(t *testing.T) {
	payload := bytes.Repeat([]byte{0xab}, 200<<10)
	frame := make([]byte, HeaderSize, HeaderSize+len(payload))
	frame = append(frame, payload...)
	SealFrame(frame, KindCall, 0, 7, 0)
	br := bufio.NewReaderSize(bytes.NewReader(frame), 16<<10)
	h, got, err := ReadFrame(br, make([]byte, 0, 4096), 1<<20)
	require.NoError(t, err)
	assert.Equal(t, int32(7), h.Seqid)
	assert.Equal(t, frame, got)
	assert.GreaterOrEqual(t, cap(got), len(frame))
}

// TestReadFrameFrom reads frames of every size class through a bufio
// reader over raw, the large ones partly from raw directly, and checks
// each frame and that the stream stays in step (nothing read past a
// frame from raw).
func TestReadFrameFrom(t *testing.T) {
	frame := func(n int, seq int32) []byte {
		f := make([]byte, HeaderSize, HeaderSize+n)
		for i := range n {
			f = append(f, byte(i*7+int(seq)))
		}
		SealFrame(f, KindCall, 0, seq, 0)
		return f
	}
	tests := []struct {
		name  string
		sizes []int
		chunk int // raw returns at most this much per Read (0: all it can)
	}{
		{"small frames only", []int{10, 4 << 10, 100}, 0},
		{"large after small", []int{100, 128 << 10, 64}, 0},
		{"large frames back to back", []int{128 << 10, 200 << 10, 40 << 10}, 0},
		{"large frames in short reads", []int{128 << 10, 33 << 10, 128 << 10}, 1500},
		{"frame exactly buffered", []int{16<<10 - HeaderSize, 64 << 10}, 0},
		{"small frames in short reads", []int{10, 300, 0, 4 << 10}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stream []byte
			var want [][]byte
			for i, n := range tt.sizes {
				f := frame(n, int32(i+1))
				want = append(want, f)
				stream = append(stream, f...)
			}
			var raw io.Reader = bytes.NewReader(stream)
			if tt.chunk > 0 {
				raw = &shortReader{r: raw, max: tt.chunk}
			}
			br := bufio.NewReaderSize(raw, 16<<10)
			for i, w := range want {
				h, got, err := ReadFrameFrom(br, raw, nil, 1<<20)
				require.NoError(t, err, "frame %d", i)
				assert.Equal(t, int32(i+1), h.Seqid)
				require.Equal(t, w, got, "frame %d", i)
			}
			_, _, err := ReadFrameFrom(br, raw, nil, 1<<20)
			assert.ErrorIs(t, err, io.EOF)
		})
	}
}

// shortReader returns at most max bytes per Read.
type shortReader struct {
	r   io.Reader
	max int
}

func (s *shortReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.max)]) }

// TestDecodeAliasedAdopt decodes a large binary field by aliasing, hands
// the buffer to Adopt and checks the decoded bytes survive the buffer's
// return to the pool: it may be reused only once nothing refers to it.
func TestDecodeAliasedAdopt(t *testing.T) {
	tests := []struct {
		name string
		p    proto.Protocol
	}{{"binary", proto.Binary}, {"compact", proto.Compact}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := bytes.Repeat([]byte{0x5a}, 64<<10)
			codec := GetCodec()
			bp := GetBufSize(len(want) + 64)
			body := appendBinaryStruct(tt.p, (*bp)[:0], want)
			*bp = body
			var got binStruct
			require.NoError(t, codec.DecodeAliased(tt.p, body, &proto.DefaultLimits, &got))
			Adopt(bp)
			PutCodec(codec) // drops the codec's reference to the buffer
			assert.Nil(t, *bp, "Adopt clears the holder")
			assert.Equal(t, want, got.v)

			// Churn the pool: the aliased buffer must not be handed out
			// (and overwritten) while got.v refers to it.
			n := len(body)
			for range 3 {
				runtime.GC()
				b := getLarge(n)
				b = append(b, bytes.Repeat([]byte{0xff}, n)...)
				putLarge(b)
			}
			assert.Equal(t, want, got.v)
			runtime.KeepAlive(got.v)

			// Without a reference the finalizer brings it back. (Noted by
			// the finalizer itself: the pool's byte count also drops
			// whenever a collection trims it, here the churned buffers,
			// and other tests' adopted buffers may come back meanwhile.)
			addr := uintptr(unsafe.Pointer(unsafe.SliceData(body))) // where the buffer starts; got.v is inside it
			got.v = nil
			// Finalizers run on their own goroutine after a collection:
			// bounded by time, not a count of collections, so a loaded
			// machine only makes it take longer.
			for deadline := time.Now().Add(10 * time.Second); adopted.Load() != addr && time.Now().Before(deadline); {
				runtime.GC()
				time.Sleep(time.Millisecond)
			}
			assert.Equal(t, addr, adopted.Load(), "the adopted buffer returned to the pool")
		})
	}
}

// binStruct is a struct { 1: binary v } for the aliasing tests.
type binStruct struct{ v []byte }

func appendBinaryStruct(p proto.Protocol, dst, v []byte) []byte {
	if p == proto.Compact {
		w := proto.NewCompactWriter(dst)
		w.WriteFieldBegin(proto.STRING, 1)
		w.WriteBinary(v)
		w.WriteFieldStop()
		return w.Bytes()
	}
	w := proto.NewBinaryWriter(dst)
	w.WriteFieldBegin(proto.STRING, 1)
	w.WriteBinary(v)
	w.WriteFieldStop()
	return w.Bytes()
}

func (s *binStruct) EncodeBinary(w *proto.BinaryWriter) error {
	w.WriteFieldBegin(proto.STRING, 1)
	w.WriteBinary(s.v)
	w.WriteFieldStop()
	return nil
}

func (s *binStruct) EncodeCompact(w *proto.CompactWriter) error {
	w.WriteFieldBegin(proto.STRING, 1)
	w.WriteBinary(s.v)
	w.WriteFieldStop()
	return nil
}

func (s *binStruct) DecodeBinary(r *proto.BinaryReader) error {
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil || t == proto.STOP {
			return err
		}
		if id == 1 && t == proto.STRING {
			if s.v, err = r.ReadBinary(); err != nil {
				return err
			}
			continue
		}
		if err := r.Skip(t); err != nil {
			return err
		}
	}
}

func (s *binStruct) DecodeCompact(r *proto.CompactReader) error {
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil || t == proto.STOP {
			return err
		}
		if id == 1 && t == proto.STRING {
			if s.v, err = r.ReadBinary(); err != nil {
				return err
			}
			continue
		}
		if err := r.Skip(t); err != nil {
			return err
		}
	}
}

func TestSizeHint(t *testing.T) {
	var h SizeHint
	tests := []struct {
		name    string
		size    int // noted before Buf
		minCap  int // Buf's capacity is at least this
		largeOK bool
	}{
		{"zero value", 0, 0, false},
		{"small message", 1 << 10, 0, false},
		{"large message", 200 << 10, 200 << 10, true},
		{"capped size", 1 << 40, 0, false}, // beyond any pool: a plain buffer
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.size > 0 {
				h.Note(tt.size)
			}
			bp := h.Buf()
			require.NotNil(t, bp)
			assert.Empty(t, *bp)
			assert.GreaterOrEqual(t, cap(*bp), tt.minCap)
			PutBuf(bp)
		})
	}
	h.Note(1 << 40)
	assert.Equal(t, int32(1<<30), h.n.Load(), "sizes saturate instead of wrapping")
}

// Max follows a larger message at once and decays towards smaller ones:
// an eighth of the way per message, reaching a steady size exactly.
func TestSizeHintMaxDecays(t *testing.T) {
	var h SizeHint
	assert.Zero(t, h.Max())
	h.Note(1000)
	assert.Equal(t, 1000, h.Max())
	h.Note(400_000)
	assert.Equal(t, 400_000, h.Max(), "a larger message raises it at once")
	h.Note(1000)
	assert.Equal(t, 400_000-(399_000+7)/8, h.Max(), "an eighth of the way down")
	prev := h.Max()
	for i := range 40 {
		h.Note(1000)
		require.Less(t, h.Max(), prev, "note %d", i)
		prev = h.Max()
	}
	assert.Less(t, h.Max(), 3000, "40 small messages later, the large one weighs less than 2 KB")
	for range 100 {
		h.Note(1000)
	}
	assert.Equal(t, 1000, h.Max(), "a steady size is reached exactly")
	h.Note(1500)
	assert.Equal(t, 1500, h.Max())
}

func TestReleaseCopiedGoesBackToThePool(t *testing.T) {
	bp := GetBufSize(largeMin)
	data := unsafe.SliceData((*bp)[:1])
	Release(bp, false)
	assert.Nil(t, *bp, "the caller no longer holds the buffer")
	again := getLarge(largeMin) // LIFO: the buffer just released
	assert.Same(t, data, unsafe.SliceData(again[:1]))
}

// TestDecodeAfterAliased: a codec that decoded by aliasing copies again
// on its next plain Decode (each decode sets the reader's aliasing).
func TestDecodeAfterAliased(t *testing.T) {
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		t.Run(p.String(), func(t *testing.T) {
			codec := GetCodec()
			defer PutCodec(codec)
			body := appendBinaryStruct(p, nil, []byte("aliased"))
			var got binStruct
			require.NoError(t, codec.DecodeAliased(p, body, &proto.DefaultLimits, &got))
			body[len(body)-2] ^= 0xff // inside the value: an alias sees it
			assert.NotEqual(t, []byte("aliased"), got.v)

			body = appendBinaryStruct(p, nil, []byte("copied"))
			require.NoError(t, codec.Decode(p, body, &proto.DefaultLimits, &got))
			clear(body)
			assert.Equal(t, []byte("copied"), got.v)
		})
	}
}

func TestSizeHintLarge(t *testing.T) {
	for _, tc := range []struct {
		size  int
		large bool
	}{{0, false}, {512, false}, {largeMin - 1, false}, {largeMin, true}, {maxPooledBuf, true}, {maxPooledBuf + 1, false}} {
		var h SizeHint
		h.Note(tc.size)
		assert.Equal(t, tc.large, h.Large(), "size %d", tc.size)
		b := h.Buf()
		assert.Equal(t, !tc.large, Small(b), "size %d: Buf's buffer is large exactly when Large", tc.size)
		PutBuf(b)
	}
}
