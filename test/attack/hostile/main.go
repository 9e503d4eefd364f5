// Command hostile sends issue 42's hostile inputs (wiretest.HostileInputs:
// truncated and 10,000-deep JSON, HTTP bodies over the message limit,
// chunked bodies that never end, zlib bombs on the socket and in THeader)
// to a running `hatkv serve`, one connection each, and prints a markdown
// table: what the client saw, whether the server closed the connection,
// what the server logged, its RSS before / peak / after (VmRSS, VmHWM
// reset before each case), goroutines and open descriptors before and
// after. It is a measurement run, not a test (pkg/server's
// TestHostileInputClosed is the test).
//
//	hatkv serve --db DIR --listen 127.0.0.1:19090 --debug-addr 127.0.0.1:19091 --transport tcp 2>server.log &
//	go run ./test/attack/hostile --pid PID --log server.log
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/test/attack/internal/procstat"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, debug, log, only string
	method                 string
	pid                    int
	limit                  int
	timeout, settle        time.Duration
}

func run() error {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:19090", "hatkv serve's address")
	flag.StringVar(&c.debug, "debug", "127.0.0.1:19091", "hatkv serve's --debug-addr (goroutine counts)")
	flag.StringVar(&c.log, "log", "", "the server's log file: the lines each case adds are shown")
	flag.StringVar(&c.method, "method", "Get", "the method the calls name (one the server has)")
	flag.StringVar(&c.only, "case", "", "run only the cases whose name contains this")
	flag.IntVar(&c.pid, "pid", 0, "the server's pid (RSS, descriptors)")
	flag.IntVar(&c.limit, "limit", proto.DefaultLimits.MaxMessageSize, "the server's message size limit (the bombs inflate past it)")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long a case waits for the server to close")
	flag.DurationVar(&c.settle, "settle", 5*time.Second, "how long after a case before the 'after' figures")
	flag.Parse()
	if c.pid == 0 {
		return fmt.Errorf("-pid is required")
	}
	lim := proto.DefaultLimits
	lim.MaxMessageSize = c.limit
	fmt.Println("| case | sent | client sees | closed | server logs | RSS MB before / peak / after | goroutines before / after | fds before / after |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, h := range wiretest.HostileInputs(lim, c.method) {
		if !strings.Contains(h.Name, c.only) {
			continue
		}
		if err := probe(c, h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}

func probe(c config, h wiretest.Hostile) error {
	rssBefore, _ := procstat.Status(c.pid)
	gBefore, fdBefore := procstat.Goroutines(c.debug), procstat.FDs(c.pid)
	if err := procstat.ResetPeak(c.pid); err != nil {
		return err
	}
	logFrom := fileSize(c.log)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // VmHWM is the peak; sampling too covers a kernel without clear_refs
		defer close(sampled)
		for {
			r, _ := procstat.Status(c.pid)
			peak.Store(max(peak.Load(), r))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t0 := time.Now()
	res, err := wiretest.SendHostile(c.addr, h, c.timeout)
	took := time.Since(t0)
	close(stop)
	<-sampled
	if err != nil {
		return err
	}
	_, hwm := procstat.Status(c.pid)
	time.Sleep(c.settle)
	rssAfter, _ := procstat.Status(c.pid)
	gAfter, fdAfter := procstat.Goroutines(c.debug), procstat.FDs(c.pid)
	closed := fmt.Sprintf("yes, %v (%v)", took.Round(time.Millisecond), res.Err)
	if !res.Closed {
		closed = fmt.Sprintf("no: open after %v", c.timeout)
	}
	sent := fmt.Sprintf("%d B", len(h.Head))
	if h.Tail != nil {
		sent += " + endless"
	}
	fmt.Printf("| %s | %s | %s | %s | %s | %d / %d / %d | %d / %d | %d / %d |\n",
		h.Name, sent, cell(res.Summary()), closed, cell(newLog(c.log, logFrom)),
		rssBefore>>10, max(hwm, peak.Load())>>10, rssAfter>>10, gBefore, gAfter, fdBefore, fdAfter)
	return nil
}

func fileSize(name string) int64 {
	fi, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// newLog is what the server logged since offset from.
func newLog(name string, from int64) string {
	if name == "" {
		return "-"
	}
	b, err := os.ReadFile(name)
	if err != nil || int64(len(b)) <= from {
		return "(nothing)"
	}
	return strings.TrimSpace(string(b[from:]))
}

// cell makes s fit a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\n", " ⏎ "), "|", "\\|")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
