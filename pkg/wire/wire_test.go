package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHeaderRoundTrip(t *testing.T) {
	cases := []Header{
		{Kind: KindCall, Seqid: 1, Timeout: time.Second},
		{Kind: KindReply, Flags: FlagCompact, Seqid: -5},
		{Kind: KindCancel, Seqid: 1 << 30},
		{Kind: KindGoAway},
	}
	for _, h := range cases {
		b := make([]byte, HeaderSize, HeaderSize+3)
		if h.Kind != KindCancel && h.Kind != KindGoAway {
			b = append(b, 1, 2, 3)
		}
		SealFrame(b, h.Kind, h.Flags, h.Seqid, h.Timeout)
		got, err := DecodeHeader(b, 1<<20)
		require.NoError(t, err)
		require.Equal(t, h.Kind, got.Kind)
		require.Equal(t, h.Seqid, got.Seqid)
		require.Equal(t, h.Timeout, got.Timeout)
		require.Equal(t, len(b)-HeaderSize, got.PayloadLen())
	}
}

func TestHeaderRejects(t *testing.T) {
	good := func() []byte {
		b := make([]byte, HeaderSize+4)
		SealFrame(b, KindCall, 0, 1, 0)
		return b
	}
	cases := []struct {
		name   string
		mutate func(b []byte) []byte
		large  bool
	}{
		{"short", func(b []byte) []byte { return b[:10] }, false},
		{"kind0", func(b []byte) []byte { b[4] = 0; return b }, false},
		{"kind14", func(b []byte) []byte { b[4] = byte(KindStreamJoin) + 1; return b }, false}, // 8-12 are the stream kinds, 13 a lane's join
		{"flags", func(b []byte) []byte { b[5] = 0x80; return b }, false},
		{"reserved", func(b []byte) []byte { b[7] = 1; return b }, false},
		{"length-short", func(b []byte) []byte { b[0], b[1], b[2], b[3] = 0, 0, 0, 3; return b }, false},
		{"negative-timeout", func(b []byte) []byte { b[12] = 0x80; return b }, false},
		{"2GiB", func(b []byte) []byte { b[0] = 0x7f; return b }, true},
		{"cancel-with-payload", func(b []byte) []byte { b[4] = byte(KindCancel); return b }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeHeader(tc.mutate(good()), 1<<20)
			require.ErrorIs(t, err, proto.ErrInvalidData)
			require.Equal(t, tc.large, IsTooLarge(err))
		})
	}
}

// nested is a struct exercising every wire type for scanner tests.
type nested struct{ depth int }

type anyWriter interface {
	WriteStructBegin()
	WriteStructEnd()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteBool(v bool)
	WriteI8(v int8)
	WriteI16(v int16)
	WriteI32(v int32)
	WriteI64(v int64)
	WriteDouble(v float64)
	WriteString(v string)
	WriteUUID(v [16]byte)
	WriteListBegin(elem proto.Type, n int)
	WriteSetBegin(elem proto.Type, n int)
	WriteMapBegin(key, val proto.Type, n int)
}

