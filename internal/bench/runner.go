package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Placement says where the runner pins the server and client processes.
type Placement struct {
	Name      string
	ServerCPU string // taskset CPU list; empty = unpinned
	ClientCPU string
}

// Placements are the three layouts of issue 4 on a machine with CPUs a, b.
func Placements(a, b string) []Placement {
	return []Placement{
		{Name: "unpinned"},
		{Name: "same-cpu", ServerCPU: a, ClientCPU: a},
		{Name: "split-cpu", ServerCPU: a, ClientCPU: b},
	}
}

// ParseCPUs reads a -cpus flag: two different CPU numbers, as in "0,1".
func ParseCPUs(cpus string) ([2]int, error) {
	a, b, ok := strings.Cut(cpus, ",")
	x, errA := strconv.Atoi(strings.TrimSpace(a))
	y, errB := strconv.Atoi(strings.TrimSpace(b))
	if !ok || errA != nil || errB != nil || x < 0 || y < 0 || x == y {
		return [2]int{}, fmt.Errorf("-cpus %q: want two different CPU numbers, e.g. 0,1", cpus)
	}
	return [2]int{x, y}, nil
}

// ParsePlacements resolves a comma-separated list of placement names
// (unpinned, same-cpu, split-cpu) against the two CPUs in cpus ("0,1"),
// in the order Placements lists them.
func ParsePlacements(names, cpus string) ([]Placement, error) {
	c, err := ParseCPUs(cpus)
	if err != nil {
		return nil, err
	}
	a, b := strconv.Itoa(c[0]), strconv.Itoa(c[1])
	want := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []Placement
	for _, p := range Placements(a, b) {
		if want[p.Name] {
			out = append(out, p)
			delete(want, p.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown placement %q (unpinned, same-cpu, split-cpu)", n)
	}
	return out, nil
}

// ClientSpec is what the runner asks a client process to measure.
type ClientSpec struct {
	System  string `json:"system"`
	Addr    string `json:"addr"`
	Size    int    `json:"size"`
	Callers int    `json:"callers"` // 0 = latency run with one caller
	Warmup  int    `json:"warmup"`  // latency: unrecorded calls
	// WarmupFor keeps the latency warm-up going at least this long, so the
	// recorded calls see the processes' steady state: for the first
	// milliseconds of a process (or a new lane) the Go runtime's sysmon
	// wakes every ~80 µs, each wake-up stalling a spinning poller for
	// ~20 µs on a VM, and a runtime that allocates per call faults in a
	// fresh heap page every few KiB until its first GC recycles them
	// (~5 µs each). Both are start-up costs, not the system's latency.
	WarmupFor time.Duration `json:"warmup_ns,omitempty"`
	Calls     int           `json:"calls"`    // latency: recorded calls
	Duration  time.Duration `json:"duration"` // throughput: measured time
	// Stream, when set, asks a stream system (stream.go) for one stream
	// of messages instead of echo calls.
	Stream *StreamSpec `json:"stream,omitempty"`
	// ServerPID is the server process, whose CPU time a throughput run
	// samples from /proc (0: not sampled).
	ServerPID int `json:"server_pid,omitempty"`
	// Stamps asks a latency run for its slow calls' times (Stamps).
	Stamps bool `json:"stamps,omitempty"`
}

// ClientResult is a client process's answer (one JSON line on stdout).
type ClientResult struct {
	Spec       ClientSpec        `json:"spec"`
	Latency    *LatencyResult    `json:"latency,omitempty"`
	Throughput *ThroughputResult `json:"throughput,omitempty"`
	Stream     *StreamResult     `json:"stream,omitempty"`
}

// RunClient performs spec in this process.
func RunClient(ctx context.Context, spec ClientSpec) (ClientResult, error) {
	sys, err := Lookup(spec.System)
	if err != nil {
		return ClientResult{}, err
	}
	if x, ok := sys.(external); ok {
		return x.runClient(ctx, spec)
	}
	if spec.Stream != nil {
		return runStreamClient(ctx, sys, spec)
	}
	n := spec.Callers
	if n < 1 {
		n = 1
	}
	cs, err := callersFor(ctx, sys, spec.Addr, n, spec.Size)
	if err != nil {
		return ClientResult{}, err
	}
	defer CloseAll(cs)
	res := ClientResult{Spec: spec}
	payload := Payload(spec.Size)
	if spec.Callers == 0 {
		if err := warmUpFor(ctx, cs[0], payload, spec.WarmupFor); err != nil {
			return res, err
		}
		lat, err := measureLatency(ctx, cs[0], payload, spec.Warmup, spec.Calls, spec.Stamps)
		if err != nil {
			return res, err
		}
		res.Latency = &lat
		return res, nil
	}
	tp, err := measureThroughput(ctx, cs, payload, spec.Duration, spec.ServerPID)
	if err != nil {
		return res, err
	}
	res.Throughput = &tp
	return res, nil
}

// warmUpFor makes unrecorded calls for d (none for d <= 0).
func warmUpFor(ctx context.Context, c Caller, payload []byte, d time.Duration) error {
	e := newEchoer(c, payload)
	for end := time.Now().Add(d); time.Now().Before(end); {
		if err := e.call(ctx); err != nil {
			return err
		}
	}
	return nil
}

// sizedSystem is a System whose callers are configured for the payload
// size (the engine's planned system plans by size).
type sizedSystem interface {
	CallersFor(ctx context.Context, addr string, n, size int) ([]Caller, error)
}

func callersFor(ctx context.Context, sys System, addr string, n, size int) ([]Caller, error) {
	if s, ok := sys.(sizedSystem); ok {
		return s.CallersFor(ctx, addr, n, size)
	}
	return sys.Callers(ctx, addr, n)
}

// ServeUntilEOF serves system on addr, prints "ADDR <addr>" on out and
// stops when in reaches EOF: the parent closes the pipe (or dies), so a
// server process can never outlive its runner. An external system's
// program serves instead, and the line names its pid: "ADDR <addr>
// pid=<pid>".
func ServeUntilEOF(ctx context.Context, system, addr string, in io.Reader, out io.Writer) error {
	sys, err := Lookup(system)
	if err != nil {
		return err
	}
	if x, ok := sys.(external); ok {
		return x.serveProcess(ctx, addr, in, out)
	}
	srv, err := sys.Serve(ctx, addr)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "ADDR %s\n", srv.Addr()); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, in)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Stop(stopCtx)
}

