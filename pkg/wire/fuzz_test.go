package wire

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

var fuzzLimits = &proto.Limits{MaxMessageSize: 1 << 16, MaxDepth: 16, MaxStringLength: 1 << 12, MaxContainerSize: 1 << 12}

func FuzzDecodeHeader(f *testing.F) {
	b := make([]byte, HeaderSize+2)
	SealFrame(b, KindCall, FlagCompact, 9, 5)
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := DecodeHeader(in, 1<<16)
		if err != nil {
			return
		}
		if h.PayloadLen() < 0 || h.PayloadLen() > 1<<16 {
			t.Fatalf("accepted payload length %d", h.PayloadLen())
		}
		out := make([]byte, HeaderSize)
		PutHeader(out, &h)
		if !bytes.Equal(out, in[:HeaderSize]) {
			t.Fatalf("re-encoded header %x != %x", out, in[:HeaderSize])
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	b := make([]byte, HeaderSize+3)
	SealFrame(b, KindReply, 0, 1, 0)
	f.Add(append(b, b...))
	big := make([]byte, HeaderSize+largeMin+5)
	SealFrame(big, KindCall, 0, 2, 0)
	f.Add(append(append(big, b...), big...))
	f.Fuzz(func(t *testing.T, in []byte) {
		// ReadFrame and ReadFrameFrom (large frames partly read from the
		// raw reader) must see the same frames and the same end.
		// ReadFrameCharged asks for each large frame's size once, before
		// reading it, and otherwise reads the same.
		br := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		raw := bytes.NewReader(in)
		br2 := bufio.NewReaderSize(raw, 4096)
		raw3 := bytes.NewReader(in)
		br3 := bufio.NewReaderSize(raw3, 4096)
		// A byte a read: a frame is never buffered whole before it is
		// read, where the readers above (the input in one buffer) mostly
		// find it whole.
		br4 := bufio.NewReaderSize(iotest.OneByteReader(bytes.NewReader(in)), 4096)
		br5 := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		for {
			h, fr, err := ReadFrame(br, nil, 1<<17)
			h2, fr2, err2 := ReadFrameFrom(br2, raw, nil, 1<<17)
			if (err == nil) != (err2 == nil) || err == nil && (h != h2 || !bytes.Equal(fr, fr2)) {
				t.Fatalf("ReadFrame %v %v, ReadFrameFrom %v %v", h, err, h2, err2)
			}
			charged := 0
			h3, fr3, err3 := ReadFrameCharged(br3, raw3, nil, 1<<17, func(n int) error { charged += n; return nil })
			if (err == nil) != (err3 == nil) || err == nil && (h != h3 || !bytes.Equal(fr, fr3)) {
				t.Fatalf("ReadFrame %v %v, ReadFrameCharged %v %v", h, err, h3, err3)
			}
			h4, fr4, err4 := ReadFrame(br4, nil, 1<<17)
			if (err == nil) != (err4 == nil) || err == nil && (h != h4 || !bytes.Equal(fr, fr4)) {
				t.Fatalf("ReadFrame %v %v, from a byte at a time %v %v", h, err, h4, err4)
			}
			// As a server reads a burst: the header decoded from what is
			// buffered, the frame taken whole when it is all there.
			h5, fr5, err5 := takeOrRead(br5)
			if (err == nil) != (err5 == nil) || err == nil && (h != h5 || !bytes.Equal(fr, fr5)) {
				t.Fatalf("ReadFrame %v %v, TakeFrame %v %v", h, err, h5, err5)
			}
			if err != nil {
				return
			}
			if len(fr) != HeaderSize+h.PayloadLen() {
				t.Fatalf("frame of %d bytes for header length %d", len(fr), h.Length)
			}
			if want := len(fr) * bool2int(len(fr) >= ChargeMin); charged != want {
				t.Fatalf("charged %d for a frame of %d bytes", charged, len(fr))
			}
		}
	})
}

// takeOrRead reads br's next frame as the server's reader does: TakeFrame
// when DecodeHeader finds it buffered whole, else ReadFrameCharged.
func takeOrRead(br *bufio.Reader) (Header, []byte, error) {
	if n := br.Buffered(); n >= HeaderSize {
		hb, _ := br.Peek(HeaderSize)
		if h, err := DecodeHeader(hb, 1<<17); err == nil && n >= HeaderSize+h.PayloadLen() {
			fr, err := TakeFrame(br, &h, nil, nil)
			return h, fr, err
		}
	}
	return ReadFrameCharged(br, nil, nil, 1<<17, nil)
}

func FuzzHello(f *testing.F) {
	c := GetCodec()
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		m, _ := c.AppendMessage(nil, p, HelloMethod, proto.Call, 0, &Hello{Version: 1, Caps: CapFraming, MaxFrame: 100})
		f.Add(m, p == proto.Compact)
		m, _ = c.AppendMessage(nil, p, HelloMethod, proto.Call, 0, &Hello{Version: 1, Caps: CapAttach, Host: "h",
			Attach: &Attach{Transport: "shm", Function: "S:f"}, Plans: []Attach{{Function: "S:g"}}})
		f.Add(m, p == proto.Compact)
		m, _ = c.AppendMessage(nil, p, HelloMethod, proto.Reply, 0, &HelloReply{Version: 1, Caps: 1, Transport: "tcp"})
		f.Add(m, p == proto.Compact)
	}
	PutCodec(c)
	f.Fuzz(func(t *testing.T, in []byte, compact bool) {
		p := proto.Binary
		if compact {
			p = proto.Compact
		}
		mh, err := ParseMsgHeader(p, in)
		if err != nil {
			return
		}
		if mh.Body < 0 || mh.Body > len(in) {
			t.Fatalf("body offset %d out of %d", mh.Body, len(in))
		}
		c := GetCodec()
		defer PutCodec(c)
		var h Hello
		if err := c.Decode(p, in[mh.Body:], fuzzLimits, &h); err == nil {
			// A decoded hello re-encodes and decodes to the same value.
			m, err := c.AppendMessage(nil, p, HelloMethod, proto.Call, 0, &h)
			if err != nil {
				t.Fatal(err)
			}
			mh2, _ := ParseMsgHeader(p, m)
			var h2 Hello
			if err := c.Decode(p, m[mh2.Body:], fuzzLimits, &h2); err != nil || !reflect.DeepEqual(h2, h) {
				t.Fatalf("hello round trip: %v %+v %+v", err, h, h2)
			}
		}
		var r HelloReply
		_ = c.Decode(p, in[mh.Body:], fuzzLimits, &r)
	})
}

