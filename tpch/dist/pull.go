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
	eb "github.com/hatrpc/hatrpc/tpch/gen/exchangebase"
)

// puller loads fragments' rows from a set of workers into temporary
// tables of a DuckDB connection: the coordinator's, and a worker's for a
// shuffle's inputs.
type puller struct {
	peers      []peer
	addrs      []string
	chunkBytes int32
	callTime   time.Duration

	frags, chunks, bytes, inputs atomic.Int64
}

// newPeers are clients of the workers at addrs in configuration cfg.
func newPeers(addrs []string, cfg Config, rdma string) []peer {
	var out []peer
	for _, a := range addrs {
		if cfg == Vanilla {
			out = append(out, &apachePeer{addr: a})
		} else {
			copts := append([]client.Option{client.WithRDMA(rdma)}, cfg.ClientOptions()...)
			out = append(out, &hatPeer{addr: a, opts: copts})
		}
	}
	return out
}

// close drops the connections to the workers.
func (c *puller) close() error {
	var errs []error
	for _, p := range c.peers {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}

// stream is one worker's part of a fragment: its columns, then its
// chunks, or the error that ended it.
type stream struct {
	worker int
	meta   []*eb.ColumnMeta
	chunk  *eb.Chunk
	err    error
}

// gather opens req(i) on every worker i under tag and loads their rows
// into the temporary table named table on conn; it returns the bytes the
// workers sent (their inputs' included). The first failure cancels the
// other workers' parts (Cancel of tag) and names its worker.
func (c *puller) gather(parent context.Context, conn *sql.Conn, table, tag string, req func(i int) *eb.OpenReq) (int64, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	out := make(chan stream)
	var wg sync.WaitGroup
	var bytes atomic.Int64
	for i := range c.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.runOn(ctx, i, req(i), out, &bytes)
		}()
	}
	go func() { wg.Wait(); close(out) }()

	stage := "stage_" + table
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
		failed = c.finishStage(ctx, conn, stage, table, meta)
	}
	_, _ = conn.ExecContext(context.Background(), "DROP TABLE IF EXISTS temp.main."+quote(stage))
	return bytes.Load(), failed
}

// runOn runs one worker's part of a fragment and sends what it reads.
func (c *puller) runOn(ctx context.Context, i int, req *eb.OpenReq, out chan<- stream, bytes *atomic.Int64) {
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
	ex, release, r, first, err := c.open(ctx, i, req)
	if err != nil {
		fail(err)
		return
	}
	defer release()
	if n := r.GetInputBytes(); n > 0 {
		c.inputs.Add(n)
		c.bytes.Add(n)
		bytes.Add(n)
	}
	if !send(stream{worker: i, meta: r.Columns}) {
		return
	}
	for ch := first; ; {
		c.chunks.Add(1)
		n := ChunkBytes(ch)
		c.bytes.Add(n)
		bytes.Add(n)
		if !send(stream{worker: i, chunk: ch}) || ch.Last {
			return
		}
		if ch, err = c.fetch(ctx, ex, r.Handle); err != nil {
			fail(err)
			return
		}
	}
}

func (c *puller) fetch(ctx context.Context, ex exchanger, handle int64) (*eb.Chunk, error) {
	var ch *eb.Chunk
	err := c.call(ctx, "FetchChunk", func(ctx context.Context) (err error) {
		ch, err = ex.FetchChunk(ctx, &eb.FetchReq{Handle: handle, MaxBytes: c.chunkBytes})
		return err
	})
	return ch, err
}

// call runs one exchange call under the call timeout. A call that ran
// out of it while the query still wanted its answer is a
// CallTimeoutError, whatever the transport made of the deadline.
func (c *puller) call(ctx context.Context, name string, fn func(context.Context) error) error {
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

// open dials worker i (or reuses its connection), opens req on it and
// fetches the first chunk. A reused connection can have died unseen
// since its last call (the worker was restarted; calls on a HatRPC
// connection can then fail on its lanes only): a failure of the
// exchange itself there, before any row was passed on, is tried once
// more on a fresh connection, and the first attempt's fragment closed.
func (c *puller) open(ctx context.Context, i int, req *eb.OpenReq) (exchanger, func(), *eb.OpenResp, *eb.Chunk, error) {
	orphan := int64(-1)
	for attempt := 0; ; attempt++ {
		var ex exchanger
		var fresh bool
		release := func() {}
		err := c.call(ctx, "the dial", func(ctx context.Context) (err error) {
			ex, release, fresh, err = c.peers[i].session(ctx)
			return err
		})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if orphan >= 0 {
			_ = c.call(ctx, "CloseFragment", func(ctx context.Context) error { return ex.CloseFragment(ctx, orphan) })
		}
		c.frags.Add(1)
		var r *eb.OpenResp
		err = c.call(ctx, "OpenFragment", func(ctx context.Context) (err error) {
			r, err = ex.OpenFragment(ctx, req)
			return err
		})
		var ch *eb.Chunk
		if err == nil {
			if ch, err = c.fetch(ctx, ex, r.Handle); err == nil {
				return ex, release, r, ch, nil
			}
			orphan = r.Handle
		}
		release()
		var te *CallTimeoutError
		if fresh || attempt > 0 || IsFragmentError(err) || errors.As(err, &te) || ctx.Err() != nil {
			return nil, nil, nil, nil, err
		}
		c.frags.Add(-1)
		_ = c.peers[i].close()
	}
}

// cancelAll tells every worker to stop the fragments of tag, each under
// a short deadline of its own (the query's context has ended), never
// longer than the call timeout: a hung worker must not hold the failure.
func (c *puller) cancelAll(tag string) {
	d := min(5*time.Second, c.callTime)
	var wg sync.WaitGroup
	for i := range c.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			ex, release, _, err := c.peers[i].session(ctx)
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
func (c *puller) createStage(ctx context.Context, conn *sql.Conn, stage string, meta []*eb.ColumnMeta) error {
	cols := make([]string, len(meta))
	for i, m := range meta {
		cols[i] = fmt.Sprintf("c%d %s", i, stageType(m.Kind))
	}
	_, err := conn.ExecContext(ctx, fmt.Sprintf("CREATE OR REPLACE TEMP TABLE %s (%s)", quote(stage), strings.Join(cols, ", ")))
	return err
}

// finishStage makes table from the staged rows, each column cast back to
// the type the workers' DuckDB gave it.
func (c *puller) finishStage(ctx context.Context, conn *sql.Conn, stage, table string, meta []*eb.ColumnMeta) error {
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
