package client_test

import (
	"context"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hatrpc/hatrpc/test/wiretest"
)

// BenchmarkMixed splits the latency between the two halves: a HatRPC
// client against Apache's server and Apache's client against a HatRPC
// server (both plain unframed binary).
func BenchmarkMixed(b *testing.B) {
	args := &wiretest.EchoArgs{Msg: "hello, benchmark"}
	b.Run("hatclient-apacheserver/seq", func(b *testing.B) {
		as, err := wiretest.StartApache(&wiretest.ApacheProcessor{}, false, false)
		if err != nil {
			b.Fatal(err)
		}
		defer as.Stop()
		c := dial(b, as.Addr)
		benchSeq(b, func(ctx context.Context) error { _, err := echo(ctx, c, args); return err })
		c.Close()
	})
	b.Run("apacheclient-hatserver/seq", func(b *testing.B) {
		ts := serve(b, "")
		conf := &thrift.TConfiguration{}
		tr := thrift.NewTBufferedTransport(thrift.NewTSocketConf(ts.addr, conf), 4096)
		if err := tr.Open(); err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		p := thrift.NewTBinaryProtocolConf(tr, conf)
		cl := thrift.NewTStandardClient(p, p)
		benchSeq(b, func(ctx context.Context) error { return apacheEcho(ctx, cl, args.Msg) })
	})
}
