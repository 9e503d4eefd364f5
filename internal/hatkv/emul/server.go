package emul

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// Store is what the emulations need from the storage engine; it is the
// read/write subset of hatkv.Store, so *kvstore.Store implements it.
type Store interface {
	Get(ctx context.Context, key string, fields ...string) (kvstore.Record, error)
	MultiGet(ctx context.Context, keys []string, fields ...string) ([]kvstore.Record, error)
	Scan(ctx context.Context, startKey string, count int, fields ...string) ([]kvstore.KV, error)
	Put(ctx context.Context, key string, fields kvstore.Record) error
	MultiPut(ctx context.Context, kvs []kvstore.KV) error
	Delete(ctx context.Context, key string) error
}

// ServerOption configures NewServer.
type ServerOption func(*serverOptions)

type serverOptions struct {
	log        *slog.Logger
	capacity   int
	valueBytes int
}

// WithLogger sets the logger for connection failures (default slog.Default()).
func WithLogger(l *slog.Logger) ServerOption { return func(o *serverOptions) { o.log = l } }

// WithIndexCapacity sizes Pilaf's exported index: at most n keys are
// indexed (default 65536); GETs of other keys miss and go by RPC.
func WithIndexCapacity(n int) ServerOption { return func(o *serverOptions) { o.capacity = n } }

// WithValueArea sizes Pilaf's exported value area in bytes (default 64 MiB).
func WithValueArea(n int) ServerOption { return func(o *serverOptions) { o.valueBytes = n } }

// Server serves the four emulations on one store. Every connection is one
// RPC endpoint (Pilaf adds a QP for the clients' READs); all share one PD
// and Pilaf's exported index, which every write through any emulation
// keeps consistent with the store.
type Server struct {
	store Store
	dev   *rdma.Device
	pd    *rdma.PD
	idx   *index
	log   *slog.Logger

	ctx    context.Context // ends every connection on Close
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[*srvConn]struct{}
	wg     sync.WaitGroup
}

