// Command atb runs the ATB echo benchmark of issue 6: the HatRPC protocol
// engine (one system per protocol, plus the hint-planned choice) on the
// provider HATRPC_PROVIDER selects (shm without RDMA hardware) next to
// HatRPC over TCP loopback, UCX's shared-memory ping-pong (ucx_perftest)
// and Apache Thrift C++ over TCP (make deps-bench installs both), with
// server and client in separate processes, and writes latency.csv,
// throughput.csv, SVG plots and report.md:
//
//	go run ./cmd/atb
//	go run ./cmd/atb -out /tmp/atb -reps 1 -calls 500 -dur 300ms
//
// The same binary is re-executed as `-role server` and `-role client`.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/internal/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "atb:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	switch o.role {
	case "server":
		return bench.ServeUntilEOF(ctx, o.system, o.addr, os.Stdin, os.Stdout)
	case "tail":
		return tailReport(o.stamps, o.perfScript, os.Stdout)
	case "client":
		var s bench.ClientSpec
		if err := json.Unmarshal([]byte(o.spec), &s); err != nil {
			return fmt.Errorf("bad -spec: %w", err)
		}
		res, err := bench.RunClient(ctx, s)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	}

	if o.from != "" {
		return regenerateTo(o.from, o.out, os.Stdout, os.Stderr)
	}
	var stamps io.Writer
	if o.stamps != "" {
		f, ferr := os.Create(o.stamps) // not err: the defer below sets run's result
		if ferr != nil {
			return ferr
		}
		bw := bufio.NewWriter(f)
		// A stamps file cut short would make -role tail's report wrong
		// without a word, so losing it fails the run.
		defer func() {
			if cerr := errors.Join(bw.Flush(), f.Close()); cerr != nil {
				err = errors.Join(err, fmt.Errorf("-stamps: %w", cerr))
			}
		}()
		stamps = bw
	}
	started := time.Now()
	gate := o.gate()
	// Two drivers: latency and throughput sweep different sizes.
	var lat []bench.LatencyRow
	if len(o.latSizes) > 0 {
		latD := bench.Driver{
			Systems: o.systems, Placements: []bench.Placement{o.latP}, Sizes: o.latSizes,
			Calls: o.calls, Warmup: o.warmup, WarmupFor: o.warmupFor, Reps: o.reps, Log: os.Stderr, Settle: o.settle,
			Gate: gate, Stamps: stamps,
		}
		if lat, _, err = latD.Run(ctx); err != nil {
			return err
		}
	}
	var tput []bench.ThroughputRow
	if len(o.tputSizes) > 0 {
		tpD := bench.Driver{
			Systems: o.systems, Sizes: o.tputSizes, Callers: o.callers, Dur: o.dur, Reps: o.reps, Log: os.Stderr,
			Settle: o.settle, TputPlacement: o.tputP, Gate: gate,
		}
		if _, tput, err = tpD.Run(ctx); err != nil {
			return err
		}
	}
	took := time.Since(started).Round(time.Second)
	sys, ts := o.systems, o.tputSizes
	if o.merge {
		osys, olat, otput, err := readDir(o.out)
		if err != nil {
			return err
		}
		lat, tput = bench.MergeLatency(olat, lat), bench.MergeThroughput(otput, tput)
		for _, s := range sys {
			if !slices.Contains(osys, s) {
				osys = append(osys, s)
			}
		}
		sys, took = osys, 0
		for _, r := range tput {
			if !slices.Contains(ts, r.Size) {
				ts = append(ts, r.Size)
			}
		}
	}
	return write(o.out, sys, lat, tput, ts, took, os.Stdout, os.Stderr)
}

// options are the parsed, checked flags.
type options struct {
	role, system, addr, spec, out, from string
	stamps, perfScript                  string
	systems                             []string
	latSizes, tputSizes, callers        []int
	calls, warmup, reps                 int
	dur, timeout, settle, warmupFor     time.Duration
	hostWait                            time.Duration
	merge                               bool
	latP, tputP                         bench.Placement
	hostCPUs                            [2]int
}

