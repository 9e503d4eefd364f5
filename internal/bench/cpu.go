package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's utime and stime: 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuSample is the user+sys CPU time of this process and, when known, of
// the server process, at one instant.
type cpuSample struct {
	client, server time.Duration
	serverOK       bool
}

// sampleCPU reads this process's rusage and serverPID's /proc stat (0: no
// server). CPU time is far less sensitive to other load on a shared
// machine than calls/s, so it is what A/B comparisons lean on.
func sampleCPU(serverPID int) cpuSample {
	s := cpuSample{client: SelfCPU()}
	if serverPID > 0 {
		s.server, s.serverOK = ProcCPU(serverPID)
	}
	return s
}

// SelfCPU is this process's user+sys CPU time so far (rusage).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcCPU returns utime+stime of pid from /proc/<pid>/stat (10 ms ticks).
func ProcCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parseProcStat(b)
}

// parseProcStat reads fields 14 and 15 (utime, stime). The command name
// (field 2) is in parentheses and may hold spaces, so fields are counted
// from the last ')'.
func parseProcStat(b []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// CPUPerCall is the client's and server's CPU time per measured call
// (zero when not measured).
func (r ThroughputResult) CPUPerCall() (client, server time.Duration) {
	if r.Calls <= 0 {
		return 0, 0
	}
	return r.ClientCPU / time.Duration(r.Calls), r.ServerCPU / time.Duration(r.Calls)
}

// writeCPU prints the CPU per call of every system that measured it.
func writeCPU(w io.Writer, systems []string, tput []ThroughputRow) error {
	have := false
	for _, r := range tput {
		for _, v := range r.By {
			have = have || v.ServerCPU > 0
		}
	}
	if !have {
		return nil
	}
	fmt.Fprintln(w, "\nCPU per call in µs, client+server user+sys over the measured window (best run)")
	return writePointTable(w, systems, tput, func(r ThroughputRow) []string {
		cells := make([]string, len(systems))
		for i, s := range systems {
			cells[i] = "-"
			if v, ok := r.By[s]; ok && v.ServerCPU > 0 {
				c, sv := v.CPUPerCall()
				cells[i] = fmt.Sprintf("%s (%s+%s)", us(c+sv), us(c), us(sv))
			}
		}
		return cells
	})
}