func (n *nested) enc(w anyWriter) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.BOOL, 1)
	w.WriteBool(true)
	w.WriteFieldBegin(proto.I8, 2)
	w.WriteI8(-3)
	w.WriteFieldBegin(proto.I16, 300)
	w.WriteI16(-300)
	w.WriteFieldBegin(proto.I32, 3)
	w.WriteI32(1 << 20)
	w.WriteFieldBegin(proto.I64, 4)
	w.WriteI64(-1 << 40)
	w.WriteFieldBegin(proto.DOUBLE, 5)
	w.WriteDouble(3.5)
	w.WriteFieldBegin(proto.STRING, 6)
	w.WriteString("hello")
	w.WriteFieldBegin(proto.UUID, 7)
	w.WriteUUID([16]byte{1, 2})
	w.WriteFieldBegin(proto.LIST, 8)
	w.WriteListBegin(proto.BOOL, 20)
	for i := range 20 {
		w.WriteBool(i%2 == 0)
	}
	w.WriteFieldBegin(proto.SET, 9)
	w.WriteSetBegin(proto.STRING, 2)
	w.WriteString("a")
	w.WriteString("b")
	w.WriteFieldBegin(proto.MAP, 10)
	w.WriteMapBegin(proto.I32, proto.STRUCT, 2)
	for i := range 2 {
		w.WriteI32(int32(i))
		w.WriteStructBegin()
		w.WriteFieldBegin(proto.BOOL, 1)
		w.WriteBool(false)
		w.WriteFieldStop()
		w.WriteStructEnd()
	}
	w.WriteFieldBegin(proto.MAP, 11)
	w.WriteMapBegin(proto.I32, proto.I32, 0)
	if n.depth > 0 {
		w.WriteFieldBegin(proto.STRUCT, 12)
		if err := (&nested{n.depth - 1}).enc(w); err != nil {
			return err
		}
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (n *nested) EncodeBinary(w *proto.BinaryWriter) error   { return n.enc(w) }
func (n *nested) EncodeCompact(w *proto.CompactWriter) error { return n.enc(w) }
func (n *nested) DecodeBinary(r *proto.BinaryReader) error   { return r.Skip(proto.STRUCT) }
func (n *nested) DecodeCompact(r *proto.CompactReader) error { return r.Skip(proto.STRUCT) }

func encode(t testing.TB, f Format, name string, seq int32, body proto.Struct) []byte {
	c := GetCodec()
	defer PutCodec(c)
	var b []byte
	if f.Framed {
		b = make([]byte, 4)
	}
	b, err := c.AppendMessage(b, f.Proto, name, proto.Call, seq, body)
	require.NoError(t, err)
	if f.Framed {
		n := len(b) - 4
		b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	}
	return b
}

var formats = []Format{{Proto: proto.Binary}, {Proto: proto.Binary, Framed: true}, {Proto: proto.Compact}, {Proto: proto.Compact, Framed: true},
	{Proto: proto.JSON}, {Proto: proto.JSON, Framed: true}}

func TestDetectAndReadMessage(t *testing.T) {
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			m1 := encode(t, f, "first", 7, &nested{depth: 3})
			m2 := encode(t, f, "second", -2, &nested{})
			br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(m1), bytes.NewReader(m2)), 16)
			got, err := Detect(br)
			require.NoError(t, err)
			require.Equal(t, f, got)
			for _, want := range []struct {
				msg  []byte
				name string
				seq  int32
			}{{m1, "first", 7}, {m2, "second", -2}} {
				msg, err := ReadMessage(br, f, nil, nil)
				require.NoError(t, err)
				if f.Framed {
					require.Equal(t, want.msg[4:], msg)
				} else {
					require.Equal(t, want.msg, msg)
				}
				h, err := ParseMsgHeader(f.Proto, msg)
				require.NoError(t, err)
				require.Equal(t, want.name, string(h.Name))
				require.Equal(t, want.seq, h.Seqid)
				require.Equal(t, proto.Call, h.Type)
				// The body is exactly one struct: proto's own skipper agrees.
				c := GetCodec()
				require.NoError(t, c.Decode(f.Proto, msg[h.Body:], nil, &nested{}))
				PutCodec(c)
			}
			_, err = ReadMessage(br, f, nil, nil)
			require.ErrorIs(t, err, io.EOF)
		})
	}
}

func TestReadMessageLimits(t *testing.T) {
	lim := &proto.Limits{MaxMessageSize: 64, MaxDepth: 2, MaxStringLength: 64, MaxContainerSize: 64}
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			deep := encode(t, f, "d", 1, &nested{depth: 3})
			_, err := ReadMessage(bufio.NewReader(bytes.NewReader(deep)), f, nil, lim)
			require.ErrorIs(t, err, proto.ErrInvalidData)
			// Truncated input is an unexpected EOF, not a hang or panic.
			_, err = ReadMessage(bufio.NewReader(bytes.NewReader(deep[:len(deep)/2])), f, nil, nil)
			require.Error(t, err)
		})
	}
}

