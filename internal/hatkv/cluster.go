package hatkv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
)

// KV is the HatKV service as a caller sees it: the generated client of one
// server (*hatkv.HatKVClient) and a Cluster of several implement it.
type KV interface {
	Get(ctx context.Context, key string, fields []string) (hatkv.Record, error)
	Put(ctx context.Context, key string, fields hatkv.Record) error
	Delete(ctx context.Context, key string) error
	MultiGet(ctx context.Context, keys []string, fields []string) ([]*hatkv.Lookup, error)
	MultiPut(ctx context.Context, records []*hatkv.KeyRecord) error
	Scan(ctx context.Context, startKey string, count int32, fields []string) ([]*hatkv.KeyRecord, error)
	ScanStream(ctx context.Context, req *hatkv.ScanRequest) (hatkv.HatKVScanStreamClient, error)
	Stats(ctx context.Context) (*hatkv.StoreStats, error)
}

var (
	_ KV = (*hatkv.HatKVClient)(nil)
	_ KV = (*Cluster)(nil)
)

// Cluster spreads keys over independent HatKV servers by consistent
// hashing (Ring): each key lives on exactly one server, chosen from the
// key alone, so every client with the same address list agrees on it.
// Each server has its own Client (its connections and fast-path lanes).
// The servers know nothing of each other: there is no replication, and a
// server that is down makes its keys fail while the others keep working.
//
// Operations on several keys are split by server and run in parallel:
// MultiGet's answer is in the caller's key order, each server's part read
// from one snapshot of that server (not one snapshot of all). MultiPut is
// atomic per server only: a failure on one server leaves the parts sent
// to the others committed (the error names them). Scan returns the first
// count records with keys >= start in key order over all servers — what
// one server holding every key would return — by asking each server for
// count records and merging; each server's part is its own snapshot.
type Cluster struct {
	addrs   []string
	servers []*member
	ring    *Ring
	opts    []ClientOption
	ops     []atomic.Uint64 // keys routed to each server
}

// member is one server of a Cluster: its Client once a dial succeeded.
// A server that could not be dialled is dialled again by the next
// operation that needs it, so one that comes up later is used.
type member struct {
	addr string
	mu   sync.Mutex
	cl   *Client   // nil while down
	err  error     // the last failed dial's
	at   time.Time // when it failed
}

// redialAfter is how long a server's failed dial answers for it: the
// operations on its keys in that time fail at once instead of each
// waiting for a dial of its own (an address that drops SYNs would make
// every one of them wait for its whole deadline).
const redialAfter = time.Second

// ServerDownError is the error of an operation on a key whose server
// could not be reached; the servers that were reached answer for theirs.
type ServerDownError struct {
	Addr string
	Err  error
}

func (e *ServerDownError) Error() string {
	return fmt.Sprintf("hatkv: server %s is unreachable (its keys fail, the other servers' keys do not): %v", e.Addr, e.Err)
}

func (e *ServerDownError) Unwrap() error { return e.Err }