// parseFlags parses and checks the flags, so that a sweep that could not
// produce a table fails before it starts with what is wrong.
func parseFlags(fs *flag.FlagSet, args []string) (*options, error) {
	var (
		o        options
		systems  = fs.String("systems", strings.Join(defaultSystems(), ","), "systems to compare (ucx-sm*, apache-cpp-*: other programs, installed by make deps-bench)")
		latSizes = fs.String("lat-sizes", "4,16,64,256,1K,4K,16K,64K,256K,512K", "latency payload sizes (empty: no latency sweep)")
		tpSizes  = fs.String("tput-sizes", "512,128K", "throughput payload sizes (empty: no throughput sweep)")
		callers  = fs.String("callers", "1,8,16,32,64", "concurrent callers for the throughput runs")
		latPl    = fs.String("lat-placement", "unpinned", "latency runs: unpinned | same-cpu | split-cpu (server and client on the two -cpus)")
		tputPl   = fs.String("tput-placement", "unpinned", "throughput runs: unpinned | same-cpu | split-cpu")
		cpus     = fs.String("cpus", "0,1", "the two CPUs used for pinning")
		baseline = fs.String("baseline", "", "another atb binary (an older build): a system named X"+bench.BaselineSuffix+" is its X, measured in the same run")
	)
	fs.StringVar(&o.role, "role", "driver", "driver | tail | server | client (server and client are internal; tail: -stamps and -perf-script into a report)")
	fs.StringVar(&o.stamps, "stamps", "", "driver: write each latency repetition's calls over 5µs with their CLOCK_MONOTONIC start to this file; tail: read them from it (scripts/tail-trace.sh)")
	fs.StringVar(&o.perfScript, "perf-script", "", "tail: `perf script --ns -F comm,pid,tid,cpu,time,event,trace,ip,sym` output of a `perf record -a -k mono` taken during the run")
	fs.StringVar(&o.system, "system", "", "server role: system to serve")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "server role: listen address")
	fs.StringVar(&o.spec, "spec", "", "client role: JSON ClientSpec")
	fs.IntVar(&o.calls, "calls", 3000, "recorded calls per latency run")
	fs.IntVar(&o.warmup, "warmup", 300, "unrecorded calls before a latency run")
	fs.DurationVar(&o.warmupFor, "warmup-for", bench.DefaultWarmupFor, "latency runs: warm up at least this long too (past the processes' start-up: sysmon's fast wake-ups, fresh heap pages); 0: calls only")
	fs.DurationVar(&o.dur, "dur", time.Second, "measured time per throughput run")
	fs.IntVar(&o.reps, "reps", 3, "interleaved repetitions per point; the best is reported")
	fs.StringVar(&o.out, "out", "docs/performance", "directory for the CSV, SVG and report.md files")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "overall limit")
	fs.StringVar(&o.from, "from", "", "measure nothing: redo plots and report.md from this directory's CSV files")
	fs.BoolVar(&o.merge, "merge", false, "keep the best of this run and the CSV files already in -out per point")
	fs.DurationVar(&o.settle, "settle", bench.DefaultSettle, "pause before each measurement (lets the previous system's pollers go idle)")
	fs.DurationVar(&o.hostWait, "host-wait", bench.DefaultHostWait, "before each measurement, wait up to this long for a cache line's round trip between the two -cpus to be back within 2.5x of its usual value (the first quartile of the last 64; a VM's host moves its vCPUs: in a slow phase it triples); the round trips are logged; 0: no check")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch o.role {
	case "server", "client":
		return &o, nil
	case "tail":
		if o.stamps == "" || o.perfScript == "" {
			return nil, fmt.Errorf("-role tail needs -stamps and -perf-script")
		}
		return &o, nil
	case "driver":
	default:
		return nil, fmt.Errorf("unknown -role %q", o.role)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("-timeout %v: want a positive duration", o.timeout)
	}
	if o.from != "" {
		return &o, nil
	}
	var err error
	if o.latSizes, err = positiveInts("-lat-sizes", *latSizes); err != nil {
		return nil, err
	}
	if o.tputSizes, err = positiveInts("-tput-sizes", *tpSizes); err != nil {
		return nil, err
	}
	if o.callers, err = positiveInts("-callers", *callers); err != nil {
		return nil, err
	}
	if len(o.latSizes) == 0 && len(o.tputSizes) == 0 {
		return nil, fmt.Errorf("-lat-sizes and -tput-sizes are both empty: nothing to measure")
	}
	if len(o.tputSizes) > 0 && len(o.callers) == 0 {
		return nil, fmt.Errorf("-callers is empty: the throughput sweep (-tput-sizes %s) needs at least one caller count", *tpSizes)
	}
	if err := bench.SetBaseline(*baseline); err != nil {
		return nil, fmt.Errorf("-baseline: %w", err)
	}
	for _, s := range strings.Split(*systems, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(o.systems, s) {
			if _, err := bench.Lookup(s); err != nil {
				return nil, err
			}
			o.systems = append(o.systems, s)
		}
	}
	if len(o.systems) == 0 {
		return nil, fmt.Errorf("-systems is empty: name at least one of %s", strings.Join(append(bench.EngineSystems(), bench.Subject), ", "))
	}
	switch {
	case o.reps < 1:
		return nil, fmt.Errorf("-reps %d: want at least 1", o.reps)
	case len(o.latSizes) > 0 && o.calls < 1:
		return nil, fmt.Errorf("-calls %d: a latency run needs at least one recorded call", o.calls)
	case o.warmup < 0:
		return nil, fmt.Errorf("-warmup %d: want 0 or more", o.warmup)
	case o.warmupFor < 0:
		return nil, fmt.Errorf("-warmup-for %v: want 0 or more", o.warmupFor)
	case len(o.tputSizes) > 0 && o.dur <= 0:
		return nil, fmt.Errorf("-dur %v: want a positive duration", o.dur)
	case o.settle < 0:
		return nil, fmt.Errorf("-settle %v: want 0 or more", o.settle)
	case o.hostWait < 0:
		return nil, fmt.Errorf("-host-wait %v: want 0 or more", o.hostWait)
	}
	if o.hostCPUs, err = bench.ParseCPUs(*cpus); err != nil {
		return nil, err
	}
	if o.latP, err = placement(*latPl, *cpus); err != nil {
		return nil, err
	}
	if o.tputP, err = placement(*tputPl, *cpus); err != nil {
		return nil, err
	}
	return &o, nil
}

