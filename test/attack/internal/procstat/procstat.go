// Package procstat reads what the attack probes measure of a server
// process: resident memory from /proc/PID/status, open descriptors from
// /proc/PID/fd, goroutines from its Prometheus /metrics.
package procstat

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// Status returns VmRSS and VmHWM (the peak since the last ResetPeak) of
// pid in KiB, -1 each when unreadable.
func Status(pid int) (rssKiB, hwmKiB int64) {
	rssKiB, hwmKiB = -1, -1
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rssKiB = n
		case "VmHWM:":
			hwmKiB = n
		}
	}
	return rssKiB, hwmKiB
}

// RSS is pid's resident set in MB (-1 if unreadable).
func RSS(pid int) int64 {
	r, _ := Status(pid)
	if r < 0 {
		return r
	}
	return r >> 10
}

// ResetPeak starts VmHWM again from the current RSS (clear_refs 5; needs
// the right to write the process's /proc files).
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// FDs counts pid's open file descriptors (-1 if unreadable).
func FDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// Goroutines reads go_goroutines from the server's /metrics at debug
// (host:port), -1 if none.
func Goroutines(debug string) int64 {
	resp, err := http.Get("http://" + debug + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int64(n)
		}
	}
	return -1
}
