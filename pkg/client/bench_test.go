package client_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// BenchmarkEcho compares a HatRPC client+server with Apache's Go client and
// TSimpleServer on loopback, one caller (latency) and 64 callers
// (throughput). ns/op of the par64 runs is wall time per call.
func BenchmarkEcho(b *testing.B) {
	args := &wiretest.EchoArgs{Msg: "hello, benchmark"}
	b.Run("hatrpc/seq", func(b *testing.B) {
		ts := serve(b, "")
		c := dial(b, ts.addr)
		benchSeq(b, func(ctx context.Context) error { _, err := echo(ctx, c, args); return err })
	})
	b.Run("hatrpc-plain/seq", func(b *testing.B) {
		ts := serve(b, "")
		c := dial(b, ts.addr, client.WithoutUpgrade())
		benchSeq(b, func(ctx context.Context) error { _, err := echo(ctx, c, args); return err })
	})
	b.Run("hatrpc/seq-4KiB", func(b *testing.B) {
		ts := serve(b, "")
		c := dial(b, ts.addr)
		a4 := &wiretest.EchoArgs{Msg: string(make([]byte, 4<<10))}
		benchSeq(b, func(ctx context.Context) error { _, err := echo(ctx, c, a4); return err })
	})
	b.Run("apache/seq-4KiB", func(b *testing.B) {
		_, cl, done := apacheSetup(b, 1)
		defer done()
		msg := string(make([]byte, 4<<10))
		benchSeq(b, func(ctx context.Context) error { return apacheEcho(ctx, cl[0], msg) })
	})
	b.Run("apache/seq", func(b *testing.B) {
		as, cl, done := apacheSetup(b, 1)
		defer done()
		_ = as
		benchSeq(b, func(ctx context.Context) error { return apacheEcho(ctx, cl[0], args.Msg) })
	})
	b.Run("hatrpc/par64", func(b *testing.B) {
		ts := serve(b, "")
		c := dial(b, ts.addr)
		benchPar(b, func(ctx context.Context, _ int) error { _, err := echo(ctx, c, args); return err })
	})
	big := &wiretest.EchoArgs{Msg: string(make([]byte, 128<<10))}
	b.Run("hatrpc/par64-128KiB", func(b *testing.B) {
		ts := serve(b, "")
		c := dial(b, ts.addr)
		b.SetBytes(int64(2 * len(big.Msg)))
		benchPar(b, func(ctx context.Context, _ int) error { _, err := echo(ctx, c, big); return err })
	})
	b.Run("apache/par64-128KiB", func(b *testing.B) {
		_, cl, done := apacheSetup(b, 64)
		defer done()
		b.SetBytes(int64(2 * len(big.Msg)))
		benchPar(b, func(ctx context.Context, id int) error { return apacheEcho(ctx, cl[id], big.Msg) })
	})
	b.Run("apache/par64", func(b *testing.B) {
		_, cl, done := apacheSetup(b, 64)
		defer done()
		benchPar(b, func(ctx context.Context, id int) error { return apacheEcho(ctx, cl[id], args.Msg) })
	})
}

// benchSeq runs calls one after another and reports latency percentiles,
// which survive a noisy machine better than the mean.
func benchSeq(b *testing.B, call func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if err := call(ctx); err != nil {
			b.Fatal(err)
		}
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(t0))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		b.ReportMetric(float64(lat[n/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[n*99/100].Nanoseconds()), "p99-ns")
	}
}

// benchPar runs b.N calls spread over 64 goroutines.
func benchPar(b *testing.B, call func(ctx context.Context, id int) error) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	const callers = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	b.ReportAllocs()
	w0 := wire.WriteSyscalls.Load()
	defer func() { b.ReportMetric(float64(wire.WriteSyscalls.Load()-w0)/float64(b.N), "writes/op") }()
	b.ResetTimer()
	for id := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := call(ctx, id); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func apacheSetup(b *testing.B, n int) (*wiretest.ApacheServer, []*thrift.TStandardClient, func()) {
	as, err := wiretest.StartApache(&wiretest.ApacheProcessor{}, false, false)
	if err != nil {
		b.Fatal(err)
	}
	conf := &thrift.TConfiguration{}
	var cls []*thrift.TStandardClient
	var trs []thrift.TTransport
	for range n {
		tr := thrift.NewTBufferedTransport(thrift.NewTSocketConf(as.Addr, conf), 4096)
		if err := tr.Open(); err != nil {
			b.Fatal(err)
		}
		p := thrift.NewTBinaryProtocolConf(tr, conf)
		cls = append(cls, thrift.NewTStandardClient(p, p))
		trs = append(trs, tr)
	}
	return as, cls, func() {
		for _, tr := range trs {
			tr.Close()
		}
		as.Stop()
	}
}

func apacheEcho(ctx context.Context, cl *thrift.TStandardClient, msg string) error {
	var res wiretest.ApacheEchoResult
	_, err := cl.Call(ctx, "echo", &wiretest.ApacheEchoArgs{Msg: msg}, &res)
	return err
}