// ErrChild reports a failed server or client process.
var ErrChild = errors.New("bench: child process failed")

// pinned is the command running bin with args, under taskset when cpu is
// set.
func pinned(ctx context.Context, cpu, bin string, args ...string) *exec.Cmd {
	if cpu == "" {
		return exec.CommandContext(ctx, bin, args...)
	}
	return exec.CommandContext(ctx, "taskset", append([]string{"-c", cpu, bin}, args...)...)
}

// RemoteServer is a server process started by StartServerProcess.
type RemoteServer struct {
	Addr  string
	PID   int // taskset execs the binary, so this is the server's own pid
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// StartServerProcess re-executes this binary (the baseline's, for a
// system named with BaselineSuffix) as `-role server` under taskset when
// cpu is set.
func StartServerProcess(ctx context.Context, system, cpu string) (*RemoteServer, error) {
	bin, name, err := binaryFor(system)
	if err != nil {
		return nil, err
	}
	cmd := pinned(ctx, cpu, bin, "-role", "server", "-system", name, "-addr", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, pid, ok := parseAddrLine(line)
	if err != nil || !ok {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%w: server %s said %q: %v", ErrChild, system, line, err)
	}
	if pid == 0 {
		pid = cmd.Process.Pid
	}
	return &RemoteServer{Addr: addr, PID: pid, cmd: cmd, stdin: stdin}, nil
}

// parseAddrLine reads a server process's first line, "ADDR <addr>" or,
// from an external system's, "ADDR <addr> pid=<pid>" (pid 0: not given).
func parseAddrLine(line string) (addr string, pid int, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	f := strings.Fields(rest)
	switch {
	case !ok || len(f) == 0 || len(f) > 2:
		return "", 0, false
	case len(f) == 1:
		return f[0], 0, true
	}
	p, found := strings.CutPrefix(f[1], "pid=")
	n, err := strconv.Atoi(p)
	if !found || err != nil || n <= 0 {
		return "", 0, false
	}
	return f[0], n, true
}

// Stop closes the server's stdin and waits for it to exit.
func (s *RemoteServer) Stop() error {
	_ = s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		return fmt.Errorf("%w: server: %v", ErrChild, err)
	}
	return nil
}

// RunClientProcess re-executes this binary (the baseline's, for a system
// named with BaselineSuffix) as `-role client` under taskset when cpu is
// set and decodes its result.
func RunClientProcess(ctx context.Context, spec ClientSpec, cpu string) (ClientResult, error) {
	bin, name, err := binaryFor(spec.System)
	if err != nil {
		return ClientResult{}, err
	}
	child := spec
	child.System = name
	b, err := json.Marshal(child)
	if err != nil {
		return ClientResult{}, err
	}
	cmd := pinned(ctx, cpu, bin, "-role", "client", "-spec", string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return ClientResult{}, fmt.Errorf("%w: client %s: %v", ErrChild, spec.System, err)
	}
	var res ClientResult
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("%w: client output %q: %v", ErrChild, out, err)
	}
	return res, nil
}

// ParseInts parses "64,4096,131072"; sizes may carry a K/KiB, M/MiB or G/GiB suffix.
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mul := 1
		for _, suf := range []struct {
			s string
			m int
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
			if t, ok := strings.CutSuffix(f, suf.s); ok {
				f, mul = t, suf.m
				break
			}
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("bench: bad number %q: %w", f, err)
		}
		out = append(out, n*mul)
	}
	return out, nil
}
