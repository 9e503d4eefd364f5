package testutil

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// ListenQueue describes addr's listening socket as the kernel sees it
// (/proc/net/tcp and tcp6): how many connections wait in its accept queue
// and the queue's bound. A test that finds a server not accepting says
// with it whether the connections reached the server's queue at all.
func ListenQueue(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "listen queue: " + err.Error()
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "listen queue: " + err.Error()
	}
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// sl local rem st tx_queue:rx_queue: a listener's rx_queue
			// is its accept queue, tx_queue the queue's bound.
			if len(fs) < 5 || fs[3] != "0A" || !strings.HasSuffix(fs[1], want) {
				continue
			}
			q := strings.SplitN(fs[4], ":", 2)
			if len(q) != 2 {
				continue
			}
			n, _ := strconv.ParseInt(q[1], 16, 64)
			bound, _ := strconv.ParseInt(q[0], 16, 64)
			return fmt.Sprintf("listen queue of %s: %d waiting (bound %d)", addr, n, bound)
		}
	}
	return "listen queue of " + addr + ": no listening socket"
}

// Describe is what a test that finds the server not accepting or not
// serving needs in its failure message: the listen queue, the server's
// connection gauge and refusal counters, and this process's goroutines.
func (r *Running) Describe(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(ListenQueue(r.Addr))
	mfs, err := r.Srv.Registry().Gather()
	if err != nil {
		return b.String() + "; metrics: " + err.Error()
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "hatrpc_server_connections", "hatrpc_server_rejected_total":
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			fmt.Fprintf(&b, "; %s", mf.GetName())
			for _, l := range m.GetLabel() {
				fmt.Fprintf(&b, " %s=%s", l.GetName(), l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if c := m.GetCounter(); c != nil {
				v = c.GetValue()
			}
			fmt.Fprintf(&b, ": %v", v)
		}
	}
	fmt.Fprintf(&b, "; goroutines %d", runtime.NumGoroutine())
	return b.String()
}
