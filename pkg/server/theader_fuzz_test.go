package server_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// headerSeeds adds FuzzServe seeds for the header-carrying inputs: THeader
// frames (both protocols, headers, zlib) and a HatRPC frame with a header
// block after the handshake.
func headerSeeds(f *testing.F) {
	c := wire.GetCodec()
	defer wire.PutCodec(c)
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, z := range []bool{false, true} {
			h := wire.THeaderInfo{Seqid: 1, Proto: p, Info: metadata.MD{"k": "v", metadata.RequestIDKey: "r"}}
			b := wire.AppendTHeaderHead([]byte{0, 0, 0, 0}, &h, z)
			off := len(b)
			b, _ = c.AppendMessage(b, p, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "hi"})
			if z {
				b = wire.CompressTHeader(b, off)
			}
			n := len(b) - 4
			b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
			f.Add(append(b, b...))
			// The same inside Apache's TFramedTransport.
			outer := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
			outer = append(outer, b...)
			f.Add(append(outer, outer...))
		}
	}
	hello, _ := c.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Call, 0,
		&wire.Hello{Version: 1, Caps: wire.CapFraming | wire.CapHeaders})
	fr := wire.AppendHeaderBlock(make([]byte, wire.HeaderSize), metadata.MD{"traceparent": "00-x"})
	fr, _ = c.AppendMessage(fr, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "hi"})
	wire.SealFrame(fr, wire.KindCall, wire.FlagHeaders, 1, time.Second)
	f.Add(append(hello, fr...))
}
