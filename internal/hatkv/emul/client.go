package emul

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// ClientOption configures Dial.
type ClientOption func(*clientOptions)

type clientOptions struct {
	polling      rdma.Polling
	pilafRetries int
}

// WithPolling sets how both ends of the connection wait (default busy):
// the client's endpoint, and the server's for this connection (sent in the
// hello). With more client threads than cores use rdma.PollEvent, or busy
// pollers take turns at the CPU.
func WithPolling(p rdma.Polling) ClientOption { return func(o *clientOptions) { o.polling = p } }

// WithPilafRetries bounds how often a Pilaf GET restarts on a torn or
// changing index before asking the server by RPC (default 64): the first
// 8 at once, each later one after a pause doubling from 1 µs to 1 ms (a
// server preempted mid-rewrite holds an entry torn for milliseconds).
func WithPilafRetries(n int) ClientOption { return func(o *clientOptions) { o.pilafRetries = n } }

// Client is one emulation connection. It implements ycsb.DB; calls are
// serialized (one exchange at a time per endpoint): use a Pool for
// concurrent threads.
type Client struct {
	kind Kind
	poll rdma.Polling
	nc   net.Conn
	pd   *rdma.PD
	ep   *rdma.RPCEndpoint
	pl   *pilafReader // Pilaf only

	// life ends when the peer goes away (nc EOF) or on Close; it
	// interrupts a call waiting for a server that will never answer.
	life    context.Context
	kill    context.CancelFunc
	watched chan struct{}

	mu     sync.Mutex // one call at a time; a response lease is decoded under it
	closed bool
	buf    []byte
}

var _ ycsb.DB = (*Client)(nil)

// Dial sets up an emulation connection over nc (already connected to a
// Server, e.g. by net.Dial): hello, endpoint bootstrap, and for Pilaf the
// QP and index description for one-sided GETs. The Client owns nc.
func Dial(ctx context.Context, dev *rdma.Device, nc net.Conn, kind Kind, opts ...ClientOption) (_ *Client, err error) {
	o := clientOptions{pilafRetries: 64}
	for _, f := range opts {
		f(&o)
	}
	if _, ok := kindNames[kind]; !ok {
		_ = nc.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnknownKind, kind)
	}
	c := &Client{kind: kind, poll: o.polling, nc: nc, watched: make(chan struct{})}
	c.life, c.kill = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			c.kill()
			_ = nc.Close()
			c.release()
		}
	}()
	if err := writeHello(ctx, nc, hello{kind: kind, polling: o.polling}); err != nil {
		return nil, err
	}
	if c.pd, err = dev.AllocPD(); err != nil {
		return nil, fmt.Errorf("emul: client pd: %w", err)
	}
	if c.ep, err = rdma.NewRPCEndpoint(c.pd, endpointConfig(kind, o.polling)); err != nil {
		return nil, fmt.Errorf("emul: client endpoint: %w", err)
	}
	if err := c.ep.Bootstrap(ctx, nc); err != nil {
		return nil, fmt.Errorf("emul: %v bootstrap: %w", kind, err)
	}
	if kind == HERD && o.polling == rdma.PollBusy {
		if err := c.herdWarmup(ctx); err != nil {
			return nil, err
		}
	}
	if kind == Pilaf {
		if c.pl, err = newPilafReader(ctx, dev, c.pd, nc, o.pilafRetries); err != nil {
			return nil, err
		}
	}
	go func() {
		defer close(c.watched)
		_, _ = io.Copy(io.Discard, nc)
		c.kill()
	}()
	return c, nil
}

// herdWarmup pings until the engine's RFP state machine has left fetch
// mode (two calls whose response was not there after R = 1 fetch), so
// every later request is a WRITE answered by a SEND. The server holds a
// ping for pingHold, so the switch does not depend on how fast a READ is
// against the server's turnaround (on emulated verbs a READ takes ~100 µs,
// longer than a busy server's ping).
func (c *Client) herdWarmup(ctx context.Context) error {
	for range 1000 {
		r, err := c.call(ctx, []byte{opPing})
		if err != nil {
			return err
		}
		if err := r.end(); err != nil {
			return err
		}
		// Checked right after each call: a ping's turnaround is short
		// enough to flip a client in server-reply mode back to fetching.
		if c.ep.Stats().RFPServerReply {
			return nil
		}
	}
	return fmt.Errorf("%w: herd: the engine stayed in RFP fetch mode", ErrProtocol)
}

