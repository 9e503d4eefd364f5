package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	gen "github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

type benchFlags struct {
	clientFlags
	protocol   string
	hintLevel  string
	workloads  []string
	props      []string
	threads    int
	conns      int
	duration   time.Duration
	operations int64
	phase      string
	csvPath    string
	jsonPath   string
	plotPath   string
	seed       uint64
	progress   string
	status     bool          // YCSB's -s: periodic status lines on stderr
	statusIval time.Duration // between status lines
	statusOut  io.Writer     // where they go (the command's stderr)
	cpuProfile string
	emul       emulFlags
}

func newBenchCmd() *cobra.Command {
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a YCSB workload (with the HatRPC MultiRead/MultiUpdate extension) against a server",
		Long: `Bench is a YCSB client for HatKV. -P names a workload file or a built-in
workload:
  ` + strings.Join(ycsb.WorkloadNames(), ", ") + `
-p key=value overrides a property. multireadproportion and multiupdateproportion (batches
of batchsize keys) map to MultiGet and MultiPut. The load phase inserts
recordcount records; the run phase executes operationcount operations (or
runs for --duration). Per-operation throughput and latency percentiles are
printed at the end of each phase.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, &bf) },
	}
	f := cmd.Flags()
	f.StringArrayVarP(&bf.workloads, "workload", "P", nil, "workload file or built-in name (repeatable; default workloada)")
	f.StringArrayVarP(&bf.props, "prop", "p", nil, "property override key=value (repeatable)")
	f.IntVar(&bf.threads, "threads", 1, "client threads")
	f.IntVar(&bf.conns, "conns", 0, "connections (default: one per thread)")
	f.DurationVar(&bf.duration, "duration", 0, "run phase length (default: operationcount operations)")
	f.Int64Var(&bf.operations, "operations", 0, "run phase operations (overrides operationcount)")
	f.StringVar(&bf.phase, "phase", "both", "load|run|both")
	f.StringVar(&bf.csvPath, "csv", "", "write per-operation results as CSV")
	f.StringVar(&bf.jsonPath, "json", "", "write results as JSON")
	f.StringVar(&bf.plotPath, "plot", "", "write the latency distribution as SVG")
	f.Uint64Var(&bf.seed, "seed", 0, "random seed (0: from the clock)")
	f.StringVar(&bf.cpuProfile, "cpuprofile", "", "write the client's CPU profile (pprof) of the whole run to this file")
	f.StringVar(&bf.progress, "progress", "auto", "live progress line: auto (when stdout is a terminal and no --status)|on|off")
	f.BoolVarP(&bf.status, "status", "s", false, "print YCSB-style status lines (ops/s and per-operation latency of each interval) to stderr, terminal or not")
	f.DurationVar(&bf.statusIval, "status-interval", 10*time.Second, "time between status lines (implies --status when set)")
	f.StringVar(&bf.hintLevel, "hint-level", "function", "plan RPCs from function-level hints (function) or service-level hints only (service; start the server the same way)")
	f.StringVar(&bf.protocol, "protocol", "auto", "force the engine protocol of every request on lanes (needs --transport auto, shm or rdma)")
	bf.clientFlags.registerConn(cmd)
	bf.emul.register(cmd)
	return cmd
}

// checkProtocol parses --protocol: any hint spelling; a forced protocol
// needs lanes, so not with --transport tcp.
func checkProtocol(name, transport string) (hints.Protocol, error) {
	p, err := hints.ParseProtocol(name)
	if err != nil {
		return 0, fmt.Errorf("%w: protocol %q: %v", hatkv.ErrConfig, name, err)
	}
	if p != hints.ProtoAuto && strings.EqualFold(transport, "tcp") {
		return 0, fmt.Errorf("%w: protocol %s needs engine lanes (--transport auto, shm or rdma), not tcp", hatkv.ErrConfig, p)
	}
	return p, nil
}

func loadWorkload(bf *benchFlags) (*ycsb.Workload, error) {
	props := ycsb.NewProperties()
	names := bf.workloads
	if len(names) == 0 {
		names = []string{"workloada"}
	}
	for _, n := range names {
		var err error
		if _, serr := os.Stat(n); serr == nil {
			err = props.Load(n)
		} else {
			err = props.LoadWorkload(n)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, kv := range bf.props {
		if err := props.SetPair(kv); err != nil {
			return nil, err
		}
	}
	cfg, err := ycsb.ParseConfig(props)
	if err != nil {
		return nil, err
	}
	w, err := ycsb.NewWorkload(cfg)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// phaseResult is one phase's outcome, as written to --json and --csv.
type phaseResult struct {
	Phase string `json:"phase"`
	// Interrupted: Ctrl-C (SIGINT/SIGTERM) ended the phase early; the
	// report covers the operations that completed until then.
	Interrupted bool        `json:"interrupted,omitempty"`
	Report      ycsb.Report `json:"report"`
	// Servers: with --addrs, each server's share of the phase's keys.
	Servers []serverShare `json:"servers,omitempty"`
	m       *ycsb.Measurements
}

func runBench(cmd *cobra.Command, bf *benchFlags) error {
	if err := hatkv.CheckTransport(bf.transport); err != nil {
		return err
	}
	lp, err := checkProtocol(bf.protocol, bf.transport)
	if err != nil {
		return err
	}
	if bf.phase != "load" && bf.phase != "run" && bf.phase != "both" {
		return fmt.Errorf("--phase %q: want load, run or both", bf.phase)
	}
	if bf.threads < 1 {
		return fmt.Errorf("--threads must be at least 1, got %d", bf.threads)
	}
	if cmd.Flags().Changed("status-interval") {
		bf.status = true
	}
	if bf.status && bf.statusIval <= 0 {
		return fmt.Errorf("--status-interval must be positive, got %v", bf.statusIval)
	}
	bf.statusOut = cmd.ErrOrStderr()
	w, err := loadWorkload(bf)
	if err != nil {
		return err
	}
	if bf.cpuProfile != "" {
		stop, err := startCPUProfile(bf.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if bf.emul.kind != "" {
		if len(bf.addrs) > 0 {
			return fmt.Errorf("%w: --emulate runs against one --emul-addr, not --addrs", hatkv.ErrConfig)
		}
		if bf.tls || bf.tlsCA != "" || bf.token != "" || os.Getenv(hatkv.TokenEnv) != "" {
			return fmt.Errorf("%w: --emulate speaks the emulations' own protocols, without TLS or token", hatkv.ErrConfig)
		}
		return runEmulBench(cmd, bf, w)
	}
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	conns := bf.conns
	if conns <= 0 {
		conns = bf.threads
	}
	copts := []client.Option{client.WithLaneProtocol(lp)}
	switch bf.hintLevel {
	case "function":
	case "service":
		copts = append(copts, client.WithServiceLevelHints())
	default:
		return fmt.Errorf("%w: --hint-level %q: want function or service", hatkv.ErrConfig, bf.hintLevel)
	}
	cl, err := bf.dial(ctx, hatkv.WithConns(conns), hatkv.WithClientOptions(copts...))
	if err != nil {
		return err
	}
	defer cl.Close()
	seed := bf.seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	printHeader(out, bf, w, cl, conns, seed)

	results, err := runPhases(ctx, bf, seed, func(phase string, seed uint64) (phaseResult, error) {
		return runPhase(ctx, cmd, bf, cl, w, phase, seed)
	})
	if err != nil {
		return err
	}
	return finishBench(ctx, out, bf, results)
}

// runPhases runs the phases --phase selects, each by run. An interrupted
// phase still yields its partial results; later phases are skipped, and
// finishBench writes the output files and exits 0 (the output says
// "interrupted").
func runPhases(ctx context.Context, bf *benchFlags, seed uint64, run func(phase string, seed uint64) (phaseResult, error)) ([]phaseResult, error) {
	var results []phaseResult
	if bf.phase != "run" {
		r, err := run("load", seed)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
		phaseDone("load")
	}
	if bf.phase != "load" {
		if ctx.Err() != nil {
			// Interrupted after a whole load phase, before the run
			// began: the run phase is in the results as interrupted
			// before its first operation, so the files say the run was
			// cut short, not that it was only a load. (An interrupted
			// load says so itself.)
			if len(results) == 0 || !results[len(results)-1].Interrupted {
				results = append(results, phaseResult{Phase: "run", Interrupted: true, m: ycsb.NewMeasurements()})
			}
		} else {
			r, err := run("run", seed+1)
			if err != nil {
				return nil, err
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// finishBench writes the output files and, after Ctrl-C, says the results
// are partial.
func finishBench(ctx context.Context, out io.Writer, bf *benchFlags, results []phaseResult) error {
	written, err := writeOutputs(out, bf, results)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		outf(out, "hatkv bench: interrupted; partial results%s\n", writtenTo(written))
	}
	return nil
}

// writtenTo lists the output files written, for the interruption message.
func writtenTo(files []string) string {
	if len(files) == 0 {
		return " above"
	}
	return " written to " + strings.Join(files, ", ")
}

func printHeader(out io.Writer, bf *benchFlags, w *ycsb.Workload, cl *hatkv.Cluster, conns int, seed uint64) {
	cfg := w.Config()
	outf(out, "hatkv bench: %s, %d records, %d fields x %d B, key %d B, batch %d, %s distribution\n",
		strings.Join(orDefault(bf.workloads, "workloada"), "+"), cfg.RecordCount, cfg.FieldCount, cfg.FieldLength,
		cfg.KeyLength, cfg.BatchSize, cfg.RequestDistribution)
	servers := "server " + bf.addr
	if len(bf.addrs) > 0 {
		servers = fmt.Sprintf("%d servers %s (keys by consistent hashing, %d connections to each)", len(bf.addrs), strings.Join(bf.addrs, ","), conns)
	}
	outf(out, "%s, %d threads over %d connections, transport %s, seed %d\n", servers, bf.threads, conns*len(cl.Addrs()), cl.Plan("Get").Transport, seed)
	for _, warn := range cfg.Warnings {
		outf(out, "warning: %s\n", warn)
	}
	// The plan table each function runs by: its rows (size range, route,
	// engine protocol, polling), as hatgen explain prints them.
	for _, fn := range gen.HatKVHints.Functions {
		p := cl.Plan(fn.Name)
		rows := make([]string, len(p.Rows))
		for i, r := range p.Rows {
			rows[i] = r.String()
		}
		outf(out, "  plan %-8s goal=%s msg=%s transport=%s rows: %s\n",
			fn.Name, p.Goal, sizeOrAuto(p.PayloadSize), p.Transport, strings.Join(rows, "; "))
	}
}

func orDefault(v []string, def string) []string {
	if len(v) == 0 {
		return []string{def}
	}
	return v
}

func sizeOrAuto(n int) string {
	if n <= 0 {
		return "auto"
	}
	return hints.FormatSize(n)
}

// phaseDone is called once runBench's load phase has ended by itself
// (tests set it to interrupt between the phases).
var phaseDone = func(phase string) {}

func runPhase(ctx context.Context, cmd *cobra.Command, bf *benchFlags, cl *hatkv.Cluster, w *ycsb.Workload, phase string, seed uint64) (phaseResult, error) {
	before := cl.Routed()
	res, _, err := measurePhase(ctx, cmd.OutOrStdout(), bf, hatkv.YCSB{Cluster: cl}, w, phase, seed)
	if err == nil && len(cl.Addrs()) > 1 {
		res.Servers = spread(ctx, cmd.OutOrStdout(), cl, before, phase == "load")
	}
	return res, err
}

// measurePhase runs one phase over db and prints its report; the
// countingDB it ran through tells the phase's first error.
func measurePhase(ctx context.Context, out io.Writer, bf *benchFlags, db ycsb.DB, w *ycsb.Workload, phase string, seed uint64) (phaseResult, *countingDB, error) {
	opts := ycsb.RunOptions{Threads: bf.threads, Load: phase == "load", Seed: seed}
	total := w.Config().InsertCount
	// The phase stops through runCtx; calls run under ctx, so the calls in
	// flight when the duration ends complete instead of counting as errors.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if phase == "run" {
		total = w.Config().OperationCount
		if bf.operations > 0 {
			total = bf.operations
		}
		if bf.duration > 0 {
			if bf.operations <= 0 {
				total = math.MaxInt64
			}
			t := time.AfterFunc(bf.duration, stop)
			defer t.Stop()
		}
		opts.Operations = total
	}
	cdb := &countingDB{db: db, ctx: ctx}
	m := ycsb.NewMeasurements()
	progMode := bf.progress
	var status *progress
	if bf.status && bf.statusOut != nil {
		m.TrackIntervals()
		status = startStatus(bf.statusOut, bf.statusIval, phase, m, &cdb.done)
		if progMode == "auto" {
			progMode = "off" // one kind of report at a time on a terminal
		}
	}
	prog := startProgress(out, progMode, phase, total, bf.duration, &cdb.done)
	rep, _ := ycsb.Run(runCtx, cdb, w, opts, m)
	// Whether Ctrl-C cut this phase short is decided when it ends: a
	// signal that comes while its report is printed ends the next phase,
	// not this whole one.
	interrupted := ctx.Err() != nil
	prog.stop()
	if status != nil {
		status.stop()
	}
	outf(out, "\n== %s phase ==\n", phase)
	if interrupted {
		outf(out, "(interrupted: partial results)\n")
	}
	if err := rep.WriteText(out); err != nil {
		return phaseResult{}, cdb, err
	}
	var failed, records int64
	batch := int64(w.Config().BatchSize)
	for _, s := range rep.Ops {
		failed += s.Errors
		switch s.Operation {
		case ycsb.OpMultiRead.String(), ycsb.OpMultiUpdate.String():
			records += s.Count * batch
		default:
			records += s.Count
		}
	}
	if records != rep.Operations && rep.Elapsed > 0 {
		outf(out, "records/s (a multi-operation counts its %d records): %.2f\n", batch, float64(records)/rep.Elapsed.Seconds())
	}
	if failed > 0 {
		outf(out, "warning: %d operations failed (first error: %v)\n", failed, cdb.firstError())
	}
	return phaseResult{Phase: phase, Interrupted: interrupted, Report: rep, m: m}, cdb, nil
}

// serverShare is one server's part of a phase on several servers.
type serverShare struct {
	Addr string `json:"addr"`
	// Keys is how many keys the phase sent to the server (a batch of ten
	// counts ten); Share its fraction of all, Deviation from an equal share.
	Keys      uint64  `json:"keys"`
	Share     float64 `json:"share"`
	Deviation float64 `json:"deviation"`
	// Records is the server's record count after the load phase.
	Records int64 `json:"records,omitempty"`
}

// spread prints and returns how the phase's keys went to the servers,
// and after the load phase how many records each one holds.
func spread(ctx context.Context, out io.Writer, cl *hatkv.Cluster, before []uint64, load bool) []serverShare {
	after := cl.Routed()
	var total uint64
	for i := range after {
		total += after[i] - before[i]
	}
	var stats []*gen.StoreStats
	if load && ctx.Err() == nil {
		stats, _ = cl.ServerStats(ctx) // best effort: the table says so when missing
	}
	fair := float64(total) / float64(len(after))
	if load {
		outf(out, "keys per server (consistent hashing):\n")
	} else {
		outf(out, "key accesses per server (follow the keys' popularity, e.g. zipfian):\n")
	}
	shares := make([]serverShare, len(after))
	for i, a := range cl.Addrs() {
		n := after[i] - before[i]
		sh := serverShare{Addr: a, Keys: n}
		if total > 0 {
			sh.Share, sh.Deviation = float64(n)/float64(total), float64(n)/fair-1
		}
		line := fmt.Sprintf("  %-21s %10d keys  %5.1f %%  (%+.1f %% from an equal share)", a, n, 100*sh.Share, 100*sh.Deviation)
		if stats != nil {
			sh.Records = stats[i].Records
			line += fmt.Sprintf("  %d records stored", sh.Records)
		}
		outf(out, "%s\n", line)
		shares[i] = sh
	}
	return shares
}

// writeOutputs writes the --csv, --json and --plot files and returns the
// ones written. A phase interrupted before it recorded anything has no
// distribution to plot: the plot is left out, saying so on out, and the
// rest of the partial results stand.
func writeOutputs(out io.Writer, bf *benchFlags, results []phaseResult) ([]string, error) {
	if len(results) == 0 {
		return nil, nil
	}
	var written []string
	if bf.csvPath != "" {
		if err := writeFile(bf.csvPath, func(f io.Writer) error { return writeCSV(f, results) }); err != nil {
			return written, err
		}
		written = append(written, bf.csvPath)
	}
	if bf.jsonPath != "" {
		if err := writeFile(bf.jsonPath, func(f io.Writer) error {
			enc := json.NewEncoder(f)
			enc.SetIndent("", "  ")
			return enc.Encode(results)
		}); err != nil {
			return written, err
		}
		written = append(written, bf.jsonPath)
	}
	if bf.plotPath != "" {
		last := results[len(results)-1]
		title := fmt.Sprintf("HatKV %s phase, %d threads", last.Phase, bf.threads)
		if last.Interrupted {
			title += " (interrupted)"
		}
		err := writeFile(bf.plotPath, func(f io.Writer) error { return last.m.WriteSVG(f, title) })
		switch {
		case err == nil:
			written = append(written, bf.plotPath)
		case last.Interrupted && errors.Is(err, ycsb.ErrNothingToPlot):
			outf(out, "hatkv bench: the %s phase was interrupted before it recorded an operation: no plot written to %s\n", last.Phase, bf.plotPath)
		default:
			return written, err
		}
	}
	return written, nil
}

// writeFile fills a temporary file beside path and renames it over path
// once complete: a write that fails, or a plot with nothing to draw,
// leaves an earlier file at path as it was instead of truncating it. A
// symlink is followed (the file it names is replaced, the link stays), and
// what is not a regular file (/dev/stdout, a pipe) is written in place.
func writeFile(path string, fill func(io.Writer) error) error {
	target, mode := path, os.FileMode(0o644)
	if t, err := filepath.EvalSymlinks(path); err == nil {
		target = t
	}
	if fi, err := os.Stat(target); err == nil {
		if !fi.Mode().IsRegular() {
			return writeInPlace(path, fill)
		}
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(mode) // CreateTemp's 0600 would hide results from other users
	err = fillClose(f, fill, err)
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func writeInPlace(path string, fill func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := fillClose(f, fill, nil); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// fillClose fills f unless an earlier step failed (err), closes it either
// way, and returns the first error.
func fillClose(f *os.File, fill func(io.Writer) error, err error) error {
	if err == nil {
		err = fill(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeCSV(w io.Writer, results []phaseResult) error {
	cw := csv.NewWriter(w)
	ff := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	_ = cw.Write([]string{"phase", "operation", "count", "errors", "throughput_ops_sec", "avg_us", "p50_us", "p95_us", "p99_us", "p999_us", "max_us"})
	for _, r := range results {
		phase := r.Phase
		if r.Interrupted {
			phase += " (interrupted)"
		}
		for _, s := range r.Report.Ops {
			_ = cw.Write([]string{phase, s.Operation, strconv.FormatInt(s.Count, 10), strconv.FormatInt(s.Errors, 10),
				ff(s.Throughput), ff(s.AvgUs), ff(s.P50Us), ff(s.P95Us), ff(s.P99Us), ff(s.P999Us), ff(s.MaxUs)})
		}
		_ = cw.Write([]string{phase, "OVERALL", strconv.FormatInt(r.Report.Operations, 10), "",
			ff(r.Report.Throughput), "", "", "", "", "", ""})
	}
	cw.Flush()
	return cw.Error()
}

// startCPUProfile profiles the client process until the returned func runs:
// the client's share of a run's CPU is half of what a transport costs.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
