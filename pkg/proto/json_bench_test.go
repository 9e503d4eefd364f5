package proto_test

import (
	"context"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// BenchmarkJSON is what TJSONProtocol costs: a whole message (header and
// struct) of each workload encoded and decoded in binary, in JSON through
// JSONCodec (binary plus the transcoding), and in JSON by Apache's Go
// library, each with a reused codec.
func BenchmarkJSON(b *testing.B) {
	ctx := context.Background()
	for _, wl := range workloads() {
		for _, p := range []proto.Protocol{proto.Binary, proto.JSON} {
			var enc proto.Encoder
			msg, err := enc.Encode(p, nil, "call", proto.Call, 1, wl.val)
			require.NoError(b, err)
			b.Run(wl.name+"/encode/"+p.String(), func(b *testing.B) {
				buf := make([]byte, 0, 2*len(msg))
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				for b.Loop() {
					_, _ = enc.Encode(p, buf, "call", proto.Call, 1, wl.val)
				}
			})
			b.Run(wl.name+"/decode/"+p.String(), func(b *testing.B) {
				d := proto.NewDecoder(nil)
				s := wl.fresh()
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.Begin(p, msg); err != nil {
						b.Fatal(err)
					}
					if err := d.ReadBody(s); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(wl.name+"/encode/json-apache", func(b *testing.B) {
			mb := thrift.NewTMemoryBufferLen(64 << 10)
			ap := thrift.NewTJSONProtocol(mb)
			b.ReportAllocs()
			for b.Loop() {
				mb.Reset()
				_ = ap.WriteMessageBegin(ctx, "call", thrift.CALL, 1)
				_ = wl.apW(ctx, ap)
				_ = ap.WriteMessageEnd(ctx)
				_ = ap.Flush(ctx)
			}
			b.SetBytes(int64(mb.Len()))
		})
	}
}