// Kind is the connection's emulation.
func (c *Client) Kind() Kind { return c.kind }

// Counters are the client's verbs counters: its RPC endpoint's QP and,
// for Pilaf, the QP its GETs READ through.
func (c *Client) Counters() (rpc, oneSided rdma.Counters, err error) {
	if rpc, err = c.ep.Counters(); err != nil {
		return
	}
	if c.pl != nil {
		oneSided, err = c.pl.qp.Counters()
	}
	return
}

// PilafStats reports what a Pilaf client's GETs did.
type PilafStats struct {
	Gets      uint64 // one-sided GETs attempted
	Reads     uint64 // RDMA READs posted
	Retries   uint64 // restarts on a torn or changed index
	Fallbacks uint64 // GETs answered by RPC (key not indexed, retries exhausted)
}

// PilafStats is zero for the other emulations.
func (c *Client) PilafStats() PilafStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pl == nil {
		return PilafStats{}
	}
	return c.pl.stats
}

func (c *Client) release() {
	if c.pl != nil {
		c.pl.close()
	}
	if c.ep != nil {
		_ = c.ep.Close()
	}
	if c.pd != nil {
		_ = c.pd.Close()
	}
}

// Close ends the connection: the server sees EOF and tears its side down.
func (c *Client) Close() error {
	c.kill() // interrupts a call in flight before taking the lock
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.closed = true
	err := c.nc.Close()
	<-c.watched
	c.release()
	return err
}

// begin takes the connection for one operation.
func (c *Client) begin() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.life.Err() != nil {
		c.mu.Unlock()
		return ErrPeerGone
	}
	return nil
}

// call sends req (c.buf) by the emulation's request protocol and returns
// the response body after its OK status; the body is a lease valid until
// the next call. Caller holds c.mu.
func (c *Client) call(ctx context.Context, req []byte) (reader, error) {
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	resp, err := c.ep.Call(cctx, requestProto(c.kind, c.poll, len(req)), req)
	stop()
	cancel()
	if err != nil {
		if ctx.Err() == nil && peerGone(c.life) {
			return reader{}, fmt.Errorf("%w: %w", ErrPeerGone, err)
		}
		return reader{}, fmt.Errorf("emul: %v call: %w", c.kind, err)
	}
	r := reader{b: resp}
	if st := r.byte(); r.err != nil || st != stOK {
		if r.err != nil {
			return reader{}, r.err
		}
		return reader{}, statusErr(st, string(r.b))
	}
	return r, nil
}

// peerGoneWait is how long a failed exchange waits for nc's EOF: a server
// that went away broke the QP first, its closed conn is on the way.
const peerGoneWait = 200 * time.Millisecond

// peerGone reports whether a failure is the peer going away (life ends).
func peerGone(life context.Context) bool {
	t := time.NewTimer(peerGoneWait)
	defer t.Stop()
	select {
	case <-life.Done():
		return true
	case <-t.C:
		return false
	}
}

func (c *Client) rpcGet(ctx context.Context, key string, fields []string) (map[string][]byte, error) {
	c.buf = appendFields(appendString(append(c.buf[:0], opGet), key), fields)
	r, err := c.call(ctx, c.buf)
	if err != nil {
		return nil, err
	}
	rec := r.record(nil)
	return rec, r.end()
}

// Read implements ycsb.DB: Pilaf by three RDMA READs, the others by RPC.
func (c *Client) Read(ctx context.Context, key string, fields []string) (map[string][]byte, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if c.pl != nil {
		rec, ok, err := c.pl.get(ctx, c.life, key, fields)
		if ok || err != nil {
			return rec, err
		}
	}
	return c.rpcGet(ctx, key, fields)
}

