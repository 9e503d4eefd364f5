// Package dist runs TPC-H on a coordinator and N DuckDB worker processes
// that talk over the exchange service (idl/exchange.thrift): each worker
// holds its partition of lineitem and orders (l_orderkey % N == index)
// and the small tables whole; the coordinator sends it per-partition SQL
// (a fragment), reads the result in chunks, loads them into temporary
// tables of its own DuckDB and runs the finishing SQL there (plans.go).
package dist

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/tpch/duck"
	eb "github.com/hatrpc/hatrpc/tpch/gen/exchangebase"
)

// DefaultChunkBytes is the chunk size the coordinator asks for and the
// most a worker sends when asked for more.
const (
	DefaultChunkBytes = 1 << 20
	maxChunkBytes     = 16 << 20
	maxFragments      = 256
	// FragmentIdle is how long a fragment may go without a call before
	// the worker drops it: a coordinator that went away mid-query leaves
	// none open for longer.
	FragmentIdle = 10 * time.Minute
)

// Worker answers the exchange service on its partition of the data. It
// satisfies the handler interfaces of gen/exchange (HatRPC) and, through
// Apache, of apachegen/exchangebase (vanilla Thrift).
type Worker struct {
	db           *sql.DB
	index, count int
	sf           float64
	next         atomic.Int64

	mu    sync.Mutex
	frags map[int64]*fragment
	tags  map[string]map[*fragment]struct{}
	// cancelled remembers the tags Cancel was called for: a Cancel can
	// overtake its query's OpenFragment (they travel by different
	// calls), and the fragment that arrives after it must not run.
	cancelled map[string]time.Time
	// pullers are the clients of the other workers for shuffles' inputs,
	// by configuration and peer list (one set of connections each).
	pullers map[string]*puller
	spools  map[string]*spool // by tag and SQL (spool.go)

	stop    chan struct{}
	stopped sync.WaitGroup
}

// fragment is one open fragment: its query runs under its own context
// (the OpenFragment call returns before the rows are read) and its
// cursor is read chunk by chunk.
type fragment struct {
	handle int64
	tag    string
	cancel context.CancelFunc
	meta   []*eb.ColumnMeta

	used atomic.Int64 // unix nanoseconds of the last call on it

	mu     sync.Mutex
	rows   *sql.Rows
	ahead  bool
	closed bool
	conn   *sql.Conn // a shuffle's: its inputs' temporary tables live here
	tables []string
	spool  *spool // a share request's input, released when the fragment goes
}

// Partition keeps on db the rows of lineitem and orders of worker index
// of count (orderkey % count == index, the same hash for both tables, so
// a join on orderkey never leaves a worker); the other tables stay whole.
func Partition(ctx context.Context, db *sql.DB, index, count int) error {
	if count < 1 || index < 0 || index >= count {
		return fmt.Errorf("dist: worker %d of %d: want 0 <= index < count", index, count)
	}
	for _, q := range []string{
		fmt.Sprintf("DELETE FROM lineitem WHERE l_orderkey %% %d <> %d", count, index),
		fmt.Sprintf("DELETE FROM orders WHERE o_orderkey %% %d <> %d", count, index),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("dist: partition: %w", err)
		}
	}
	return nil
}

// OpenWorker generates TPC-H at scale factor sf (dbgen is deterministic)
// and keeps worker index of count's partition.
func OpenWorker(ctx context.Context, sf float64, index, count int) (*Worker, error) {
	db, err := duck.Open(ctx, sf)
	if err != nil {
		return nil, err
	}
	if err := Partition(ctx, db, index, count); err != nil {
		_ = db.Close()
		return nil, err
	}
	w := &Worker{db: db, index: index, count: count, sf: sf,
		frags: map[int64]*fragment{}, tags: map[string]map[*fragment]struct{}{},
		cancelled: map[string]time.Time{}, pullers: map[string]*puller{}, spools: map[string]*spool{}, stop: make(chan struct{})}
	w.stopped.Add(1)
	go w.expireLoop()
	return w, nil
}

func (w *Worker) expireLoop() {
	defer w.stopped.Done()
	t := time.NewTicker(FragmentIdle / 4)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			w.expire(now)
		}
	}
}

// expire drops the fragments idle for FragmentIdle at now.
func (w *Worker) expire(now time.Time) {
	w.mu.Lock()
	var idle []*fragment
	for _, f := range w.frags {
		if now.UnixNano()-f.used.Load() >= int64(FragmentIdle) {
			idle = append(idle, f)
		}
	}
	w.mu.Unlock()
	for _, f := range idle {
		w.drop(f)
	}
	w.dropSpools("", now.Add(-FragmentIdle), false)
}

// Close ends every fragment and closes the database.
func (w *Worker) Close() error {
	close(w.stop)
	w.stopped.Wait()
	w.mu.Lock()
	var fs []*fragment
	for _, f := range w.frags {
		fs = append(fs, f)
	}
	w.mu.Unlock()
	for _, f := range fs {
		w.drop(f)
	}
	w.mu.Lock()
	ps := w.pullers
	w.pullers = map[string]*puller{}
	w.mu.Unlock()
	for _, p := range ps {
		_ = p.close()
	}
	w.dropSpools("", time.Time{}, true)
	return w.db.Close()
}

