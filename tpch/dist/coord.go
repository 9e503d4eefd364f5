package dist

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/tpch/duck"
	eb "github.com/hatrpc/hatrpc/tpch/gen/exchangebase"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// WorkerError is a query that failed because of worker Index (at Addr):
// the exchange with it broke, or its fragment failed.
type WorkerError struct {
	Index int
	Addr  string
	Err   error
}

func (e *WorkerError) Error() string {
	return fmt.Sprintf("dist: worker %d (%s): %v", e.Index, e.Addr, e.Err)
}

func (e *WorkerError) Unwrap() error { return e.Err }

// DefaultCallTimeout bounds each exchange call unless WithCallTimeout says
// otherwise. OpenFragment answers once the fragment's first rows exist,
// so the bound must cover a worker's longest fragment at the scale
// served (seconds at SF 1 on two cores); minutes keep a hung worker from
// holding a query for ever without failing a slow but live one.
const DefaultCallTimeout = 5 * time.Minute

// CallTimeoutError is an exchange call that had no answer within the
// coordinator's call timeout: the worker accepted it and went silent.
type CallTimeoutError struct {
	Call  string
	After time.Duration
}

func (e *CallTimeoutError) Error() string {
	return fmt.Sprintf("no answer to %s within %v", e.Call, e.After)
}

