package dist

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

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
	Bytes     int64         // the chunks' values on the wire (ChunkBytes), shuffles' included
	Shuffled  int64         // of Bytes, those the workers sent each other for shuffles' inputs
	Exchange  time.Duration // wall time from a query's first OpenFragment to its last chunk loaded
}

// Coordinator runs statements over a set of workers: it is the Engine of
// the HiveServer2 front end (hs2.WithEngine).
type Coordinator struct {
	*puller
	db        *sql.DB
	plans     map[string]*Plan // by normalized TPC-H text
	next      atomic.Int64
	tagPrefix string

	queries, exch atomic.Int64
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
	byNum, err := tpchPlans(texts, len(addrs))
	if err != nil {
		return nil, err
	}
	c := &Coordinator{puller: &puller{addrs: addrs, chunkBytes: DefaultChunkBytes, callTime: DefaultCallTimeout},
		db: db, plans: map[string]*Plan{},
		tagPrefix: fmt.Sprintf("%x", time.Now().UnixNano())}
	for n, p := range byNum {
		c.plans[normalize(texts[n])] = p
	}
	for _, o := range opts {
		o(c)
	}
	c.peers = newPeers(addrs, cfg, rdma)
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
		Bytes: c.bytes.Load(), Shuffled: c.inputs.Load(), Exchange: time.Duration(c.exch.Load())}
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
		ex, release, _, err = c.peers[i].session(ctx)
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
		tag := fmt.Sprintf("%s-%d", c.tagPrefix, c.next.Add(1))
		if _, err := c.gather(ctx, conn, f.Table, tag, c.requests(f, tag)); err != nil {
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

// requests are fragment f's OpenFragment to each worker, with a
// shuffle's inputs and the workers' addresses.
func (c *Coordinator) requests(f Fragment, tag string) func(i int) *eb.OpenReq {
	return func(i int) *eb.OpenReq {
		req := &eb.OpenReq{Sql: f.SQL, Tag: tag}
		if len(f.Inputs) > 0 {
			req.Peers = c.addrs
			for _, in := range f.Inputs {
				req.Inputs = append(req.Inputs, &eb.Input{Table: in.Table, Sql: in.SQL, Key: in.Key})
			}
		}
		return req
	}
}