func (c *Client) put(ctx context.Context, key string, values map[string][]byte) error {
	if err := c.begin(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	c.buf = appendBytes(appendString(append(c.buf[:0], opPut), key), kvstore.EncodeRecord(values))
	r, err := c.call(ctx, c.buf)
	if err != nil {
		return err
	}
	return r.end()
}

// Update implements ycsb.DB (a merge of the given fields).
func (c *Client) Update(ctx context.Context, key string, values map[string][]byte) error {
	return c.put(ctx, key, values)
}

// Insert implements ycsb.DB; on a new key a merge is an insert.
func (c *Client) Insert(ctx context.Context, key string, values map[string][]byte) error {
	return c.put(ctx, key, values)
}

// Delete removes key (not part of ycsb.DB; Pilaf's index drops it too).
func (c *Client) Delete(ctx context.Context, key string) error {
	if err := c.begin(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	c.buf = appendString(append(c.buf[:0], opDelete), key)
	r, err := c.call(ctx, c.buf)
	if err != nil {
		return err
	}
	return r.end()
}

// Scan implements ycsb.DB (an RPC in every emulation).
func (c *Client) Scan(ctx context.Context, startKey string, count int, fields []string) ([]map[string][]byte, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	c.buf = appendFields(appendCount(appendString(append(c.buf[:0], opScan), startKey), count), fields)
	r, err := c.call(ctx, c.buf)
	if err != nil {
		return nil, err
	}
	out := make([]map[string][]byte, r.count())
	for i := range out {
		_ = r.string()
		out[i] = r.record(nil)
	}
	return out, r.end()
}

// MultiRead implements ycsb.DB: Pilaf GETs each key one-sidedly, the
// others send one MultiGet. A missing key fails the whole operation, as a
// missing key fails a YCSB read.
func (c *Client) MultiRead(ctx context.Context, keys []string, fields []string) ([]map[string][]byte, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	out := make([]map[string][]byte, len(keys))
	missing := 0
	if c.pl != nil {
		for i, k := range keys {
			rec, ok, err := c.pl.get(ctx, c.life, k, fields)
			if !ok && err == nil {
				rec, err = c.rpcGet(ctx, k, fields)
			}
			switch {
			case errors.Is(err, ErrNotFound):
				missing++
			case err != nil:
				return nil, err
			}
			out[i] = rec
		}
	} else {
		c.buf = appendCount(append(c.buf[:0], opMultiGet), len(keys))
		for _, k := range keys {
			c.buf = appendString(c.buf, k)
		}
		c.buf = appendFields(c.buf, fields)
		r, err := c.call(ctx, c.buf)
		if err != nil {
			return nil, err
		}
		if n := r.count(); n != len(keys) && r.err == nil {
			return nil, fmt.Errorf("%w: %d records for %d keys", ErrProtocol, n, len(keys))
		}
		for i := range out {
			if r.byte() == 0 {
				missing++
				continue
			}
			out[i] = r.record(nil)
		}
		if err := r.end(); err != nil {
			return nil, err
		}
	}
	if missing > 0 {
		return out, fmt.Errorf("%w: %d of %d keys in the batch", ErrNotFound, missing, len(keys))
	}
	return out, nil
}

// MultiUpdate implements ycsb.DB: one MultiPut RPC, atomic in the store.
func (c *Client) MultiUpdate(ctx context.Context, keys []string, values []map[string][]byte) error {
	if len(keys) != len(values) {
		return fmt.Errorf("%w: multi-update of %d keys with %d records", ErrInvalid, len(keys), len(values))
	}
	if err := c.begin(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	c.buf = appendCount(append(c.buf[:0], opMultiPut), len(keys))
	for i, k := range keys {
		c.buf = appendBytes(appendString(c.buf, k), kvstore.EncodeRecord(values[i]))
	}
	r, err := c.call(ctx, c.buf)
	if err != nil {
		return err
	}
	return r.end()
}
