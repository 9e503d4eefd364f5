package bench

import (
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/tpch/dist"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// Setup is one column of the benchmark: a configuration over a transport.
type Setup struct {
	Config    hs2.Config
	Transport string // "tcp", or a lane provider: "shm", "ibv"
}

func (s Setup) String() string { return s.Config.String() + "/" + s.Transport }

// rdma is the provider the server and client are given.
func (s Setup) rdma() string {
	if s.Transport == "tcp" {
		return "off"
	}
	return s.Transport
}

// Setups is every configuration over every transport, less vanilla over
// lanes: Apache Thrift has only sockets.
func Setups(cfgs []hs2.Config, transports []string) []Setup {
	var out []Setup
	for _, c := range cfgs {
		for _, t := range transports {
			if c == hs2.Vanilla && t != "tcp" {
				continue
			}
			out = append(out, Setup{Config: c, Transport: t})
		}
	}
	return out
}

// Options of Run.
type Options struct {
	Queries  []int         // query numbers, 1..22
	Reps     int           // timed runs per query, after one untimed
	Answers  []*Result     // when set, every first run is checked against them
	Timeout  time.Duration // per query
	Progress io.Writer     // a line per query as it finishes (nil: none)
	// Cluster, when set, runs every query on its workers: db is then the
	// coordinator's (dist.PrepareCoordinator) and each setup's
	// configuration applies to the exchange hop too.
	Cluster *dist.Cluster
}

// Timing is one query's runs on one setup.
type Timing struct {
	Setup Setup
	Query int
	Runs  []time.Duration
	Rows  int
	// SocketBytes is what the client's socket carried both ways in the
	// checked run, over TCP; -1 over lanes, whose bytes bypass it.
	SocketBytes int64
	// With a cluster: the chunks' bytes over the exchange in the checked
	// run (dist.ChunkBytes), and the exchange's time (first OpenFragment
	// to last chunk loaded) over the timed runs' time.
	// ShuffledBytes are the part of ExchangeBytes the workers sent each
	// other for a shuffle's inputs (dist.Stats.Shuffled).
	Workers       int
	ExchangeBytes int64
	ShuffledBytes int64
	ExchangeShare float64
}

// Best is the fastest run.
func (t Timing) Best() time.Duration { return slices.Min(t.Runs) }

// Median is the median run.
func (t Timing) Median() time.Duration {
	r := slices.Clone(t.Runs)
	slices.Sort(r)
	return r[len(r)/2]
}

// Run times opts.Queries on every setup, each with a server of its own
// over db and one client session. The setups run interleaved: for each
// query, its checked run on every setup, then each repetition on every
// setup, the first setup of a repetition rotating, so that a change of
// the machine's load during the run falls on every setup alike.
func Run(ctx context.Context, db *sql.DB, queries []string, setups []Setup, opts Options) (_ []Timing, err error) {
	rs := make([]*runner, 0, len(setups))
	defer func() {
		for _, r := range rs {
			if e := r.close(ctx); err == nil && e != nil {
				err = fmt.Errorf("%s: %w", r.su, e)
			}
		}
	}()
	for _, su := range setups {
		r, err := openRunner(ctx, db, su, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", su, err)
		}
		rs = append(rs, r)
	}
	bySetup := make([][]Timing, len(rs))
	for _, q := range opts.Queries {
		ts := make([]Timing, len(rs))
		exch := make([]time.Duration, len(rs))
		total := make([]time.Duration, len(rs))
		for i, r := range rs {
			ts[i] = Timing{Setup: r.su, Query: q, SocketBytes: -1}
		}
		for rep := 0; rep <= opts.Reps; rep++ {
			for k := range rs {
				i := (k + rep) % len(rs)
				d, x, err := rs[i].once(ctx, queries, q, rep, &ts[i], opts)
				if err != nil {
					return nil, fmt.Errorf("%s: Q%d: %w", rs[i].su, q, err)
				}
				if rep > 0 {
					ts[i].Runs = append(ts[i].Runs, d)
					exch[i], total[i] = exch[i]+x, total[i]+d
				}
			}
		}
		for i := range rs {
			if total[i] > 0 && rs[i].coord != nil {
				ts[i].ExchangeShare = float64(exch[i]) / float64(total[i])
			}
			if opts.Progress != nil {
				t := ts[i]
				fmt.Fprintf(opts.Progress, "%-16s Q%-2d best %8.2f ms  median %8.2f ms  %d rows  %s%s\n",
					t.Setup, q, ms(t.Best()), ms(t.Median()), t.Rows, socketText(t.SocketBytes), exchangeText(t))
			}
			bySetup[i] = append(bySetup[i], ts[i])
		}
	}
	var out []Timing
	for _, ts := range bySetup {
		out = append(out, ts...)
	}
	return out, nil
}

// runner is one setup's server (and coordinator, with a cluster) and
// client session, open for the whole run.
type runner struct {
	su      Setup
	coord   *dist.Coordinator
	srv     *Server
	s       Session
	counter *Counter
}

func openRunner(ctx context.Context, db *sql.DB, su Setup, opts Options) (_ *runner, err error) {
	r := &runner{su: su}
	defer func() {
		if err != nil {
			_ = r.close(ctx)
		}
	}()
	var hopts []hs2.Option
	if opts.Cluster != nil {
		dc := dist.Config(su.Config) // the same three, in the same order
		if r.coord, err = dist.NewCoordinator(ctx, db, opts.Cluster.Addrs(dc), dc, su.rdma()); err != nil {
			return nil, err
		}
		hopts = append(hopts, hs2.WithEngine(r.coord))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.srv = ServeWith(db, ln, su.Config, su.rdma(), hopts)
	switch {
	case su.Config == hs2.Vanilla:
		r.counter = &Counter{}
		var conn net.Conn
		if conn, err = r.counter.Dial(ctx, r.srv.Addr); err == nil {
			r.s, err = OpenApacheConn(ctx, conn, opts.Timeout)
		}
	case su.rdma() == "off":
		r.counter = &Counter{}
		r.s, err = OpenHatRPC(ctx, r.srv.Addr, su.Config, "off", client.WithDialer(r.counter.Dial))
	default:
		r.s, err = OpenHatRPC(ctx, r.srv.Addr, su.Config, su.rdma())
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (r *runner) close(ctx context.Context) error {
	var errs []error
	if r.s != nil {
		errs = append(errs, r.s.Close(ctx))
	}
	if r.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs = append(errs, r.srv.Shutdown(sctx))
		cancel()
	}
	if r.coord != nil {
		errs = append(errs, r.coord.Close())
	}
	return errors.Join(errs...)
}

// once runs query q as repetition rep (0: the checked run, which fills
// t's rows, bytes and exchange counts) and returns its time and, with a
// cluster, its time in the exchange.
func (r *runner) once(ctx context.Context, queries []string, q, rep int, t *Timing, opts Options) (d, exch time.Duration, err error) {
	var st dist.Stats
	if r.coord != nil {
		st = r.coord.Stats()
	}
	var before int64
	if r.counter != nil {
		before = r.counter.Bytes()
	}
	qctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	start := time.Now()
	res, err := r.s.Query(qctx, queries[q])
	d = time.Since(start)
	cancel()
	if err != nil {
		return 0, 0, err
	}
	if r.coord != nil {
		now := r.coord.Stats()
		exch = now.Exchange - st.Exchange
		if rep == 0 {
			t.Workers = len(opts.Cluster.Addrs(dist.Config(r.su.Config)))
			t.ExchangeBytes, t.ShuffledBytes = now.Bytes-st.Bytes, now.Shuffled-st.Shuffled
		}
	}
	if rep == 0 {
		t.Rows = len(res.Rows)
		if r.counter != nil {
			t.SocketBytes = r.counter.Bytes() - before
		}
		if opts.Answers != nil {
			if err := Compare(res, opts.Answers[q]); err != nil {
				return 0, 0, fmt.Errorf("wrong answer: %w", err)
			}
		}
	}
	return d, exch, nil
}

func exchangeText(t Timing) string {
	if t.Workers == 0 {
		return ""
	}
	return fmt.Sprintf("  exchange: %d bytes (%d shuffled), %.0f%% of the time", t.ExchangeBytes, t.ShuffledBytes, 100*t.ExchangeShare)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func socketText(n int64) string {
	if n < 0 {
		return "socket bytes: (lanes)"
	}
	return fmt.Sprintf("socket bytes: %d", n)
}

// WriteTable prints one row per query with each setup's best and median,
// and the totals of the medians.
func WriteTable(w io.Writer, ts []Timing, setups []Setup, queries []int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	workers := distributed(ts)
	head := []string{"query"}
	for _, su := range setups {
		head = append(head, su.String()+" best ms", "median ms")
		if workers {
			head = append(head, "exch KB", "shuf KB", "exch %")
		}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	byKey := map[string]Timing{}
	for _, t := range ts {
		byKey[fmt.Sprintf("%s/%d", t.Setup, t.Query)] = t
	}
	for _, q := range queries {
		row := []string{fmt.Sprintf("Q%d", q)}
		for _, su := range setups {
			t := byKey[fmt.Sprintf("%s/%d", su, q)]
			row = append(row, fmt.Sprintf("%.2f", ms(t.Best())), fmt.Sprintf("%.2f", ms(t.Median())))
			if workers {
				row = append(row, fmt.Sprintf("%.1f", float64(t.ExchangeBytes)/1024), fmt.Sprintf("%.1f", float64(t.ShuffledBytes)/1024),
					fmt.Sprintf("%.0f", 100*t.ExchangeShare))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	row := []string{"total (medians)"}
	for _, tot := range totals(ts, setups, queries, Timing.Median) {
		row = append(row, "", fmt.Sprintf("%.2f", ms(tot)))
		if workers {
			row = append(row, "", "", "")
		}
	}
	fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	return tw.Flush()
}

// WriteCSV writes one line per query and setup: config, transport, query,
// rows, the socket's bytes (-1 over lanes), best and median in
// microseconds, and every run.
func WriteCSV(w io.Writer, ts []Timing) error {
	cw := csv.NewWriter(w)
	workers := distributed(ts)
	head := []string{"config", "transport", "query", "rows", "socket_bytes", "best_us", "median_us", "runs_us"}
	if workers {
		head = append(head, "workers", "exchange_bytes", "shuffled_bytes", "exchange_share")
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, t := range ts {
		runs := make([]string, len(t.Runs))
		for i, r := range t.Runs {
			runs[i] = strconv.FormatInt(r.Microseconds(), 10)
		}
		rec := []string{t.Setup.Config.String(), t.Setup.Transport, strconv.Itoa(t.Query), strconv.Itoa(t.Rows),
			strconv.FormatInt(t.SocketBytes, 10),
			strconv.FormatInt(t.Best().Microseconds(), 10), strconv.FormatInt(t.Median().Microseconds(), 10),
			strings.Join(runs, " ")}
		if workers {
			rec = append(rec, strconv.Itoa(t.Workers), strconv.FormatInt(t.ExchangeBytes, 10), strconv.FormatInt(t.ShuffledBytes, 10),
				strconv.FormatFloat(t.ExchangeShare, 'f', 3, 64))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// distributed says whether ts ran on workers (the table and the CSV
// then carry the exchange's columns too).
func distributed(ts []Timing) bool {
	for _, t := range ts {
		if t.Workers > 0 {
			return true
		}
	}
	return false
}

// ParseQueries reads a query list such as "1-22" or "1,3,5-7".
func ParseQueries(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 1 || b > 22 || a > b {
			return nil, fmt.Errorf("bench: bad query list %q: want numbers 1-22 and ranges such as 1,3,5-7", s)
		}
		for q := a; q <= b; q++ {
			out = append(out, q)
		}
	}
	return out, nil
}
