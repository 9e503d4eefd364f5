// Command scanstream measures issue 46's hatkv streamed scan against a
// running `hatkv serve`: every record read once by paging with Scan
// (10,000 a call) and once by ScanStream, records/s each, and the
// server's RSS (VmRSS, and VmHWM: the peak since the measurement began)
// before and after each. With -stall it opens a ScanStream and never
// reads it, to show the server stopping at the window. It is a
// measurement run, not a test.
//
//	hatkv serve --db DIR --listen 127.0.0.1:19090 --transport tcp --sync nosync --map-size 4GiB &
//	go run ./test/attack/scanstream --load 1000000              # records of 10 × 100 B, once
//	go run ./test/attack/scanstream --pid PID                   # paged, then streamed
//
// The client is hatkv's own, over TCP; both ways decode every record
// into its map, as any caller of the generated client does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	gen "github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/test/attack/internal/procstat"
	"github.com/hatrpc/hatrpc/test/attack/internal/records"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scanstream:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:19090", "hatkv serve's address")
	pid := flag.Int("pid", 0, "the server's pid (RSS)")
	load := flag.Int("load", 0, "load this many records of 10 fields × -vsize bytes, then exit")
	vsize := flag.Int("vsize", 100, "field size for -load")
	stall := flag.Duration("stall", 0, "open a ScanStream, read nothing for this long, report the server's RSS")
	only := flag.String("only", "", "paged or stream: run one way only (each in a fresh server compares them from the same start)")
	cpuprofile := flag.String("cpuprofile", "", "write the client's CPU profile of the scans to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	cl, err := hatkv.Dial(ctx, *addr, hatkv.WithClientTransport("tcp"))
	if err != nil {
		return err
	}
	defer cl.Close()
	kv := cl.KV()
	if *load > 0 {
		return loadRecords(ctx, kv, *load, *vsize)
	}
	if *pid == 0 {
		return errors.New("-pid is required")
	}
	if *stall > 0 {
		return stalled(ctx, kv, *pid, *stall)
	}
	for _, m := range []struct {
		name string
		scan func(context.Context, hatkv.KV) (int, error)
	}{{"paged Scan(10,000)", paged}, {"ScanStream", streamed}} {
		if *only != "" && !strings.Contains(strings.ToLower(m.name), *only) {
			continue
		}
		if err := procstat.ResetPeak(*pid); err != nil {
			return fmt.Errorf("resetting VmHWM (needs the server to be this user's): %w", err)
		}
		rss0, _ := procstat.Status(*pid)
		anon0 := rssAnon(*pid)
		peak := make(chan int64)
		stop := make(chan struct{})
		go func() { peak <- samplePeak(*pid, stop) }()
		start := time.Now()
		n, err := m.scan(ctx, kv)
		d := time.Since(start)
		close(stop)
		anonPeak := <-peak
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		rss1, hwm := procstat.Status(*pid)
		fmt.Printf("%-20s %9d records in %6.2f s: %9.0f records/s\n", m.name, n, d.Seconds(), float64(n)/d.Seconds())
		fmt.Printf("%-20s server VmRSS %d -> %d MiB, VmHWM %d MiB; RssAnon (heap, not the LMDB map) %d -> %d MiB, peak %d MiB (sampled every 20 ms)\n",
			"", rss0>>10, rss1>>10, hwm>>10, anon0>>10, rssAnon(*pid)>>10, anonPeak>>10)
	}
	return nil
}

func paged(ctx context.Context, kv hatkv.KV) (int, error) {
	n, start := 0, ""
	for {
		page, err := kv.Scan(ctx, start, 10000, nil)
		if err != nil {
			return n, err
		}
		if len(page) == 0 {
			return n, nil
		}
		n += len(page)
		start = page[len(page)-1].Key + "\x00"
	}
}

func streamed(ctx context.Context, kv hatkv.KV) (int, error) {
	st, err := kv.ScanStream(ctx, &gen.ScanRequest{})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		b, err := st.Recv()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += len(b.Records)
	}
}

func stalled(ctx context.Context, kv hatkv.KV, pid int, d time.Duration) error {
	if err := procstat.ResetPeak(pid); err != nil {
		return err
	}
	rss0, _ := procstat.Status(pid)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := kv.ScanStream(ctx, &gen.ScanRequest{}); err != nil {
		return err
	}
	time.Sleep(d)
	rss1, hwm := procstat.Status(pid)
	fmt.Printf("stalled ScanStream for %v: server VmRSS %d -> %d MiB, VmHWM %d MiB\n", d, rss0>>10, rss1>>10, hwm>>10)
	return nil
}

func loadRecords(ctx context.Context, kv hatkv.KV, n, vsize int) error {
	err := records.Load(ctx, kv, records.Spec{N: n, Batch: 1000, VSize: vsize, Fill: 'v',
		Key: func(i int) string { return fmt.Sprintf("user%08d", i) }})
	if err == nil {
		fmt.Printf("loaded %d records\n", n)
	}
	return err
}

// rssAnon is pid's anonymous resident memory in KiB (Go heap, stacks,
// C allocations; not the file-backed LMDB map), -1 if unreadable.
func rssAnon(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssAnon:" {
			var n int64
			_, _ = fmt.Sscan(f[1], &n)
			return n
		}
	}
	return -1
}

// samplePeak returns the largest rssAnon seen until stop closes.
func samplePeak(pid int, stop <-chan struct{}) int64 {
	peak := rssAnon(pid)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return max(peak, rssAnon(pid))
		case <-t.C:
			peak = max(peak, rssAnon(pid))
		}
	}
}