// Is makes a CallTimeoutError a context.DeadlineExceeded for errors.Is.
func (e *CallTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Stats are a coordinator's counters since it started.
type Stats struct {
	Queries   int64
	Fragments int64         // fragment runs (one per worker and fragment)
	Chunks    int64         // FetchChunk replies
	Bytes     int64         // the chunks' values on the wire (ChunkBytes)
	Exchange  time.Duration // wall time from a query's first OpenFragment to its last chunk loaded
}

// Coordinator runs statements over a set of workers: it is the Engine of
// the HiveServer2 front end (hs2.WithEngine).
type Coordinator struct {
	db         *sql.DB
	peers      []peer
	addrs      []string
	chunkBytes int32
	callTime   time.Duration
	plans      map[string]*Plan // by normalized TPC-H text
	next       atomic.Int64
	tagPrefix  string

	queries, frags, chunks, bytes, exch atomic.Int64
}

// CoordinatorOption configures a Coordinator.
type CoordinatorOption func(*Coordinator)

// WithChunkBytes sets the maxBytes of every FetchChunk (default 1 MiB).
func WithChunkBytes(n int32) CoordinatorOption { return func(c *Coordinator) { c.chunkBytes = n } }

// WithCallTimeout bounds every exchange call (the dial, OpenFragment,
// each FetchChunk, Cancel): a worker that does not answer within d fails
// its query with a WorkerError wrapping a CallTimeoutError (default
// DefaultCallTimeout; d <= 0 keeps the default).
func WithCallTimeout(d time.Duration) CoordinatorOption {
	return func(c *Coordinator) {
		if d > 0 {
			c.callTime = d
		}
	}
}

// NewCoordinator returns the coordinator of the workers at addrs (worker
// i at addrs[i]) reached with configuration cfg; rdma is HatRPC's lane
// provider ("off": TCP). db is the coordinator's own DuckDB: it must hold
// the replicated tables and empty lineitem and orders (PrepareCoordinator).
func NewCoordinator(ctx context.Context, db *sql.DB, addrs []string, cfg Config, rdma string, opts ...CoordinatorOption) (*Coordinator, error) {
	if len(addrs) == 0 {
		return nil, errors.New("dist: a coordinator needs at least one worker")
	}
	texts, err := duck.Queries(ctx, db)
	if err != nil {
		return nil, err
	}
	byNum, err := tpchPlans(texts)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{db: db, addrs: addrs, chunkBytes: DefaultChunkBytes, callTime: DefaultCallTimeout, plans: map[string]*Plan{},
		tagPrefix: fmt.Sprintf("%x", time.Now().UnixNano())}
	for n, p := range byNum {
		c.plans[normalize(texts[n])] = p
	}
	for _, o := range opts {
		o(c)
	}
	for _, a := range addrs {
		if cfg == Vanilla {
			c.peers = append(c.peers, &apachePeer{addr: a})
		} else {
			copts := append([]client.Option{client.WithRDMA(rdma)}, cfg.ClientOptions()...)
			c.peers = append(c.peers, &hatPeer{addr: a, opts: copts})
		}
	}
	return c, nil
}

// PrepareCoordinator makes a database generated at some scale factor the
// coordinator's: lineitem and orders emptied (their rows live on the
// workers; the schema stays for the clients' metadata calls).
func PrepareCoordinator(ctx context.Context, db *sql.DB) error {
	for _, t := range Partitioned {
		if _, err := db.ExecContext(ctx, "DELETE FROM "+t); err != nil {
			return fmt.Errorf("dist: %w", err)
		}
	}
	return nil
}

// Close closes the connections to the workers.
func (c *Coordinator) Close() error {
	var errs []error
	for _, p := range c.peers {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}

// Stats returns the counters so far.
func (c *Coordinator) Stats() Stats {
	return Stats{Queries: c.queries.Load(), Fragments: c.frags.Load(), Chunks: c.chunks.Load(),
		Bytes: c.bytes.Load(), Exchange: time.Duration(c.exch.Load())}
}

// Lanes is the lane statistics of the HatRPC connections to the workers.
func (c *Coordinator) Lanes() []client.LaneStats {
	var out []client.LaneStats
	for _, p := range c.peers {
		if h, ok := p.(*hatPeer); ok {
			out = append(out, h.lanes()...)
		}
	}
	return out
}

// WorkerInfo asks worker i about itself.
func (c *Coordinator) WorkerInfo(ctx context.Context, i int) (*eb.WorkerInfo, error) {
	var ex exchanger
	release := func() {}
	err := c.call(ctx, "the dial", func(ctx context.Context) (err error) {
		ex, release, err = c.peers[i].session(ctx)
		return err
	})
	if err != nil {
		return nil, &WorkerError{Index: i, Addr: c.addrs[i], Err: err}
	}
	defer release()
	var info *eb.WorkerInfo
	err = c.call(ctx, "Info", func(ctx context.Context) (err error) {
		info, err = ex.Info(ctx)
		return err
	})
	if err != nil {
		return nil, &WorkerError{Index: i, Addr: c.addrs[i], Err: err}
	}
	return info, nil
}

// PlanFor is how the coordinator runs stmt.
func (c *Coordinator) PlanFor(stmt string) *Plan {
	if p := c.plans[normalize(stmt)]; p != nil {
		return p
	}
	return fallbackPlan(stmt)
}

// Query runs stmt (args only for a local statement): the plan's fragments
// on every worker into temporary tables of one connection of the
// coordinator's database, then the final SQL on that connection. The
// cursor's Close drops the tables.
func (c *Coordinator) Query(ctx context.Context, stmt string, args ...any) (hs2.Cursor, error) {
	return c.QueryPlan(ctx, c.PlanFor(stmt), stmt, args...)
}

// QueryPlan runs stmt with plan p.
func (c *Coordinator) QueryPlan(ctx context.Context, p *Plan, stmt string, args ...any) (hs2.Cursor, error) {
	c.queries.Add(1)
	if len(p.Fragments) == 0 {
		return hs2.DB{DB: c.db}.Query(ctx, stmt, args...)
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	cur := &cursor{conn: conn}
	start := time.Now()
	for _, f := range p.Fragments {
		if err := c.gather(ctx, conn, f); err != nil {
			c.exch.Add(int64(time.Since(start)))
			_ = cur.Close()
			return nil, err
		}
		cur.tables = append(cur.tables, f.Table)
	}
	c.exch.Add(int64(time.Since(start)))
	final := p.Final
	if final == "" {
		final = stmt
	}
	rows, err := conn.QueryContext(ctx, final, args...)
	if err != nil {
		_ = cur.Close()
		return nil, err
	}
	cur.Rows = rows
	return cur, nil
}

// cursor is the final SQL's result; closing it drops the fragments'
// tables and returns the connection to the pool.
type cursor struct {
	*sql.Rows
	conn   *sql.Conn
	tables []string
}

func (c *cursor) Close() error {
	var err error
	if c.Rows != nil {
		err = c.Rows.Close()
	}
	for _, t := range c.tables {
		_, e := c.conn.ExecContext(context.Background(), "DROP TABLE IF EXISTS temp.main."+quote(t))
		err = errors.Join(err, e)
	}
	return errors.Join(err, c.conn.Close())
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// stream is one worker's part of a fragment: its columns, then its
// chunks, or the error that ended it.
type stream struct {
	worker int
	meta   []*eb.ColumnMeta
	chunk  *eb.Chunk
	err    error
}

// gather runs f on every worker and loads their rows into the temporary
// table f.Table on conn. The first failure cancels the other workers'
// parts (Cancel of the query's tag) and names its worker.
func (c *Coordinator) gather(parent context.Context, conn *sql.Conn, f Fragment) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	tag := fmt.Sprintf("%s-%d", c.tagPrefix, c.next.Add(1))
	out := make(chan stream)
	var wg sync.WaitGroup
	for i := range c.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.runOn(ctx, i, tag, f.SQL, out)
		}()
	}
	go func() { wg.Wait(); close(out) }()

	stage := "stage_" + f.Table
	var meta []*eb.ColumnMeta
	var app *duckdb.Appender
	var raw driver.Conn
	var failed error
	for s := range out {
		if failed != nil {
			continue // drain: the workers' goroutines end on ctx
		}
		if s.err != nil {
			failed = s.err
			cancel()
			c.cancelAll(tag)
			continue
		}
		if s.meta != nil {
			if err := checkMeta(s.meta, meta); err != nil {
				failed = &WorkerError{Index: s.worker, Addr: c.addrs[s.worker], Err: err}
				cancel()
				c.cancelAll(tag)
				continue
			}
		}
		if meta == nil && s.meta != nil {
			meta = s.meta
			if err := c.createStage(ctx, conn, stage, meta); err != nil {
				failed = err
				cancel()
				c.cancelAll(tag)
				continue
			}
			if err := conn.Raw(func(dc any) error { raw = dc.(driver.Conn); return nil }); err != nil {
				failed = err
				cancel()
				c.cancelAll(tag)
				continue
			}
			a, err := duckdb.NewAppender(raw, "temp", "main", stage)
			if err != nil {
				failed = err
				cancel()
				c.cancelAll(tag)
				continue
			}
			app = a
		}
		if s.chunk != nil {
			if err := appendChunk(app, s.chunk, meta); err != nil {
				failed = &WorkerError{Index: s.worker, Addr: c.addrs[s.worker], Err: err}
				cancel()
				c.cancelAll(tag)
			}
		}
	}
	if failed == nil && parent.Err() != nil {
		// The client gave up (CancelOperation, its deadline): stop the
		// workers' parts, whose calls may not watch our context.
		failed = parent.Err()
		c.cancelAll(tag)
	}
	if app != nil {
		if err := app.Close(); err != nil && failed == nil {
			failed = err
		}
	}
	if failed == nil {
		failed = c.finishStage(ctx, conn, stage, f.Table, meta)
	}
	_, _ = conn.ExecContext(context.Background(), "DROP TABLE IF EXISTS temp.main."+quote(stage))
	return failed
}

// runOn runs one worker's part of a fragment and sends what it reads.
func (c *Coordinator) runOn(ctx context.Context, i int, tag, sqlText string, out chan<- stream) {
	send := func(s stream) bool {
		select {
		case out <- s:
			return true
		case <-ctx.Done():
			return false
		}
	}
	fail := func(err error) {
		if !IsFragmentError(err) && ctx.Err() == nil {
			_ = c.peers[i].close() // the next query dials again: a restarted worker
		}
		if ctx.Err() != nil && !IsFragmentError(err) {
			return // another worker failed first, or the client gave up
		}
		send(stream{worker: i, err: &WorkerError{Index: i, Addr: c.addrs[i], Err: err}})
	}
	var ex exchanger
	release := func() {}
	err := c.call(ctx, "the dial", func(ctx context.Context) (err error) {
		ex, release, err = c.peers[i].session(ctx)
		return err
	})
	if err != nil {
		fail(err)
		return
	}
	defer release()
	c.frags.Add(1)
	var r *eb.OpenResp
	err = c.call(ctx, "OpenFragment", func(ctx context.Context) (err error) {
		r, err = ex.OpenFragment(ctx, &eb.OpenReq{Sql: sqlText, Tag: tag})
		return err
	})
	if err != nil {
		fail(err)
		return
	}
	if !send(stream{worker: i, meta: r.Columns}) {
		return
	}
	for {
		var ch *eb.Chunk
		err := c.call(ctx, "FetchChunk", func(ctx context.Context) (err error) {
			ch, err = ex.FetchChunk(ctx, &eb.FetchReq{Handle: r.Handle, MaxBytes: c.chunkBytes})
			return err
		})
		if err != nil {
			fail(err)
			return
		}
		c.chunks.Add(1)
		c.bytes.Add(ChunkBytes(ch))
		if !send(stream{worker: i, chunk: ch}) || ch.Last {
			return
		}
	}
}

// call runs one exchange call under the call timeout. A call that ran
// out of it while the query still wanted its answer is a
// CallTimeoutError, whatever the transport made of the deadline.
func (c *Coordinator) call(ctx context.Context, name string, fn func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, c.callTime)
	defer cancel()
	err := fn(cctx)
	// The transport may see the deadline (a socket's) before cctx's own
	// timer marks it done: the clock decides.
	if dl, _ := cctx.Deadline(); err != nil && ctx.Err() == nil && !time.Now().Before(dl) {
		return &CallTimeoutError{Call: name, After: c.callTime}
	}
	return err
}