// pullerFor is the client of peers in configuration cfg over rdma.
func (w *Worker) pullerFor(cfg Config, rdma string, peers []string) *puller {
	key := cfg.String() + "|" + rdma + "|" + strings.Join(peers, ",")
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pullers[key]
	if p == nil {
		p = &puller{peers: newPeers(peers, cfg, rdma), addrs: peers, chunkBytes: DefaultChunkBytes, callTime: DefaultCallTimeout}
		w.pullers[key] = p
	}
	return p
}

func (w *Worker) Info(ctx context.Context) (*eb.WorkerInfo, error) {
	info := &eb.WorkerInfo{Index: int32(w.index), Count: int32(w.count), Sf: w.sf, OpenFragments: int32(w.Open())}
	err := w.db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM lineitem), (SELECT count(*) FROM orders)").
		Scan(&info.LineitemRows, &info.OrdersRows)
	return info, err
}

func fragErr(format string, args ...any) error {
	return &eb.FragmentError{Message: fmt.Sprintf(format, args...)}
}

// OpenFragment starts req.Sql and answers once its first rows (or its
// error) are known. A Cancel of req.Tag stops it, also while it opens.
// Inputs are pulled from the peers with HatRPC's function configuration
// over TCP; Serve's handler pulls in the configuration it serves.
func (w *Worker) OpenFragment(ctx context.Context, req *eb.OpenReq) (*eb.OpenResp, error) {
	return w.open(ctx, req, Function, "off")
}

func (w *Worker) open(ctx context.Context, req *eb.OpenReq, cfg Config, rdma string) (*eb.OpenResp, error) {
	qctx, cancel := context.WithCancel(context.Background())
	f := &fragment{handle: w.next.Add(1), tag: req.Tag, cancel: cancel}
	f.used.Store(time.Now().UnixNano())
	w.mu.Lock()
	if _, ok := w.cancelled[f.tag]; ok {
		w.mu.Unlock()
		cancel()
		return nil, fragErr("worker %d: query %s was cancelled", w.index, f.tag)
	}
	if len(w.frags) >= maxFragments {
		w.mu.Unlock()
		cancel()
		return nil, fragErr("worker %d: %d fragments open: close some first", w.index, maxFragments)
	}
	w.frags[f.handle] = f
	if w.tags[f.tag] == nil {
		w.tags[f.tag] = map[*fragment]struct{}{}
	}
	w.tags[f.tag][f] = struct{}{}
	w.mu.Unlock()
	// The call's own context ends the query too while it opens: a
	// coordinator that gives up on the call does not leave it running.
	stop := context.AfterFunc(ctx, cancel)
	var rows *sql.Rows
	var err error
	var inBytes int64
	if len(req.Inputs) > 0 {
		inBytes, err = w.pullInputs(qctx, f, req, cfg, rdma)
		if err == nil {
			rows, err = f.conn.QueryContext(qctx, req.Sql)
		}
	} else if req.Spool != nil {
		var sp *spool
		if sp, err = w.spoolFor(qctx, req.Tag, req.Spool.Sql); err == nil {
			f.mu.Lock()
			f.spool = sp
			f.mu.Unlock()
			rows, err = w.db.QueryContext(qctx, withSpool(req.Sql, sp.table))
		}
	} else {
		rows, err = w.db.QueryContext(qctx, req.Sql)
	}
	stop()
	if err == nil && qctx.Err() != nil {
		_ = rows.Close()
		err = qctx.Err()
	}
	if err != nil {
		w.drop(f)
		return nil, fragErr("worker %d: %v", w.index, err)
	}
	meta, err := metaOf(rows)
	if err != nil {
		_ = rows.Close()
		w.drop(f)
		return nil, fragErr("worker %d: %v", w.index, err)
	}
	f.mu.Lock()
	if f.closed { // cancelled while it opened
		f.mu.Unlock()
		_ = rows.Close()
		return nil, fragErr("worker %d: fragment cancelled", w.index)
	}
	f.rows, f.meta, f.ahead = rows, meta, rows.Next()
	f.mu.Unlock()
	resp := &eb.OpenResp{Handle: f.handle, Columns: meta}
	if inBytes > 0 {
		resp.InputBytes = &inBytes
	}
	return resp, nil
}