// NewServer prepares a server for store on dev and fills Pilaf's index
// from the store's current contents (ctx bounds that scan).
func NewServer(ctx context.Context, dev *rdma.Device, store Store, opts ...ServerOption) (*Server, error) {
	o := serverOptions{log: slog.Default(), capacity: 1 << 16, valueBytes: 64 << 20}
	for _, f := range opts {
		f(&o)
	}
	if o.capacity < 1 || o.valueBytes < maxExtent {
		return nil, fmt.Errorf("%w: index capacity %d, value area %d B (at least 1 and %d B)",
			ErrInvalid, o.capacity, o.valueBytes, maxExtent)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, fmt.Errorf("emul: server pd: %w", err)
	}
	idx, err := newIndex(pd, o.capacity, o.valueBytes)
	if err != nil {
		_ = pd.Close()
		return nil, fmt.Errorf("emul: pilaf index: %w", err)
	}
	s := &Server{store: store, dev: dev, pd: pd, idx: idx, log: o.log, conns: make(map[*srvConn]struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.fillIndex(ctx); err != nil {
		s.cancel()
		idx.close()
		_ = pd.Close()
		return nil, err
	}
	return s, nil
}

// fillIndex publishes what the store already holds, in scan-sized steps.
func (s *Server) fillIndex(ctx context.Context) error {
	const step = 1000
	start := ""
	for {
		kvs, err := s.store.Scan(ctx, start, step)
		if err != nil {
			return fmt.Errorf("emul: filling the pilaf index: %w", err)
		}
		for _, kv := range kvs {
			s.idx.publish(kv.Key, kvstore.EncodeRecord(kv.Record))
		}
		if len(kvs) < step {
			return nil
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
}

// IndexStats reports on Pilaf's exported index.
func (s *Server) IndexStats() IndexStats { return s.idx.stats() }

// ConnCounters are one connection's verbs counters: its RPC endpoint's QP
// and, for Pilaf, the QP clients READ through.
type ConnCounters struct {
	Kind     Kind
	RPC      rdma.Counters
	OneSided rdma.Counters
}

// Counters reports the counters of every live connection.
func (s *Server) Counters() []ConnCounters {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ConnCounters
	for c := range s.conns {
		cc := ConnCounters{Kind: c.kind}
		if c.ep != nil {
			cc.RPC, _ = c.ep.Counters()
		}
		if c.qp != nil {
			cc.OneSided, _ = c.qp.Counters()
		}
		out = append(out, cc)
	}
	return out
}

// srvConn is one served connection.
type srvConn struct {
	kind Kind
	ep   *rdma.RPCEndpoint
	cq   *rdma.CQ
	qp   *rdma.QP
}

func (c *srvConn) close() {
	if c.ep != nil {
		_ = c.ep.Close()
	}
	if c.qp != nil {
		_ = c.qp.Close()
	}
	if c.cq != nil {
		_ = c.cq.Close()
	}
}

// ServeConn serves one emulation connection: it reads the hello, sets up
// and bootstraps the endpoint(s) over nc, and answers requests until the
// peer goes away (nc reaches EOF: the client closed), ctx ends or the
// server closes (all nil), or the QP fails (an error). It owns nc and
// closes it.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) (err error) {
	defer nc.Close()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	c := &srvConn{}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopClose := context.AfterFunc(s.ctx, cancel)
	defer stopClose()

	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.close()
	}()
	if err := s.setup(cctx, nc, c); err != nil {
		return err
	}
	// The client never writes after the bootstrap: the next thing on nc
	// is EOF (or an error), meaning the peer is gone.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_, _ = io.Copy(io.Discard, nc)
		cancel()
	}()
	defer func() {
		cancel()
		_ = nc.Close()
		<-watched
	}()
	err = s.serve(cctx, c)
	if cctx.Err() != nil {
		return nil
	}
	return err
}

func (s *Server) setup(ctx context.Context, nc net.Conn, c *srvConn) error {
	h, err := readHello(ctx, nc)
	if err != nil {
		return err
	}
	b := srvConn{kind: h.kind}
	defer func() {
		// Counters may look at c from now on; on failure ServeConn closes it.
		s.mu.Lock()
		*c = b
		s.mu.Unlock()
	}()
	if b.ep, err = rdma.NewRPCEndpoint(s.pd, endpointConfig(h.kind, h.polling)); err != nil {
		return fmt.Errorf("emul: server endpoint: %w", err)
	}
	if h.kind == Pilaf {
		// The server posts nothing on this QP: it only has to exist,
		// connected, for the clients' READs to target the index.
		if b.cq, err = s.dev.CreateCQ(4); err != nil {
			return fmt.Errorf("emul: pilaf cq: %w", err)
		}
		if b.qp, err = s.pd.CreateQP(rdma.QPConfig{SendCQ: b.cq, RecvCQ: b.cq, MaxSendWR: 1, MaxRecvWR: 1, MaxSGE: 1}); err != nil {
			return fmt.Errorf("emul: pilaf qp: %w", err)
		}
	}
	if err := ackHello(ctx, nc, helloOK); err != nil {
		return err
	}
	if err := b.ep.Bootstrap(ctx, nc); err != nil {
		return fmt.Errorf("emul: %v bootstrap: %w", h.kind, err)
	}
	if b.qp != nil {
		if _, err := b.qp.Bootstrap(ctx, nc, s.idx.remote()...); err != nil {
			return fmt.Errorf("emul: pilaf index bootstrap: %w", err)
		}
	}
	return nil
}

// serve is the request loop. Each side picks its protocol per message: the
// response's by the emulation's rule and its size. A busy poller keeps its
// OS thread so it never shares it with other goroutines.
func (s *Server) serve(ctx context.Context, c *srvConn) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out []byte
	for {
		req, err := c.ep.Recv(ctx)
		if err != nil {
			return err
		}
		out = s.handle(ctx, req, out[:0])
		if err := c.ep.Reply(ctx, responseProto(c.kind, len(out)), out); err != nil {
			return err
		}
		if cap(out) > 1<<20 {
			out = nil // a large scan result is not kept per connection
		}
	}
}

// badInput are kvstore's errors caused by the request itself.
var badInput = []error{
	kvstore.ErrEmptyKey, kvstore.ErrKeyTooLong, kvstore.ErrValueTooLarge,
	kvstore.ErrTooManyFields, kvstore.ErrInvalidField, kvstore.ErrScanTooLong,
	kvstore.ErrBatchTooLarge, kvstore.ErrCorruptRecord,
}

func failure(out []byte, err error) []byte {
	st := stInternal
	switch {
	case errors.Is(err, kvstore.ErrNotFound):
		st = stNotFound
	case errors.Is(err, kvstore.ErrStoreFull):
		st = stFull
	case errors.Is(err, ErrProtocol):
		st = stInvalid
	default:
		for _, b := range badInput {
			if errors.Is(err, b) {
				st = stInvalid
				break
			}
		}
	}
	return append(append(out[:0], st), err.Error()...)
}

