// Command atb runs the ATB echo benchmark of issue 6: the HatRPC protocol
// engine (one system per protocol, plus the hint-planned choice) on the
// provider HATRPC_PROVIDER selects (shm without RDMA hardware) next to
// HatRPC over TCP loopback, with server and client in separate processes,
// and writes latency.csv, throughput.csv, SVG plots and report.md:
//
//	go run ./internal/bench/cmd/atb
//	go run ./internal/bench/cmd/atb -out /tmp/atb -reps 1 -calls 500 -dur 300ms
//
// The same binary is re-executed as `-role server` and `-role client`.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

func run() error {
	var (
		role     = flag.String("role", "driver", "driver | server | client (server and client are internal)")
		system   = flag.String("system", "", "server role: system to serve")
		addr     = flag.String("addr", "127.0.0.1:0", "server role: listen address")
		spec     = flag.String("spec", "", "client role: JSON ClientSpec")
		systems  = flag.String("systems", strings.Join(append(bench.EngineSystems(), bench.Subject, "hatrpc-lanes"), ","), "systems to compare")
		latSizes = flag.String("lat-sizes", "4,16,64,256,1K,4K,16K,64K,256K,512K", "latency payload sizes")
		tpSizes  = flag.String("tput-sizes", "512,128K", "throughput payload sizes")
		callers  = flag.String("callers", "1,8,16,32,64", "concurrent callers for the throughput runs")
		calls    = flag.Int("calls", 3000, "recorded calls per latency run")
		warmup   = flag.Int("warmup", 300, "unrecorded calls before a latency run")
		dur      = flag.Duration("dur", time.Second, "measured time per throughput run")
		reps     = flag.Int("reps", 3, "interleaved repetitions per point; the best is reported")
		out      = flag.String("out", "docs/performance", "directory for the CSV, SVG and report.md files")
		timeout  = flag.Duration("timeout", 30*time.Minute, "overall limit")
		from     = flag.String("from", "", "measure nothing: redo plots and report.md from this directory's CSV files")
		merge    = flag.Bool("merge", false, "keep the best of this run and the CSV files already in -out per point")
		latPl    = flag.String("lat-placement", "unpinned", "latency runs: unpinned | same-cpu | split-cpu (server and client on the two -cpus)")
		tputPl   = flag.String("tput-placement", "unpinned", "throughput runs: unpinned | same-cpu | split-cpu")
		cpus     = flag.String("cpus", "0,1", "the two CPUs used for pinning")
		settle   = flag.Duration("settle", bench.DefaultSettle, "pause before each measurement (lets the previous system's pollers go idle)")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	switch *role {
	case "server":
		return bench.ServeUntilEOF(ctx, *system, *addr, os.Stdin, os.Stdout)
	case "client":
		var s bench.ClientSpec
		if err := json.Unmarshal([]byte(*spec), &s); err != nil {
			return fmt.Errorf("bad -spec: %w", err)
		}
		res, err := bench.RunClient(ctx, s)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	case "driver":
	default:
		return fmt.Errorf("unknown -role %q", *role)
	}

	if *from != "" {
		return regenerate(*from, *out)
	}
	ls, err := bench.ParseInts(*latSizes)
	if err != nil {
		return err
	}
	ts, err := bench.ParseInts(*tpSizes)
	if err != nil {
		return err
	}
	cl, err := bench.ParseInts(*callers)
	if err != nil {
		return err
	}
	sys := strings.Split(*systems, ",")
	latP, err := placement(*latPl, *cpus)
	if err != nil {
		return err
	}
	tputP, err := placement(*tputPl, *cpus)
	if err != nil {
		return err
	}
	started := time.Now()
	// Two drivers: latency and throughput sweep different sizes.
	latD := bench.Driver{
		Systems: sys, Placements: []bench.Placement{latP}, Sizes: ls,
		Calls: *calls, Warmup: *warmup, Reps: *reps, Log: os.Stderr, Settle: *settle,
	}
	lat, _, err := latD.Run(ctx)
	if err != nil {
		return err
	}
	var tput []bench.ThroughputRow
	if len(ts) > 0 && len(cl) > 0 {
		tpD := bench.Driver{
			Systems: sys, Sizes: ts, Callers: cl, Dur: *dur, Reps: *reps, Log: os.Stderr,
			Settle: *settle, TputPlacement: tputP,
		}
		if _, tput, err = tpD.Run(ctx); err != nil {
			return err
		}
	}
	took := time.Since(started).Round(time.Second)
	if *merge {
		osys, olat, otput, err := readDir(*out)
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
	return write(*out, sys, lat, tput, ts, took)
}

// placement resolves one placement name against the two CPUs in cpus.
func placement(name, cpus string) (bench.Placement, error) {
	ps, err := bench.ParsePlacements(name, cpus)
	if err != nil {
		return bench.Placement{}, err
	}
	return ps[0], nil
}

func write(dir string, sys []string, lat []bench.LatencyRow, tput []bench.ThroughputRow, tsizes []int, took time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]func(io.Writer) error{
		"latency.csv":    func(w io.Writer) error { return bench.WriteLatencyCSV(w, sys, lat) },
		"throughput.csv": func(w io.Writer) error { return bench.WriteThroughputCSV(w, sys, tput) },
		"latency.svg":    func(w io.Writer) error { return bench.PlotLatency(w, sys, lat) },
	}
	for _, size := range tsizes {
		files["throughput-"+bench.SizeLabel(size)+".svg"] = func(w io.Writer) error {
			return bench.PlotThroughput(w, sys, tput, size)
		}
	}
	var rep bytes.Buffer
	fmt.Fprintf(&rep, "Provider: %s", bench.EnginePrefix())
	if took > 0 {
		fmt.Fprintf(&rep, "; sweep took %v", took)
	}
	fmt.Fprintf(&rep, ".\n\n")
	fmt.Fprintf(&rep, "### 1-caller latency, p50 / p99 µs\n\n")
	if len(lat) > 0 {
		bench.WriteEngineLatencyTable(&rep, sys, lat)
	}
	for _, size := range tsizes {
		fmt.Fprintf(&rep, "\n### Throughput, %s payload\n\n", bench.SizeLabel(size))
		bench.WriteEngineThroughputTable(&rep, sys, tput, size)
	}
	fmt.Fprintf(&rep, "\n### Goals\n\n")
	bench.WriteEngineVerdicts(&rep, lat, tput)
	files["report.md"] = func(w io.Writer) error { _, err := w.Write(rep.Bytes()); return err }
	for name, f := range files {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	_, err := os.Stdout.Write(rep.Bytes())
	return err
}

// regenerate rewrites the plots and report.md in out from the CSV files in
// dir, e.g. after a change to the report.
func regenerate(dir, out string) error {
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
	return write(out, sys, lat, tput, sizes, 0)
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
