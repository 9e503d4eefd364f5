// Command tpch serves TPC-H data on DuckDB as a HiveServer2 (`tpch
// serve`) and times the 22 queries through the paper's three
// configurations (`tpch bench`). See tpch/README.md.
package main

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/tpch/bench"
	"github.com/hatrpc/hatrpc/tpch/dist"
	"github.com/hatrpc/hatrpc/tpch/duck"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

const usage = `usage:
  tpch serve [--addr 127.0.0.1:10000] [--sf 0.01] [--config function] [--rdma off|shm|ibv|auto] [--auth nosasl|plain|nosasl,plain --user U] [--idle-session-timeout 1h] [--workers A1,A2,... [--exchange-timeout 5m]]
  tpch worker --index I --of N [--sf 0.01] [--config vanilla,service,function] [--addr A1,A2,A3] [--rdma off|shm|ibv|auto]
  tpch reference [--sf 0.01]   (the queries and published answers as JSON, for clients/hs2_check.py)
  tpch bench [--sf 0.01] [--queries 1-22] [--config vanilla,service,function] [--transport tcp,shm] [--reps 3] [--workers 0] [--csv FILE] [--json FILE] [--svg FILE]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, os.Args[2:])
	case "bench":
		err = runBench(ctx, os.Args[2:])
	case "worker":
		err = worker(ctx, os.Args[2:])
	case "reference":
		err = reference(ctx, os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "tpch:", err)
		os.Exit(1)
	}
}

func open(ctx context.Context, sf float64) (*sql.DB, error) {
	start := time.Now()
	db, err := duck.Open(ctx, sf)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "tpch: SF %g generated in %v\n", sf, time.Since(start).Round(time.Millisecond))
	return db, nil
}

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:10000", "listen address")
	sf := fs.Float64("sf", 0.01, "TPC-H scale factor")
	cfgName := fs.String("config", "function", "vanilla, service or function")
	rdma := fs.String("rdma", "off", "lanes for HatRPC clients: off, shm, ibv or auto")
	authList := fs.String("auth", "nosasl", "the clients the port takes: nosasl, plain (SASL PLAIN, or HTTP Basic credentials, as --user with the password in $TPCH_HS2_PASSWORD), or both (nosasl,plain)")
	user := fs.String("user", "tpch", "the user --auth plain accepts")
	workers := fs.String("workers", "", "comma-separated exchange addresses of `tpch worker`s serving --config (worker i at the i-th); empty: run every query here")
	idle := fs.Duration("idle-session-timeout", time.Hour, "close sessions no call has used for this long, with their operations (Hive's hive.server2.idle.session.timeout); 0: never")
	callTimeout := fs.Duration("exchange-timeout", dist.DefaultCallTimeout, "with --workers: a worker that does not answer an exchange call within this fails its query")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := hs2.ParseConfig(*cfgName)
	if err != nil {
		return err
	}
	password := os.Getenv("TPCH_HS2_PASSWORD")
	auth, err := parseAuth(*authList, *user, password)
	if err != nil {
		return err
	}
	if err := auth.Check(*rdma); err != nil {
		return fmt.Errorf("--auth %s --rdma %s: %w", *authList, *rdma, err)
	}
	db, err := open(ctx, *sf)
	if err != nil {
		return err
	}
	defer db.Close()
	hopts := []hs2.Option{hs2.WithIdleSessionTimeout(*idle)}
	if *workers != "" {
		if err := dist.PrepareCoordinator(ctx, db); err != nil {
			return err
		}
		coord, err := dist.NewCoordinator(ctx, db, strings.Split(*workers, ","), dist.Config(cfg), *rdma,
			dist.WithCallTimeout(*callTimeout))
		if err != nil {
			return err
		}
		defer coord.Close()
		hopts = append(hopts, hs2.WithEngine(coord))
	}
	srv, err := bench.ServeAuth(db, *addr, cfg, *rdma, hopts, auth)
	if err != nil {
		return err
	}
	fmt.Printf("hs2 listening on %s (config %s, rdma %s, auth %s)\n", srv.Addr, cfg, *rdma, *authList)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// parseAuth reads --auth: a comma-separated list of nosasl and plain.
func parseAuth(list, user, password string) (bench.Auth, error) {
	var a bench.Auth
	for _, m := range strings.Split(list, ",") {
		switch strings.TrimSpace(m) {
		case "nosasl":
			a.NOSASL = true
		case "plain":
			if password == "" {
				return a, fmt.Errorf("--auth %s: set the password in $TPCH_HS2_PASSWORD", list)
			}
			a.PLAIN = func(_ context.Context, u, p string) bool {
				return subtle.ConstantTimeCompare([]byte(u), []byte(user)) == 1 && subtle.ConstantTimeCompare([]byte(p), []byte(password)) == 1
			}
		default:
			return a, fmt.Errorf("--auth %q: want nosasl, plain or nosasl,plain", list)
		}
	}
	return a, nil
}

func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	sf := fs.Float64("sf", 0.01, "TPC-H scale factor")
	qs := fs.String("queries", "1-22", "queries to run, e.g. 1-22 or 1,3,5-7")
	cfgs := fs.String("config", "vanilla,service,function", "configurations")
	transports := fs.String("transport", "tcp,shm", "transports: tcp, shm, ibv (vanilla runs on tcp only)")
	reps := fs.Int("reps", 3, "timed runs per query (after one untimed, checked run)")
	timeout := fs.Duration("timeout", 10*time.Minute, "per query")
	csvPath := fs.String("csv", "", "also write the timings as CSV to this file")
	jsonPath := fs.String("json", "", "also write the timings and each setup's totals as JSON to this file")
	svgPath := fs.String("svg", "", "also draw the medians as an SVG bar chart (the paper's Fig. 17) in this file")
	workers := fs.Int("workers", 0, "worker processes (0: every query runs whole in this process)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	queries, err := bench.ParseQueries(*qs)
	if err != nil {
		return err
	}
	var configs []hs2.Config
	for _, n := range strings.Split(*cfgs, ",") {
		c, err := hs2.ParseConfig(strings.TrimSpace(n))
		if err != nil {
			return err
		}
		configs = append(configs, c)
	}
	if *reps < 1 {
		return fmt.Errorf("--reps %d: want at least 1", *reps)
	}
	db, err := open(ctx, *sf)
	if err != nil {
		return err
	}
	defer db.Close()
	text, err := duck.Queries(ctx, db)
	if err != nil {
		return err
	}
	opts := bench.Options{Queries: queries, Reps: *reps, Timeout: *timeout, Progress: os.Stderr}
	if *workers < 0 {
		return fmt.Errorf("--workers %d: want 0 or more", *workers)
	}
	if *workers > 0 {
		cl, err := startCluster(ctx, *workers, *sf, configs, strings.Split(*transports, ","))
		if err != nil {
			return err
		}
		defer cl.Close()
		if err := dist.PrepareCoordinator(ctx, db); err != nil {
			return err
		}
		opts.Cluster = cl
	}
	switch *sf {
	case 0.01, 0.1, 1:
		if opts.Answers, err = bench.Answers(ctx, db, *sf); err != nil {
			return err
		}
	default:
		fmt.Fprintf(os.Stderr, "tpch: no published answers for SF %g: answers are not checked\n", *sf)
	}
	setups := bench.Setups(configs, strings.Split(*transports, ","))
	ts, err := bench.Run(ctx, db, text, setups, opts)
	if err != nil {
		return err
	}
	if err := bench.WriteTable(os.Stdout, ts, setups, queries); err != nil {
		return err
	}
	if *csvPath != "" {
		if err := writeFile(*csvPath, func(w io.Writer) error { return bench.WriteCSV(w, ts) }); err != nil {
			return err
		}
	}
	if *jsonPath != "" {
		if err := writeFile(*jsonPath, func(w io.Writer) error { return bench.WriteJSON(w, ts, setups, queries) }); err != nil {
			return err
		}
	}
	if *svgPath != "" {
		title := fmt.Sprintf("TPC-H SF %g over HatRPC's HiveServer2", *sf)
		return writeFile(*svgPath, func(w io.Writer) error { return bench.WriteSVG(w, ts, setups, queries, title) })
	}
	return nil
}

// startCluster starts n workers (this executable's `worker`) serving
// every configuration, with lanes of the first lane transport asked for.
func startCluster(ctx context.Context, n int, sf float64, cfgs []hs2.Config, transports []string) (*dist.Cluster, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	rdma := "off"
	for _, t := range transports {
		if t = strings.TrimSpace(t); t != "tcp" {
			rdma = t
			break
		}
	}
	dcs := make([]dist.Config, len(cfgs))
	for i, c := range cfgs {
		dcs[i] = dist.Config(c)
	}
	cl, err := dist.StartCluster(ctx, bin, n, sf, dcs, rdma, os.Stderr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "tpch: %d workers ready in %v\n", n, cl.StartTime().Round(time.Millisecond))
	return cl, nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func reference(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reference", flag.ContinueOnError)
	sf := fs.Float64("sf", 0.01, "TPC-H scale factor of the answers: 0.01, 0.1 or 1")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := duck.Open(ctx, 0)
	if err != nil {
		return err
	}
	defer db.Close()
	return bench.WriteReference(ctx, os.Stdout, db, *sf)
}