// TestScannerVarint: the unframed scanner takes a varint exactly when
// encoding/binary (and so the compact decoder) does, and as many bytes.
func TestScannerVarint(t *testing.T) {
	ten := func(last byte) []byte {
		return append(bytes.Repeat([]byte{0xd6}, 9), last)
	}
	cases := []struct {
		name string
		in   []byte
	}{
		{"one byte", []byte{0x30}},
		{"two bytes", []byte{0x80, 0x01}},
		{"max uint64", binary.AppendUvarint(nil, math.MaxUint64)},
		{"ten bytes, tenth 1", ten(0x01)},
		{"ten bytes, tenth 0x30 (fuzzed)", ten(0x30)},
		{"ten bytes, tenth 2", ten(0x02)},
		{"eleven bytes", append(ten(0x81), 0x00)},
		{"truncated", []byte{0x80, 0x80}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, n := binary.Uvarint(tc.in)
			s := scanner{br: bufio.NewReader(bytes.NewReader(tc.in)), lim: fuzzLimits, charged: ChargeMin}
			got, err := s.varint()
			switch {
			case n > 0:
				require.NoError(t, err)
				require.Equal(t, want, got)
				require.Len(t, s.out, n)
			case n == 0:
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			default:
				require.ErrorIs(t, err, proto.ErrInvalidData)
			}
		})
	}
}

func TestDetectGarbage(t *testing.T) {
	cases := [][]byte{[]byte("GET / HTTP/1.1\r\n"), {0x80, 0x02, 0, 0}, {0, 0, 0, 5, 0x7f}}
	for _, b := range cases {
		_, err := Detect(bufio.NewReader(bytes.NewReader(b)))
		require.ErrorIs(t, err, ErrGarbage)
	}
}

func TestHelloRoundTrip(t *testing.T) {
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		c := GetCodec()
		for _, h := range []Hello{
			{Version: 1, Caps: CapFraming | CapRDMA, MaxFrame: 1 << 20},
			{Version: 1, Caps: CapFraming | CapSHM | CapAttach, MaxFrame: 9, Host: "boot-id",
				Attach: &Attach{Transport: "shm", Function: "S:f", ClientTransport: "auto", ClientProtocol: "rfp",
					RequestSize: 128 << 10, ResponseSize: 7}},
			{Version: 1, Caps: CapFraming, Plans: []Attach{{Function: "S:f", ClientTransport: "shm"}, {Function: "S:g"}}},
		} {
			msg, err := c.AppendMessage(nil, p, HelloMethod, proto.Call, 0, &h)
			require.NoError(t, err)
			mh, err := ParseMsgHeader(p, msg)
			require.NoError(t, err)
			var got Hello
			require.NoError(t, c.Decode(p, msg[mh.Body:], nil, &got))
			require.Equal(t, h, got)
		}

		for _, rep := range []HelloReply{
			{Version: 1, Caps: CapFraming, Transport: "tcp", MaxFrame: 7, ConflictFunction: "S:f", Conflict: "pinned"},
			{Version: 1, Caps: CapFraming | CapStreams | CapStreamWindows, Transport: "tcp", MaxFrame: 7,
				Windows:   StreamWindows{Messages: 8192, Bytes: 1 << 20, Conn: 16 << 20},
				FnWindows: []FnWindow{{Function: "S:tail", Messages: 512, Bytes: 64 << 10}, {Function: "tail", Messages: 512, Bytes: 64 << 10}}},
		} {
			msg, err := c.AppendMessage(nil, p, HelloMethod, proto.Reply, 0, &rep)
			require.NoError(t, err)
			mh, err := ParseMsgHeader(p, msg)
			require.NoError(t, err)
			var gotRep HelloReply
			require.NoError(t, c.Decode(p, msg[mh.Body:], nil, &gotRep))
			require.Equal(t, rep, gotRep)
		}
		bad := HelloReply{Version: 1, FnWindows: []FnWindow{{Function: "S:tail", Messages: 0, Bytes: 1024}}}
		msg, err := c.AppendMessage(nil, p, HelloMethod, proto.Reply, 0, &bad)
		require.NoError(t, err)
		mh, err := ParseMsgHeader(p, msg)
		require.NoError(t, err)
		require.EqualError(t, c.Decode(p, msg[mh.Body:], nil, &HelloReply{}), `proto: invalid data: stream window of 0 messages, 1024 bytes for "S:tail"`)
		var ae *proto.ApplicationException
		require.True(t, errors.As((&HelloReply{}).decode(proto.NewBinaryReader([]byte{0}, nil)), &ae))
		PutCodec(c)
	}
}