// defaultSystems are the engine systems, HatRPC over TCP and lanes, the
// world they are held to (issue 47): UCX's shared-memory round trip and
// Apache Thrift's C++ library over TCP, and the host's own floor, bare
// and with a lane call's length (bench.LaneFloor).
func defaultSystems() []string {
	return append(bench.EngineSystems(), bench.Subject, "hatrpc-lanes",
		"ucx-sm", "ucx-sm-am", "apache-cpp-threaded", "apache-cpp-nonblocking", bench.FloorName, bench.LaneFloor.Name())
}

// positiveInts parses a list of sizes or counts, without duplicates.
func positiveInts(flagName, s string) ([]int, error) {
	ns, err := bench.ParseInts(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	var out []int
	for _, n := range ns {
		if n < 1 {
			return nil, fmt.Errorf("%s %q: %d is not positive", flagName, s, n)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// gate is the host check the drivers share (nil: -host-wait 0).
func (o *options) gate() *bench.HostGate {
	if o.hostWait == 0 {
		return nil
	}
	return bench.NewHostGate(o.hostCPUs[0], o.hostCPUs[1], o.hostWait)
}

// placement resolves one placement name against the two CPUs in cpus. A
// list is refused, not cut to its first name: atb runs each kind of run
// in one placement (atb-tcp's -placements takes several).
func placement(name, cpus string) (bench.Placement, error) {
	if strings.Contains(name, ",") {
		return bench.Placement{}, fmt.Errorf("placement %q: one of unpinned, same-cpu, split-cpu, not a list (atb runs each kind of run in one placement)", name)
	}
	ps, err := bench.ParsePlacements(name, cpus)
	if err != nil {
		return bench.Placement{}, err
	}
	return ps[0], nil
}

// write writes the CSV files, the plots and report.md into dir and the
// report to stdout. A plot that cannot be drawn (nothing measured for it)
// is skipped with a line on logw; the tables are always written.
func write(dir string, sys []string, lat []bench.LatencyRow, tput []bench.ThroughputRow, tsizes []int, took time.Duration, stdout, logw io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]func(io.Writer) error{
		"latency.csv":    func(w io.Writer) error { return bench.WriteLatencyCSV(w, sys, lat) },
		"throughput.csv": func(w io.Writer) error { return bench.WriteThroughputCSV(w, sys, tput) },
	}
	plots := map[string]func(io.Writer) error{}
	if len(lat) > 0 {
		plots["latency.svg"] = func(w io.Writer) error { return bench.PlotLatency(w, sys, lat) }
	}
	for _, size := range tsizes {
		plots["throughput-"+bench.SizeLabel(size)+".svg"] = func(w io.Writer) error {
			return bench.PlotThroughput(w, sys, tput, size)
		}
	}
	var rep bytes.Buffer
	fmt.Fprintf(&rep, "Provider: %s", bench.EnginePrefix())
	if took > 0 {
		fmt.Fprintf(&rep, "; sweep took %v", took)
	}
	fmt.Fprintf(&rep, ".\n\n")
	if len(lat) > 0 {
		fmt.Fprintf(&rep, "### 1-caller latency, p50 / p99 / p99.9 µs\n\n")
		bench.WriteEngineLatencyTable(&rep, sys, lat)
	}
	for _, size := range tsizes {
		fmt.Fprintf(&rep, "\n### Throughput, %s payload\n\n", bench.SizeLabel(size))
		bench.WriteEngineThroughputTable(&rep, sys, tput, size)
	}
	fmt.Fprintf(&rep, "\n### Goals\n\n")
	bench.WriteEngineVerdicts(&rep, lat, tput)
	files["report.md"] = func(w io.Writer) error { _, err := w.Write(rep.Bytes()); return err }
	save := func(name string, f func(io.Writer) error) error {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := save(name, files[name]); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(plots)) {
		if err := save(name, plots[name]); err != nil {
			fmt.Fprintf(logw, "atb: skipped plot %v\n", err)
		}
	}
	_, err := stdout.Write(rep.Bytes())
	return err
}

// regenerate rewrites the plots and report.md in out from the CSV files in
// dir, e.g. after a change to the report.
func regenerateTo(dir, out string, stdout, logw io.Writer) error {
	sys, lat, tput, err := readDir(dir)
	if err != nil {
		return err
	}
	var sizes []int
	for _, r := range tput {
		if !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
	}
	return write(out, sys, lat, tput, sizes, 0, stdout, logw)
}

// readDir reads latency.csv and throughput.csv from dir.
func readDir(dir string) ([]string, []bench.LatencyRow, []bench.ThroughputRow, error) {
	f, err := os.Open(filepath.Join(dir, "latency.csv"))
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	sys, lat, err := bench.ReadLatencyCSV(f)
	if err != nil {
		return nil, nil, nil, err
	}
	g, err := os.Open(filepath.Join(dir, "throughput.csv"))
	if err != nil {
		return nil, nil, nil, err
	}
	defer g.Close()
	tsys, tput, err := bench.ReadThroughputCSV(g)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, s := range tsys {
		if !slices.Contains(sys, s) {
			sys = append(sys, s)
		}
	}
	return sys, lat, tput, nil
}

// tailReport is -role tail: the run's stamps against the host's trace.
func tailReport(stamps, perfScript string, w io.Writer) error {
	sf, err := os.Open(stamps)
	if err != nil {
		return err
	}
	defer sf.Close()
	pf, err := os.Open(perfScript)
	if err != nil {
		return err
	}
	defer pf.Close()
	return bench.TraceReport(w, sf, pf)
}