// handle executes one request and appends the response to out.
func (s *Server) handle(ctx context.Context, req []byte, out []byte) []byte {
	r := reader{b: req}
	op := r.byte()
	out = append(out, stOK)
	switch op {
	case opGet:
		key, fields := r.string(), r.fields()
		if err := r.end(); err != nil {
			return failure(out, err)
		}
		rec, err := s.store.Get(ctx, key, fields...)
		if err != nil {
			return failure(out, err)
		}
		return appendBytes(out, kvstore.EncodeRecord(rec))
	case opMultiGet:
		keys := make([]string, r.count())
		for i := range keys {
			keys[i] = r.string()
		}
		fields := r.fields()
		if err := r.end(); err != nil {
			return failure(out, err)
		}
		recs, err := s.store.MultiGet(ctx, keys, fields...)
		if err != nil {
			return failure(out, err)
		}
		out = appendCount(out, len(recs))
		for _, rec := range recs {
			if rec == nil {
				out = append(out, 0)
				continue
			}
			out = appendBytes(append(out, 1), kvstore.EncodeRecord(rec))
		}
		return out
	case opPut:
		key, rec := r.string(), r.record(nil)
		if err := r.end(); err != nil {
			return failure(out, err)
		}
		if err := s.store.Put(ctx, key, rec); err != nil {
			return failure(out, err)
		}
		s.reindex(ctx, key)
		return out
	case opMultiPut:
		kvs := make([]kvstore.KV, r.count())
		keys := make([]string, len(kvs))
		for i := range kvs {
			kvs[i] = kvstore.KV{Key: r.string(), Record: r.record(nil)}
			keys[i] = kvs[i].Key
		}
		if err := r.end(); err != nil {
			return failure(out, err)
		}
		if err := s.store.MultiPut(ctx, kvs); err != nil {
			return failure(out, err)
		}
		s.reindex(ctx, keys...)
		return out
	case opDelete:
		key := r.string()
		if err := r.end(); err != nil {
			return failure(out, err)
		}
		err := s.store.Delete(ctx, key)
		s.reindex(ctx, key)
		if err != nil {
			return failure(out, err)
		}
		return out
	case opPing:
		if err := r.end(); err != nil {
			return failure(out, err)
		}
		// Held so the HERD client's fetches miss whatever a READ costs
		// (~100 ns on shm, ~100 µs on emulated verbs): its engine then
		// leaves fetch mode after two pings, not when timing allows.
		time.Sleep(pingHold)
		return out
	case opScan:
		start, count, fields := r.string(), int(r.uvarint(1<<24)), r.fields()
		if err := r.end(); err != nil {
			return failure(out, err)
		}
		kvs, err := s.store.Scan(ctx, start, count, fields...)
		if err != nil {
			return failure(out, err)
		}
		out = appendCount(out, len(kvs))
		for _, kv := range kvs {
			out = appendBytes(appendString(out, kv.Key), kvstore.EncodeRecord(kv.Record))
		}
		return out
	}
	return failure(out, fmt.Errorf("%w: unknown op %d", ErrProtocol, op))
}

// reindex republishes keys after a write. Puts merge fields, so the index
// needs the whole record, and concurrent writers may commit in any order:
// reading the committed records under the index lock means the last
// publisher publishes the last commit. A failed read drops the keys from
// the index (clients then ask by RPC), never leaves a stale value.
func (s *Server) reindex(ctx context.Context, keys ...string) {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	recs, err := s.store.MultiGet(context.WithoutCancel(ctx), keys)
	for i, k := range keys {
		if err != nil || recs[i] == nil {
			s.idx.removeLocked(k)
			continue
		}
		s.idx.publishLocked(k, kvstore.EncodeRecord(recs[i]))
	}
}

// Close ends every connection (their clients' calls then fail with
// ErrPeerGone), waits for them to tear down, and frees the index and PD.
// The store is the caller's.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.idx.close()
	return s.pd.Close()
}

// Serve accepts connections on ln and serves each with ServeConn until ln
// fails or the server closes; it closes ln when the server closes.
func (s *Server) Serve(ln net.Listener) error {
	stop := context.AfterFunc(s.ctx, func() { _ = ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var backoff server.AcceptBackoff
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			if server.AcceptRetryable(err) {
				time.Sleep(backoff.Next())
				continue
			}
			return err
		}
		backoff.Reset()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.ServeConn(s.ctx, nc); err != nil && !errors.Is(err, ErrServerClosed) {
				s.log.Warn("emul: connection ended", "remote", nc.RemoteAddr(), "err", err)
			}
		}()
	}
}

func appendCount(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }

// pingHold is how long the server holds HERD's warm-up ping: far above
// R + 1 = 2 fetch READs on any provider (see herdWarmup).
const pingHold = 2 * time.Millisecond
