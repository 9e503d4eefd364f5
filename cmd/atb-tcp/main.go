// Command atb-tcp runs the ATB echo benchmark over TCP with server and
// client in separate processes, pinned with taskset to the same CPU, to
// different CPUs or not at all, and prints HatRPC and Apache Thrift side by
// side:
//
//	go run ./cmd/atb-tcp
//	go run ./cmd/atb-tcp -sizes 64 -callers 64 -dur 5s
//
// Old build against new in one run: -baseline names an older atb-tcp
// binary, and a system named X@base is that binary's X:
//
//	atb-tcp -baseline /tmp/atb-tcp-old -systems hatrpc,hatrpc@base
//
// With -stream-sizes it runs the stream systems instead (issue 46's
// goals: internal/bench/stream.go), one stream per system and size:
//
//	go run ./cmd/atb-tcp -stream-sizes 64,4KiB,64KiB -bytes 1GiB
//
// With ATB_CPUPROFILE=<prefix> in the environment the server and client
// processes each write a CPU profile, <prefix>.<role>.<pid>.prof, so the
// two sides of a point are profiled apart (the in-process BenchmarkEcho
// mixes them):
//
//	ATB_CPUPROFILE=/tmp/p atb-tcp -systems hatrpc -sizes 512 -callers 64 -reps 1
//
// The same binary is re-executed as `-role server` and `-role client`;
// apache-cpp-* run Apache Thrift's C++ server and client instead, built on
// first use (or by `make deps-bench`: `-role prepare`) from
// internal/bench/apachecpp.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/internal/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "atb-tcp:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		role       = flag.String("role", "driver", "driver | prepare (build or check the external programs of -systems, e.g. apache-cpp-threaded,ucx-sm, and make a few calls through each) | server | client (server and client are internal)")
		system     = flag.String("system", "", "server role: system to serve")
		addr       = flag.String("addr", "127.0.0.1:0", "server role: listen address")
		spec       = flag.String("spec", "", "client role: JSON ClientSpec")
		systems    = flag.String("systems", strings.Join(bench.TCPSystems(), ","), "systems to compare")
		sizes      = flag.String("sizes", "64,4KiB,128KiB", "payload sizes")
		callers    = flag.String("callers", "1,8,64", "concurrent callers for the throughput runs")
		calls      = flag.Int("calls", 20000, "recorded calls per latency run")
		warmup     = flag.Int("warmup", 2000, "unrecorded calls before a latency run")
		dur        = flag.Duration("dur", 3*time.Second, "measured time per throughput run")
		reps       = flag.Int("reps", 3, "interleaved repetitions per point; the best is reported")
		placements = flag.String("placements", "unpinned,same-cpu,split-cpu", "latency placements")
		cpus       = flag.String("cpus", "0,1", "the two CPUs used for pinning")
		timeout    = flag.Duration("timeout", 30*time.Minute, "overall limit")
		baseline   = flag.String("baseline", "", "another atb-tcp binary (an older build): a system named X"+bench.BaselineSuffix+" is its X, measured in the same run")

		streamSizes = flag.String("stream-sizes", "", "stream mode: message sizes, e.g. 64,4KiB,64KiB (-systems default: "+strings.Join(defaultStreamSystems, ",")+")")
		bytes       = flag.String("bytes", "1GiB", "stream mode: payload bytes per point")
		maxMsgs     = flag.Int64("max-msgs", 4_000_000, "stream mode: at most this many messages per point (0: no cap)")
		unaryDur    = flag.Duration("unary-dur", 3*time.Second, "stream mode: hatrpc-unary's calls stop after this long")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	if *role == "server" || *role == "client" {
		stop, err := profileRole(*role)
		if err != nil {
			return err
		}
		defer stop()
	}
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
	case "prepare":
		return bench.PrepareExternal(ctx, strings.Split(*systems, ","), os.Stdout)
	case "driver":
	default:
		return fmt.Errorf("unknown -role %q", *role)
	}

	if err := bench.SetBaseline(*baseline); err != nil {
		return fmt.Errorf("-baseline: %w", err)
	}
	if *streamSizes != "" {
		explicit := false
		flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "systems" })
		sys := defaultStreamSystems
		if explicit {
			sys = strings.Split(*systems, ",")
		}
		return runStreams(ctx, sys, *streamSizes, *bytes, *maxMsgs, *unaryDur, *reps)
	}
	sz, err := bench.ParseInts(*sizes)
	if err != nil {
		return err
	}
	cl, err := bench.ParseInts(*callers)
	if err != nil {
		return err
	}
	pls, err := bench.ParsePlacements(*placements, *cpus)
	if err != nil {
		return err
	}
	d := bench.Driver{
		Systems: strings.Split(*systems, ","),
		Sizes:   sz,
		Callers: cl,
		Calls:   *calls,
		Warmup:  *warmup,
		Dur:     *dur,
		Reps:    *reps,
		Log:     os.Stderr,
	}
	d.Placements = pls
	lat, tput, err := d.Run(ctx)
	if err != nil {
		return err
	}
	return bench.WriteReport(os.Stdout, d.Systems, lat, tput)
}

// defaultStreamSystems are every stream system: the goals need them all.
var defaultStreamSystems = []string{"hatrpc-stream", "hatrpc-stream-lanes", "grpc-stream", "raw-tcp-stream", "memmove", "hatrpc-unary"}

// streamDriver reads stream mode's flags.
func streamDriver(systems []string, sizes, bytes string, maxMsgs int64, unaryDur time.Duration, reps int) (*bench.StreamDriver, error) {
	sz, err := bench.ParseInts(sizes)
	if err != nil {
		return nil, fmt.Errorf("-stream-sizes: %w", err)
	}
	b, err := bench.ParseInts(bytes)
	if err != nil || len(b) != 1 {
		return nil, fmt.Errorf("-bytes %q: want one size, e.g. 1GiB", bytes)
	}
	d := &bench.StreamDriver{Systems: systems, Sizes: sz, Bytes: int64(b[0]), MaxMsgs: maxMsgs, UnaryDur: unaryDur, Reps: reps, Log: os.Stderr}
	return d, d.Validate()
}

func runStreams(ctx context.Context, systems []string, sizes, bytes string, maxMsgs int64, unaryDur time.Duration, reps int) error {
	d, err := streamDriver(systems, sizes, bytes, maxMsgs, unaryDur, reps)
	if err != nil {
		return err
	}
	rows, err := d.Run(ctx)
	if err != nil {
		return err
	}
	return bench.WriteStreamReport(os.Stdout, d.Systems, rows, d.Bytes)
}

// profileRole starts the CPU profile ATB_CPUPROFILE asks for (see the
// package comment); stop writes it.
func profileRole(role string) (stop func(), err error) {
	prefix := os.Getenv("ATB_CPUPROFILE")
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d.prof", prefix, role, os.Getpid()))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