// syncBuf is a goroutine-safe sink that records write sizes.
type syncBuf struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	time.Sleep(50 * time.Microsecond) // a slow socket makes others queue
	return s.b.Write(p)
}

func TestWriterCoalescesAndKeepsFramesWhole(t *testing.T) {
	sink := &syncBuf{}
	w := NewWriter(sink, nil)
	const goroutines, per = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				require.NoError(t, w.Write(fmt.Appendf(nil, "<%d:%04d>", g, i)))
			}
		}()
	}
	wg.Wait()
	w.Wait()
	out := sink.b.String()
	for g := range goroutines {
		last := -1
		for i := range per {
			idx := bytes.Index([]byte(out), fmt.Appendf(nil, "<%d:%04d>", g, i))
			require.Greater(t, idx, last, "frames of one goroutine stay whole and in order")
			last = idx
		}
	}
	require.Less(t, sink.writes, goroutines*per, "concurrent frames were batched")
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriterStickyError(t *testing.T) {
	w := NewWriter(failWriter{}, nil)
	require.ErrorIs(t, w.Write([]byte("x")), io.ErrClosedPipe)
	require.ErrorIs(t, w.Write([]byte("y")), io.ErrClosedPipe)
	require.ErrorIs(t, w.Err(), io.ErrClosedPipe)
}

// blockingWriter blocks every Write until released, like a peer that
// stopped reading.
type blockingWriter struct {
	release chan struct{}
	n       atomic.Int64
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	b.n.Add(int64(len(p)))
	return len(p), nil
}

func TestWriterBoundsPending(t *testing.T) {
	bw := &blockingWriter{release: make(chan struct{})}
	w := NewWriter(bw, nil)
	frame := make([]byte, 1<<10)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Write(frame) }() // becomes the flusher, blocks
	var queued atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range (maxPending / len(frame)) * 2 {
				require.NoError(t, w.Write(frame))
				queued.Add(int64(len(frame)))
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	w.mu.Lock()
	pending := len(w.pending)
	w.mu.Unlock()
	require.LessOrEqual(t, pending, maxPending+len(frame), "pending grew past its bound")
	require.Less(t, queued.Load(), int64(4*2*maxPending), "writers were not held back")
	close(bw.release)
	wg.Wait()
	w.Wait()
	require.Equal(t, int64(len(frame)*(1+4*2*(maxPending/len(frame)))), bw.n.Load())
}

func TestSplitFrames(t *testing.T) {
	frame := func(kind Kind, n int) []byte {
		b := make([]byte, HeaderSize+n)
		SealFrame(b, kind, 0, 1, 0)
		return b
	}
	var batch []byte
	for _, n := range []int{0, 5, 100} {
		batch = append(batch, frame(KindCall, n)...)
	}
	got, err := SplitFrames(batch, 1<<20)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Len(t, got[2], HeaderSize+100)
	cases := map[string][]byte{
		"truncated": batch[:len(batch)-1],
		"nested":    frame(KindBatch, 0),
		"garbage":   []byte{1, 2, 3},
	}
	for name, b := range cases {
		_, err := SplitFrames(b, 1<<20)
		require.ErrorIs(t, err, proto.ErrInvalidData, name)
	}
}