// FuzzReadMessage checks the unframed scanner against proto's own skipper:
// whatever the scanner accepts as one message, proto can skip exactly.
func FuzzReadMessage(f *testing.F) {
	for _, fm := range formats {
		c := GetCodec()
		var b []byte
		if fm.Framed {
			b = make([]byte, 4)
		}
		b, _ = c.AppendMessage(b, fm.Proto, "m", proto.Call, 3, &nested{depth: 1})
		PutCodec(c)
		if fm.Framed {
			n := len(b) - 4
			b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		}
		f.Add(b, fm.Proto == proto.Compact, fm.Framed)
	}
	f.Fuzz(func(t *testing.T, in []byte, compact, framed bool) {
		fm := Format{Proto: proto.Binary, Framed: framed}
		if compact {
			fm.Proto = proto.Compact
		}
		br := bufio.NewReader(bytes.NewReader(in))
		msg, err := ReadMessage(br, fm, nil, fuzzLimits)
		// Charged, the same message, with at least its bytes admitted.
		charged := 0
		msg2, err2 := ReadMessageCharged(bufio.NewReader(bytes.NewReader(in)), fm, nil, fuzzLimits,
			func(n int) error { charged += n; return nil })
		if (err == nil) != (err2 == nil) || !bytes.Equal(msg, msg2) {
			t.Fatalf("ReadMessage %d bytes %v, ReadMessageCharged %d bytes %v", len(msg), err, len(msg2), err2)
		}
		if err == nil && len(msg) >= ChargeMin && charged < len(msg) {
			t.Fatalf("charged %d for a message of %d bytes", charged, len(msg))
		}
		if err != nil || framed {
			return
		}
		if len(msg) > len(in) || !bytes.Equal(msg, in[:len(msg)]) {
			t.Fatalf("scanner returned bytes that are not a prefix of the input")
		}
		mh, err := ParseMsgHeader(fm.Proto, msg)
		if err != nil {
			t.Fatalf("scanner accepted a message whose header does not parse: %v", err)
		}
		var pos int
		var serr error
		if compact {
			r := proto.NewCompactReader(msg[mh.Body:], fuzzLimits)
			serr, pos = r.Skip(proto.STRUCT), r.Pos()
		} else {
			r := proto.NewBinaryReader(msg[mh.Body:], fuzzLimits)
			serr, pos = r.Skip(proto.STRUCT), r.Pos()
		}
		if serr != nil || mh.Body+pos != len(msg) {
			t.Fatalf("scanner and proto disagree: scanner %d bytes, proto skip %d (+%d) err %v", len(msg), pos, mh.Body, serr)
		}
	})
}

// FuzzSplitFrames: a batch payload never panics the splitter, and what it
// accepts re-joins to the input.
func FuzzSplitFrames(f *testing.F) {
	one := make([]byte, HeaderSize+3)
	SealFrame(one, KindCall, 0, 1, 0)
	f.Add(append(append([]byte{}, one...), one...))
	f.Add([]byte{0, 0, 0, 16, 7})
	f.Fuzz(func(t *testing.T, in []byte) {
		frames, err := SplitFrames(in, 1<<16)
		if err != nil {
			return
		}
		if joined := bytes.Join(frames, nil); !bytes.Equal(joined, in) {
			t.Fatalf("split %x re-joins to %x", in, joined)
		}
	})
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}