// cancelAll tells every worker to stop the fragments of tag, each under
// a short deadline of its own (the query's context has ended), never
// longer than the call timeout: a hung worker must not hold the failure.
func (c *Coordinator) cancelAll(tag string) {
	d := min(5*time.Second, c.callTime)
	var wg sync.WaitGroup
	for i := range c.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			ex, release, err := c.peers[i].session(ctx)
			if err != nil {
				return
			}
			defer release()
			_ = ex.Cancel(ctx, tag)
		}()
	}
	wg.Wait()
}

// createStage creates the temporary table the chunks are appended to:
// the wire's types (BIGINT, DOUBLE, BOOLEAN, VARCHAR).
func (c *Coordinator) createStage(ctx context.Context, conn *sql.Conn, stage string, meta []*eb.ColumnMeta) error {
	cols := make([]string, len(meta))
	for i, m := range meta {
		cols[i] = fmt.Sprintf("c%d %s", i, stageType(m.Kind))
	}
	_, err := conn.ExecContext(ctx, fmt.Sprintf("CREATE OR REPLACE TEMP TABLE %s (%s)", quote(stage), strings.Join(cols, ", ")))
	return err
}

// finishStage makes table from the staged rows, each column cast back to
// the type the workers' DuckDB gave it.
func (c *Coordinator) finishStage(ctx context.Context, conn *sql.Conn, stage, table string, meta []*eb.ColumnMeta) error {
	if meta == nil {
		return errors.New("dist: no worker described the fragment's columns")
	}
	cols := make([]string, len(meta))
	for i, m := range meta {
		cols[i] = fmt.Sprintf("CAST(c%d AS %s) AS %s", i, m.DbType, quote(m.Name))
	}
	_, err := conn.ExecContext(ctx, fmt.Sprintf("CREATE OR REPLACE TEMP TABLE %s AS SELECT %s FROM %s",
		quote(table), strings.Join(cols, ", "), quote(stage)))
	return err
}