// DialCluster connects to every server in addrs (each with opts) and
// builds the ring over their addresses. With one address it is Dial. It
// fails only if no server can be reached: then the error names each. A
// server that cannot be reached now fails only the operations on its own
// keys (with a *ServerDownError), and is dialled again by the next one.
func DialCluster(ctx context.Context, addrs []string, opts ...ClientOption) (*Cluster, error) {
	ring, err := NewRing(addrs, 0)
	if err != nil {
		return nil, err
	}
	c := &Cluster{addrs: slices.Clone(addrs), ring: ring, opts: opts, ops: make([]atomic.Uint64, len(addrs))}
	errs := make([]error, len(addrs))
	for i, a := range addrs {
		m := &member{addr: a}
		c.servers = append(c.servers, m)
		if m.cl, errs[i] = Dial(ctx, a, opts...); errs[i] != nil {
			if errors.Is(errs[i], ErrConfig) || ctx.Err() != nil {
				_ = c.Close()
				return nil, errs[i] // the same for every server, or out of time
			}
			m.err, m.at = &ServerDownError{Addr: a, Err: errs[i]}, time.Now()
		}
	}
	if c.live() == nil {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// client returns server i's Client, dialling it if it was down.
func (c *Cluster) client(ctx context.Context, i int) (*Client, error) {
	m := c.servers[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cl == nil {
		if m.err != nil && time.Since(m.at) < redialAfter {
			return nil, m.err
		}
		cl, err := Dial(ctx, m.addr, c.opts...)
		if err != nil {
			m.err, m.at = &ServerDownError{Addr: m.addr, Err: err}, time.Now()
			return nil, m.err
		}
		m.cl, m.err = cl, nil
	}
	return m.cl, nil
}

// live returns the first server that was reached, nil if none.
func (c *Cluster) live() *Client {
	for _, m := range c.servers {
		m.mu.Lock()
		cl := m.cl
		m.mu.Unlock()
		if cl != nil {
			return cl
		}
	}
	return nil
}

// Addrs returns the servers, in the order given.
func (c *Cluster) Addrs() []string { return slices.Clone(c.addrs) }

// Owner returns the index of key's server.
func (c *Cluster) Owner(key string) int { return c.ring.Owner(key) }

// Plan returns the plan for an IDL function of the first server that was
// reached (every server serves the same IDL).
func (c *Cluster) Plan(method string) hints.Table { return c.live().Plan(method) }

// Routed returns how many keys each server was sent so far (a MultiGet of
// ten keys counts ten), in Addrs order.
func (c *Cluster) Routed() []uint64 {
	out := make([]uint64, len(c.ops))
	for i := range c.ops {
		out[i] = c.ops[i].Load()
	}
	return out
}

// Close closes every server's client.
func (c *Cluster) Close() error {
	var errs []error
	for _, m := range c.servers {
		m.mu.Lock()
		if m.cl != nil {
			errs = append(errs, m.cl.Close())
			m.cl = nil
		}
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}

// kvAt is server i's KV; a server that cannot be reached answers every
// call with its *ServerDownError.
func (c *Cluster) kvAt(ctx context.Context, i int) KV {
	cl, err := c.client(ctx, i)
	if err != nil {
		return downKV{err}
	}
	return cl.KV()
}

func (c *Cluster) kv(ctx context.Context, key string) KV {
	i := c.ring.Owner(key)
	c.ops[i].Add(1)
	return c.kvAt(ctx, i)
}

// downKV is the KV of a server that could not be reached.
type downKV struct{ err error }

func (d downKV) Get(context.Context, string, []string) (hatkv.Record, error) { return nil, d.err }
func (d downKV) Put(context.Context, string, hatkv.Record) error             { return d.err }
func (d downKV) Delete(context.Context, string) error                        { return d.err }
func (d downKV) MultiGet(context.Context, []string, []string) ([]*hatkv.Lookup, error) {
	return nil, d.err
}
func (d downKV) MultiPut(context.Context, []*hatkv.KeyRecord) error { return d.err }
func (d downKV) Scan(context.Context, string, int32, []string) ([]*hatkv.KeyRecord, error) {
	return nil, d.err
}
func (d downKV) ScanStream(context.Context, *hatkv.ScanRequest) (hatkv.HatKVScanStreamClient, error) {
	return nil, d.err
}
func (d downKV) Stats(context.Context) (*hatkv.StoreStats, error) { return nil, d.err }

// Get implements KV.
func (c *Cluster) Get(ctx context.Context, key string, fields []string) (hatkv.Record, error) {
	return c.kv(ctx, key).Get(ctx, key, fields)
}

// Put implements KV.
func (c *Cluster) Put(ctx context.Context, key string, fields hatkv.Record) error {
	return c.kv(ctx, key).Put(ctx, key, fields)
}

// Delete implements KV.
func (c *Cluster) Delete(ctx context.Context, key string) error {
	return c.kv(ctx, key).Delete(ctx, key)
}

// split groups the positions of keys by server: parts[i] lists the
// positions of the keys server i owns, in order.
func (c *Cluster) split(n int, key func(int) string) [][]int {
	parts := make([][]int, len(c.servers))
	for p := 0; p < n; p++ {
		i := c.ring.Owner(key(p))
		parts[i] = append(parts[i], p)
	}
	for i, ps := range parts {
		c.ops[i].Add(uint64(len(ps)))
	}
	return parts
}

// each runs fn for every server with a part, in parallel, and returns the
// errors by server (nil where fn succeeded or had nothing to do).
func (c *Cluster) each(parts [][]int, fn func(i int, positions []int) error) []error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, ps := range parts {
		if len(ps) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i, ps)
		}()
	}
	wg.Wait()
	return errs
}

// MultiGet implements KV: one MultiGet per server holding some of keys.
func (c *Cluster) MultiGet(ctx context.Context, keys []string, fields []string) ([]*hatkv.Lookup, error) {
	if len(c.servers) == 1 {
		c.ops[0].Add(uint64(len(keys)))
		return c.kvAt(ctx, 0).MultiGet(ctx, keys, fields)
	}
	out := make([]*hatkv.Lookup, len(keys))
	parts := c.split(len(keys), func(p int) string { return keys[p] })
	errs := c.each(parts, func(i int, ps []int) error {
		sub := make([]string, len(ps))
		for j, p := range ps {
			sub[j] = keys[p]
		}
		res, err := c.kvAt(ctx, i).MultiGet(ctx, sub, fields)
		if err != nil {
			return err
		}
		if len(res) != len(sub) {
			return fmt.Errorf("hatkv: server %s answered %d lookups for %d keys", c.addrs[i], len(res), len(sub))
		}
		for j, p := range ps {
			out[p] = res[j]
		}
		return nil
	})
	if err := c.firstErr("multiget", errs); err != nil {
		return nil, err
	}
	return out, nil
}

// MultiPut implements KV: atomic per server, not across servers.
func (c *Cluster) MultiPut(ctx context.Context, records []*hatkv.KeyRecord) error {
	if len(c.servers) == 1 {
		c.ops[0].Add(uint64(len(records)))
		return c.kvAt(ctx, 0).MultiPut(ctx, records)
	}
	for i, r := range records {
		if r == nil {
			return &hatkv.InvalidArgument{Message: fmt.Sprintf("multiput: record %d is missing", i)}
		}
	}
	parts := c.split(len(records), func(p int) string { return records[p].Key })
	errs := c.each(parts, func(i int, ps []int) error {
		sub := make([]*hatkv.KeyRecord, len(ps))
		for j, p := range ps {
			sub[j] = records[p]
		}
		return c.kvAt(ctx, i).MultiPut(ctx, sub)
	})
	err := c.firstErr("multiput", errs)
	if err == nil {
		return nil
	}
	var done []string
	for i, ps := range parts {
		if len(ps) > 0 && errs[i] == nil {
			done = append(done, c.addrs[i])
		}
	}
	if len(done) == 0 {
		return err
	}
	return fmt.Errorf("%w (the records for %s were committed: MultiPut is atomic per server only)", err, strings.Join(done, ", "))
}

// firstErr returns the first server's error, naming the server; the IDL's
// exceptions stay reachable with errors.As.
func (c *Cluster) firstErr(op string, errs []error) error {
	for i, err := range errs {
		var down *ServerDownError
		if errors.As(err, &down) {
			return err // names the server already
		}
		if err != nil {
			return fmt.Errorf("hatkv: %s on %s: %w", op, c.addrs[i], err)
		}
	}
	return nil
}

// Scan implements KV: each server's first count records >= startKey,
// merged in key order and cut to count. A server that cut its answer
// short by size (ScanCutHeader) did not look past its last key, so the
// merged answer ends at the smallest such key: no key of any server
// before it is skipped, and the next Scan starts after it.
func (c *Cluster) Scan(ctx context.Context, startKey string, count int32, fields []string) ([]*hatkv.KeyRecord, error) {
	if len(c.servers) == 1 {
		c.ops[0].Add(1)
		return c.kvAt(ctx, 0).Scan(ctx, startKey, count, fields)
	}
	all := make([][]*hatkv.KeyRecord, len(c.servers))
	mds := make([]metadata.MD, len(c.servers))
	parts := make([][]int, len(c.servers))
	for i := range parts {
		parts[i] = []int{0}
		c.ops[i].Add(1)
	}
	// Asking for the cut header makes the call carry headers, so the
	// reply can carry it back.
	sctx := metadata.AppendToOutgoingContext(ctx, ScanCutHeader, "ask")
	errs := c.each(parts, func(i int, _ []int) error {
		res, err := c.kvAt(ctx, i).Scan(metadata.CaptureReply(sctx, &mds[i]), startKey, count, fields)
		all[i] = res
		return err
	})
	if err := c.firstErr("scan", errs); err != nil {
		return nil, err
	}
	return mergeScans(all, mds, count), nil
}

// mergeScans merges the servers' Scan answers (and their reply headers)
// in key order, ends the result at the last key of the first answer that
// was cut by size, and cuts it to count.
func mergeScans(all [][]*hatkv.KeyRecord, mds []metadata.MD, count int32) []*hatkv.KeyRecord {
	var (
		out   []*hatkv.KeyRecord
		bound string
		cut   bool
	)
	for i, res := range all {
		out = append(out, res...)
		if len(mds[i][ScanCutHeader]) > 0 && len(res) > 0 {
			if last := res[len(res)-1].Key; !cut || last < bound {
				bound, cut = last, true
			}
		}
	}
	slices.SortFunc(out, func(a, b *hatkv.KeyRecord) int { return cmp.Compare(a.Key, b.Key) })
	if cut {
		n, _ := slices.BinarySearchFunc(out, bound, func(r *hatkv.KeyRecord, k string) int { return cmp.Compare(r.Key, k) })
		out = out[:n+1]
	}
	if len(out) > int(max(count, 0)) {
		out = out[:count]
	}
	return out
}

// Stats implements KV: the servers' counters and sizes summed; the
// settings (sync, commit, write map, key size) are the first server's.
func (c *Cluster) Stats(ctx context.Context) (*hatkv.StoreStats, error) {
	all, err := c.ServerStats(ctx)
	if err != nil {
		return nil, err
	}
	sum := *all[0]
	for _, s := range all[1:] {
		sum.Records += s.Records
		sum.MapSize += s.MapSize
		sum.UsedBytes += s.UsedBytes
		sum.MaxReaders += s.MaxReaders
		sum.NumReaders += s.NumReaders
		sum.LastTxnID += s.LastTxnID
		sum.Gets += s.Gets
		sum.Puts += s.Puts
		sum.Deletes += s.Deletes
		sum.Scans += s.Scans
		sum.Commits += s.Commits
		sum.BatchedWrites += s.BatchedWrites
		sum.MaxBatch = max(sum.MaxBatch, s.MaxBatch)
		sum.MapGrowths += s.MapGrowths
	}
	return &sum, nil
}

// ServerStats returns every server's statistics, in Addrs order.
func (c *Cluster) ServerStats(ctx context.Context) ([]*hatkv.StoreStats, error) {
	out := make([]*hatkv.StoreStats, len(c.servers))
	parts := make([][]int, len(c.servers))
	for i := range parts {
		parts[i] = []int{0}
	}
	errs := c.each(parts, func(i int, _ []int) error {
		st, err := c.kvAt(ctx, i).Stats(ctx)
		out[i] = st
		return err
	})
	if err := c.firstErr("stats", errs); err != nil {
		return nil, err
	}
	return out, nil
}
