//go:build cgo && linux

package client

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// RF-RPC batching (RFP §4.2) for functions with the `batch` hint: calls
// wait in the pool's batcher until N of them, L bytes or the timeout T
// since the first is reached, and then travel as one frame in one lane
// call (so one WRITE, one fetch). With batch=auto the batcher moves N by
// one after every window of calls: down when more than alpha of them took
// longer than latency_limit, up otherwise.

// maxBatch bounds N, fixed or automatic.
const maxBatch = 64

// autoWindow is how many calls the automatic batch size judges at a time.
const autoWindow = 64

type batcher struct {
	p       *lanePool
	auto    bool
	limitB  int           // L
	timeout time.Duration // T
	alpha   float64
	lat     time.Duration // latency_limit

	mu      sync.Mutex
	n       int // N in force
	pending []*bcall
	bytes   int
	timer   *time.Timer
	gen     uint64 // batches flushed; the timer flushes only its own
	// auto tuning window
	seen, slow int
	sizes      []int // batch sizes sent, for tests and stats (bounded)
}

// bcall is one call waiting in a batch.
type bcall struct {
	ctx   context.Context
	frame []byte
	start time.Time
	done  chan struct{}
	resp  []byte // its reply frame, copied out of the lane's lease
	err   error
}

func newBatcher(p *lanePool, pl *hints.Table) *batcher {
	b := &batcher{p: p, auto: pl.Batch == hints.BatchAuto, limitB: pl.BatchBytes, timeout: pl.BatchTimeout,
		alpha: pl.BatchAlpha, lat: pl.LatencyLimit, n: int(pl.Batch)}
	if b.auto {
		b.n = 2
	}
	b.n = min(max(b.n, 1), maxBatch)
	return b
}

// call queues one framed call and waits for its reply frame.
func (b *batcher) call(ctx context.Context, frame []byte) ([]byte, error) {
	bc := &bcall{ctx: ctx, frame: append([]byte(nil), frame...), start: time.Now(), done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, bc)
	b.bytes += len(frame)
	var flush []*bcall
	if len(b.pending) >= b.n || b.bytes >= b.limitB {
		flush = b.takeLocked()
	} else if len(b.pending) == 1 {
		gen := b.gen
		b.timer = time.AfterFunc(b.timeout, func() { b.flushTimer(gen) })
	}
	b.mu.Unlock()
	if flush != nil {
		go b.send(flush)
	}
	select {
	case <-bc.done:
		return bc.resp, bc.err
	case <-ctx.Done():
		// The batch goes on; its reply for this call is dropped.
		return nil, ctx.Err()
	}
}

// takeLocked empties the queue for sending.
func (b *batcher) takeLocked() []*bcall {
	out := b.pending
	b.pending, b.bytes = nil, 0
	b.gen++
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if len(b.sizes) < 4096 {
		b.sizes = append(b.sizes, len(out))
	}
	return out
}

func (b *batcher) flushTimer(gen uint64) {
	b.mu.Lock()
	if gen != b.gen || len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	flush := b.takeLocked()
	b.mu.Unlock()
	b.send(flush)
}

// send runs one batch as one lane call and hands each caller its reply.
func (b *batcher) send(calls []*bcall) {
	// The batch lives as long as its most patient caller.
	ctx := context.Background()
	var dl time.Time
	for _, bc := range calls {
		d, ok := bc.ctx.Deadline()
		if !ok {
			dl = time.Time{}
			break
		}
		if d.After(dl) {
			dl = d
		}
	}
	if !dl.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	replies, err := b.p.callBatch(ctx, calls)
	now := time.Now()
	for i, bc := range calls {
		if err == nil {
			bc.resp = replies[i]
		} else {
			bc.err = err
		}
		close(bc.done)
		if b.auto {
			b.judge(now.Sub(bc.start))
		}
	}
}

// judge is the automatic batch size rule.
func (b *batcher) judge(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen++
	if d > b.lat {
		b.slow++
	}
	if b.seen < autoWindow {
		return
	}
	if float64(b.slow) > b.alpha*float64(b.seen) {
		b.n = max(b.n-1, 1)
	} else {
		b.n = min(b.n+1, maxBatch)
	}
	b.seen, b.slow = 0, 0
}

// size is N in force.
func (b *batcher) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// callBatch sends the frames of calls as one KindBatch frame on a lane and
// splits the reply.
func (p *lanePool) callBatch(ctx context.Context, calls []*bcall) ([][]byte, error) {
	n := wire.HeaderSize
	for _, bc := range calls {
		n += len(bc.frame)
	}
	l, err := p.get(ctx, n, getWait)
	if err != nil {
		return nil, err
	}
	n = wire.HeaderSize
	for _, bc := range calls {
		n += len(bc.frame)
	}
	frame := make([]byte, wire.HeaderSize, n)
	for _, bc := range calls {
		frame = append(frame, bc.frame...)
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Nanosecond)
	}
	wire.SealFrame(frame, wire.KindBatch, 0, 1, timeout)
	pr := p.side.Protocol(len(frame))
	if n := len(calls); n > 1 {
		p.calls[pr%numProtocols].Add(uint64(n - 1)) // the endpoint counts the exchange
	}
	resp, err := l.ep.Call(ctx, pr, frame)
	if err != nil {
		l.broken.Store(true)
		p.put(l)
		return nil, callFailed(ctx, "lane", err)
	}
	defer p.put(l)
	lim := p.ls.c.o.limits.MaxMessageSize
	h, err := wire.DecodeHeader(resp, lim)
	var parts [][]byte
	if err == nil && h.Kind == wire.KindBatch {
		parts, err = wire.SplitFrames(resp[wire.HeaderSize:], lim)
	}
	if err == nil && (h.Kind != wire.KindBatch || len(parts) != len(calls)) {
		// A refused batch (e.g. a malformed one) comes back as a single
		// exception frame: every call gets it.
		if h.Kind == wire.KindException {
			parts = make([][]byte, len(calls))
			for i := range parts {
				parts[i] = resp
			}
		} else {
			err = proto.ErrInvalidData
		}
	}
	if err != nil {
		l.broken.Store(true)
		return nil, &ConnError{Op: "lane", Err: err}
	}
	out := make([][]byte, len(parts))
	for i, f := range parts {
		out[i] = append([]byte(nil), f...) // the lease ends with the lane's next call
	}
	return out, nil
}

// batchCall runs one framed call through the pool's batcher and decodes
// the reply.
func (p *lanePool) batchCall(ctx context.Context, frame []byte, oneway bool, result proto.Struct, use func() error) error {
	resp, err := p.batch.call(ctx, frame)
	if err != nil {
		return err
	}
	if oneway {
		return nil
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	if err := p.ls.c.decodeFrame(ctx, "lane", codec, resp, result, copyBinaries); err != nil || use == nil {
		return err
	}
	return use()
}

// BatchSizes reports, for a function with the batch hint, the N in force
// and the sizes of the batches sent so far (at most the first 4096).
func (c *Conn) BatchSizes(fn string) (n int, sent []int) {
	c.lanes.mu.Lock()
	svc, name, _ := strings.Cut(fn, ":")
	p := c.lanes.pools[poolKey{svc, name}]
	c.lanes.mu.Unlock()
	if p == nil || p.batch == nil {
		return 0, nil
	}
	b := p.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, append([]int(nil), b.sizes...)
}
