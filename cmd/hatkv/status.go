package main

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
)

// statusStamp is YCSB's status-line time format, milliseconds then
// follow after a colon (which Go's layouts do not take as a fraction).
const statusStamp = "2006-01-02 15:04:05"

// startStatus prints YCSB-style status lines (ycsb's -s) to w every
// `every` while a phase runs, and one for the rest of the phase when it
// stops: the time, the phase, seconds since the phase started, operations
// so far, the interval's ops/s and per operation the interval's count and
// latency in µs. Unlike the progress line they are whole lines, written
// whether w is a terminal or a log.
func startStatus(w io.Writer, every time.Duration, phase string, m *ycsb.Measurements, count *atomic.Int64) *progress {
	p := &progress{quit: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		last := start
		line := func(now time.Time) {
			fmt.Fprintln(w, statusLine(now, phase, now.Sub(start), count.Load(), m.Interval(now.Sub(last)), now.Sub(last)))
			last = now
		}
		for {
			select {
			case <-p.quit:
				line(time.Now())
				return
			case now := <-t.C:
				line(now)
			}
		}
	}()
	return p
}

// statusLine formats one status line; ops is the interval's summary per
// operation, over the interval ival.
func statusLine(now time.Time, phase string, since time.Duration, total int64, ops []ycsb.Summary, ival time.Duration) string {
	var n int64
	for _, s := range ops {
		n += s.Count + s.Errors
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%03d [%s] %.1f sec: %d operations; %.2f current ops/sec;",
		now.Format(statusStamp), now.Nanosecond()/1e6, phase, since.Seconds(), total, float64(n)/max(ival.Seconds(), 1e-9))
	for _, s := range ops {
		if s.Count > 0 {
			fmt.Fprintf(&b, " [%s: Count=%d, Max=%.0f, Min=%.0f, Avg=%.2f, 50=%.0f, 95=%.0f, 99=%.0f, 99.9=%.0f]",
				s.Operation, s.Count, s.MaxUs, s.MinUs, s.AvgUs, s.P50Us, s.P95Us, s.P99Us, s.P999Us)
		}
		if s.Errors > 0 {
			fmt.Fprintf(&b, " [%s-FAILED: Count=%d]", s.Operation, s.Errors)
		}
	}
	return b.String()
}