// pullInputs loads req's inputs from the peers into temporary tables of
// a connection of f's own, under req's tag (so a Cancel of the query
// reaches every worker's part of them).
func (w *Worker) pullInputs(ctx context.Context, f *fragment, req *eb.OpenReq, cfg Config, rdma string) (int64, error) {
	if len(req.Peers) == 0 {
		return 0, errors.New("a fragment with inputs and no peers")
	}
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		_ = conn.Close()
		return 0, errors.New("fragment cancelled")
	}
	f.conn = conn
	f.mu.Unlock()
	if len(req.Peers) != w.count {
		return 0, fmt.Errorf("%d peers for %d workers", len(req.Peers), w.count)
	}
	p := w.pullerFor(cfg, rdma, req.Peers)
	var total int64
	for _, in := range req.Inputs {
		if in == nil || in.Table == "" {
			return total, errors.New("an input without a table")
		}
		f.mu.Lock()
		f.tables = append(f.tables, in.Table)
		f.mu.Unlock()
		share := &eb.OpenReq{Sql: shareSQL(in.Key, w.index, w.count), Tag: req.Tag, Spool: in}
		n, err := p.gather(ctx, conn, in.Table, req.Tag, func(int) *eb.OpenReq { return share })
		total += n
		if err != nil {
			return total, fmt.Errorf("input %s: %w", in.Table, err)
		}
	}
	return total, nil
}

// FetchChunk reads rows of an open fragment until the chunk holds about
// req.MaxBytes (at least one row); the last chunk says so and the
// fragment is closed after it.
func (w *Worker) FetchChunk(ctx context.Context, req *eb.FetchReq) (*eb.Chunk, error) {
	w.mu.Lock()
	f := w.frags[req.Handle]
	w.mu.Unlock()
	if f == nil {
		return nil, fragErr("worker %d: no open fragment %d", w.index, req.Handle)
	}
	f.used.Store(time.Now().UnixNano())
	limit := int(req.MaxBytes)
	if limit <= 0 || limit > maxChunkBytes {
		limit = maxChunkBytes
	}
	f.mu.Lock()
	if f.closed || f.rows == nil {
		f.mu.Unlock()
		return nil, fragErr("worker %d: fragment %d cancelled", w.index, req.Handle)
	}
	b := newChunkBuilder(f.meta)
	vals := make([]any, len(f.meta))
	ptrs := make([]any, len(f.meta))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var err error
	for f.ahead && b.bytes < limit && ctx.Err() == nil {
		if err = f.rows.Scan(ptrs...); err != nil {
			break
		}
		if err = b.add(vals); err != nil {
			break
		}
		f.ahead = f.rows.Next()
	}
	if err == nil && !f.ahead {
		err = f.rows.Err()
	}
	if err == nil {
		err = ctx.Err()
	}
	last := !f.ahead
	f.mu.Unlock()
	if err != nil || last {
		w.drop(f)
	}
	if err != nil {
		return nil, fragErr("worker %d: %v", w.index, err)
	}
	return b.chunk(last), nil
}

func (w *Worker) CloseFragment(ctx context.Context, handle int64) error {
	w.mu.Lock()
	f := w.frags[handle]
	w.mu.Unlock()
	if f != nil {
		w.drop(f)
	}
	return nil
}

// Cancel stops and releases every fragment of tag.
func (w *Worker) Cancel(ctx context.Context, tag string) error {
	w.mu.Lock()
	w.rememberCancel(tag)
	var fs []*fragment
	for f := range w.tags[tag] {
		fs = append(fs, f)
	}
	w.mu.Unlock()
	for _, f := range fs {
		w.drop(f)
	}
	w.dropSpools(tag, time.Time{}, false)
	return nil
}

// maxCancelled bounds the tags remembered as cancelled; cancelKeep is
// how long one is kept once the map is full (a late OpenFragment comes
// within its call's deadline, far less).
const (
	maxCancelled = 4096
	cancelKeep   = time.Minute
)

// rememberCancel records tag as cancelled; w.mu is held.
func (w *Worker) rememberCancel(tag string) {
	now := time.Now()
	if len(w.cancelled) >= maxCancelled {
		for t, at := range w.cancelled {
			if now.Sub(at) > cancelKeep {
				delete(w.cancelled, t)
			}
		}
		if len(w.cancelled) >= maxCancelled {
			clear(w.cancelled)
		}
	}
	w.cancelled[tag] = now
}

// Open is the number of fragments open now.
func (w *Worker) Open() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.frags)
}

// drop cancels f's query, closes its cursor and forgets it.
func (w *Worker) drop(f *fragment) {
	f.cancel()
	w.mu.Lock()
	delete(w.frags, f.handle)
	if m := w.tags[f.tag]; m != nil {
		delete(m, f)
		if len(m) == 0 {
			delete(w.tags, f.tag)
		}
	}
	w.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.rows != nil {
		_ = f.rows.Close()
		f.rows = nil
	}
	if f.spool != nil {
		w.releaseSpool(f.spool)
		f.spool = nil
	}
	if f.conn != nil {
		// Temporary tables outlive a pooled connection's Close.
		for _, t := range f.tables {
			_, _ = f.conn.ExecContext(context.Background(), "DROP TABLE IF EXISTS temp.main."+quote(t))
		}
		_ = f.conn.Close()
		f.conn, f.tables = nil, nil
	}
}

// IsFragmentError says whether err is a worker's answer (the fragment
// failed) rather than a failure of the exchange itself.
func IsFragmentError(err error) bool {
	var fe *eb.FragmentError
	return errors.As(err, &fe)
}
