package flock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

const sizeWindow = 32

// Caller is one goroutine's identity on a connection (the paper's
// application thread): the goroutine scheduler assigns callers to QPs and
// responses are routed to them by caller and sequence id. A Caller is not
// for concurrent use; give each goroutine its own (Conn.Call pools them).
type Caller struct {
	c        *Conn
	id       uint32
	qp       atomic.Int32 // QP in use
	assigned atomic.Int32 // QP the scheduler wants
	seq      uint32
	curSeq   atomic.Uint32
	inflight atomic.Int32
	resp     chan response // a parked caller's wake-up (or Abort's answer)
	n        *node
	// The response slot: the dispatcher fills slot, then publishes its
	// sequence id in ready; the caller reads slot once it sees its id
	// there, else parks (parked, then resp). rbuf is the slot's reused copy
	// buffer (dispatcher only): it writes it for the current sequence id
	// only, once, so it never writes while the caller reads.
	slot   response
	rbuf   []byte
	ready  atomic.Uint32
	parked atomic.Bool
	// parts of a response being joined (statusMore); dispatcher only
	part    []byte
	partSeq uint32
	partErr bool // the response exceeds the reply bound: its parts are dropped

	count, bytes atomic.Uint64
	sizes        [sizeWindow]atomic.Uint32
	si           atomic.Uint32
}

type response struct {
	seq    uint32
	status uint16
	owned  bool // data is the caller's (a joined response); else it is the dispatcher's rbuf
	data   []byte
}

// rbufKeep: larger responses are not kept in the reused slot buffer (one
// large answer must not pin its size per caller).
const rbufKeep = 64 << 10

// NewCaller registers a caller; new callers are spread round-robin over
// the QPs until the scheduler has statistics for them.
func (c *Conn) NewCaller() *Caller {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	old := *c.callers.Load()
	cl := &Caller{c: c, id: uint32(len(old)), resp: make(chan response, 1), n: newNode()}
	q := int32(int(cl.id) % len(c.qps))
	cl.qp.Store(q)
	cl.assigned.Store(q)
	next := make([]*Caller, len(old)+1)
	copy(next, old)
	next[len(old)] = cl
	c.callers.Store(&next)
	return cl
}

// ID is the caller id carried in request metadata.
func (cl *Caller) ID() uint32 { return cl.id }

// QP is the QP the caller currently uses.
func (cl *Caller) QP() int { return int(cl.qp.Load()) }

func (c *Conn) getCaller() *Caller {
	select {
	case cl := <-c.free:
		return cl
	default:
		return c.NewCaller()
	}
}

func (c *Conn) putCaller(cl *Caller) {
	select {
	case c.free <- cl:
	default:
	}
}

// Call sends req to handler h on the server and waits for the response,
// using a pooled Caller.
func (c *Conn) Call(ctx context.Context, h uint16, req []byte) ([]byte, error) {
	cl := c.getCaller()
	defer c.putCaller(cl)
	return cl.Call(ctx, h, req)
}

// CallAppend is Call that appends the response to dst (see
// Caller.CallAppend); req may share dst's array: the response is appended
// only once the request is no longer read.
func (c *Conn) CallAppend(ctx context.Context, h uint16, req, dst []byte) ([]byte, error) {
	cl := c.getCaller()
	defer c.putCaller(cl)
	return cl.CallAppend(ctx, h, req, dst)
}

func (cl *Caller) record(n int) {
	cl.count.Add(1)
	cl.bytes.Add(uint64(n))
	i := cl.si.Add(1)
	cl.sizes[i%sizeWindow].Store(uint32(n))
}

// pickQP picks the QP for the next operation: the scheduler's choice once
// this caller has nothing outstanding on its current QP, or any active QP
// if the current one was deactivated.
func (cl *Caller) pickQP(ctx context.Context) (*clientQP, error) {
	c := cl.c
	for spins := 0; ; spins++ {
		cur, as := cl.qp.Load(), cl.assigned.Load()
		if as != cur && cl.inflight.Load() == 0 && c.qps[as].active.Load() {
			cl.qp.Store(as)
			c.migrations.Add(1)
			c.m.migrations.Inc()
			cur = as
		}
		if l := c.qps[cur]; l.active.Load() {
			return l, nil
		}
		// Deactivated under us: nothing can be sent on it, so move now.
		for i := 1; i < len(c.qps); i++ {
			q := (int(cur) + i) % len(c.qps)
			if c.qps[q].active.Load() {
				cl.qp.Store(int32(q))
				c.migrations.Add(1)
				c.m.migrations.Inc()
				return c.qps[q], nil
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoActiveQP, err)
		}
		backoff(spins)
	}
}

func (cl *Caller) check() error {
	if cl.c.closed.Load() || cl.c.aborted.Load() {
		return ErrClosed
	}
	return nil
}

// Call sends req to handler h and waits for its response.
func (cl *Caller) Call(ctx context.Context, h uint16, req []byte) ([]byte, error) {
	r, err := cl.call(ctx, h, req)
	if err != nil || r.owned {
		return r.data, err
	}
	return append([]byte(nil), r.data...), nil
}

// CallAppend is Call that appends the response to dst and returns the
// extended slice: with a dst of enough capacity, a call allocates nothing.
// req may share dst's array (dst = req[:0] reuses the request's buffer):
// the response is appended only once the request is no longer read.
func (cl *Caller) CallAppend(ctx context.Context, h uint16, req, dst []byte) ([]byte, error) {
	r, err := cl.call(ctx, h, req)
	if err != nil {
		return dst, err
	}
	return append(dst, r.data...), nil
}

// call runs one RPC. A successful response's data is either the caller's
// (owned) or the slot buffer, valid until the caller's next call.
func (cl *Caller) call(ctx context.Context, h uint16, req []byte) (response, error) {
	if err := cl.check(); err != nil {
		return response{}, err
	}
	if messageLen([]entry{{data: req}}) > cl.c.cfg.maxMsg {
		return response{}, ErrTooLarge
	}
	// A call whose context is already done is not sent: otherwise its fate
	// depends on whether the answer or the cancellation is seen first.
	if err := ctx.Err(); err != nil {
		return response{}, err
	}
	cl.record(len(req))
	c := cl.c
	for {
		l, err := cl.pickQP(ctx)
		if err != nil {
			return response{}, err
		}
		select {
		case <-cl.resp: // a late answer to an abandoned call
		default:
		}
		cl.seq++
		seq := cl.seq
		cl.curSeq.Store(seq)
		n := cl.n
		n.reclaim()
		n.reset()
		n.wait = waitAsync
		n.ctx, n.kind, n.caller, n.seq, n.handler, n.data = ctx, opCall, cl.id, seq, h, req
		cl.inflight.Add(1)
		c.outstanding.Add(1)
		served := l.submitAsync(n)
		if served {
			c.poke()
		}
		for {
			if served {
				if err := n.err; err != nil {
					cl.inflight.Add(-1)
					c.outstanding.Add(-1)
					if errors.Is(err, errInactive) {
						break // to another QP
					}
					return response{}, err
				}
				served = false
				if c.aborted.Load() {
					// Abort may have looked at this caller before it was
					// in flight; its answer would never come.
					return response{}, ErrClosed
				}
			}
			// No spin on the slot before parking: measured (issue 21),
			// with handlers on pkg/server's workers a spinning caller
			// took the core its answer needed, 25-35 % slower on 2 cores
			// (6,779/6,902 vs 5,157/4,424 ns/op); with handlers on the
			// dispatcher it won 3-4 %.
			if cl.ready.Load() == seq {
				return cl.finish(l, n, h, cl.slot)
			}
			// Park. The dispatcher publishes ready before it looks at
			// parked, the caller sets parked before it looks at ready
			// again: one of them sees the other (sequentially consistent
			// atomics), so the answer is never left unannounced.
			cl.parked.Store(true)
			if cl.ready.Load() == seq {
				cl.parked.Store(false)
				return cl.finish(l, n, h, cl.slot)
			}
			select {
			case sig := <-n.sig:
				cl.parked.Store(false)
				// Leadership, or a failure: either way the node is served
				// now and n.err tells which.
				if sig == sigLeader {
					l.comb.lead(n)
					c.poke()
				} else {
					n.free.Store(true)
				}
				served = true
			case r := <-cl.resp:
				cl.parked.Store(false)
				if r.seq != seq {
					continue
				}
				return cl.finish(l, n, h, r)
			case <-ctx.Done():
				cl.parked.Store(false)
				cl.settle(l, n, false)
				return response{}, ctx.Err()
			}
		}
	}
}

// finish turns the call's answer into its result. The answer means the
// request left, but req is the caller's again only once the leader is done
// with the node (its release store orders the leader's reads before the
// caller's next use of req).
func (cl *Caller) finish(l *clientQP, n *node, h uint16, r response) (response, error) {
	cl.settle(l, n, true)
	switch r.status {
	case statusOK:
		return r, nil
	case statusAborted:
		return response{}, ErrClosed
	case statusNoHandler:
		return response{}, fmt.Errorf("%w: %d", ErrNoHandler, h)
	default:
		return response{}, &HandlerError{Handler: h, Msg: string(r.data)}
	}
}

// settle waits until the combining queue is done with n, leading if it is
// handed leadership: before a call returns (the queue must never wait on a
// caller that left, nor read req after it was given back). answered: the
// call's response (or abort) came, so it was counted off already.
func (cl *Caller) settle(l *clientQP, n *node, answered bool) {
	for spins := 0; ; spins++ {
		if n.free.Load() {
			return
		}
		select {
		case sig := <-n.sig:
			if sig == sigLeader {
				l.comb.lead(n)
			} else {
				n.free.Store(true)
			}
			if n.err != nil && !answered { // never sent: no response counts it off
				cl.inflight.Add(-1)
				cl.c.outstanding.Add(-1)
			}
			return
		default:
		}
		backoff(spins)
	}
}

// RemoteRegion is a server memory region attached to the connection for
// one-sided operations.
type RemoteRegion struct {
	idx  int
	addr uint64
	rkey uint32
	Len  uint64
}

// Regions lists the regions the server attached, in attach order.
func (c *Conn) Regions() []RemoteRegion {
	out := make([]RemoteRegion, len(c.regions))
	for i, r := range c.regions {
		out[i] = RemoteRegion{idx: i, addr: r.Addr, rkey: r.RKey, Len: r.Len}
	}
	return out
}

func (cl *Caller) memOp(ctx context.Context, n *node) error {
	if err := cl.check(); err != nil {
		return err
	}
	size := max(len(n.data), len(n.dst))
	if n.kind == opRead || n.kind == opWrite {
		cl.record(size)
	}
	for {
		l, err := cl.pickQP(ctx)
		if err != nil {
			return err
		}
		n.ctx, n.err = ctx, nil
		n.next.Store(nil)
		cl.inflight.Add(1)
		l.submit(n)
		n.free.Store(true)
		cl.inflight.Add(-1)
		if errors.Is(n.err, errInactive) {
			continue
		}
		return n.err
	}
}

func (cl *Caller) region(r RemoteRegion, off uint64, n int, atomic bool) (*node, error) {
	if off > r.Len || uint64(n) > r.Len-off || (atomic && (off%8 != 0 || n != 8)) {
		return nil, fmt.Errorf("%w: [%d,+%d) of %d", ErrBadRegion, off, n, r.Len)
	}
	if n > cl.c.cfg.memSlot {
		return nil, ErrTooLarge
	}
	nd := cl.n
	nd.reclaim()
	nd.reset()
	nd.raddr, nd.rkey = r.addr+off, r.rkey
	return nd, nil
}

// Read copies len(dst) bytes at off in region r into dst (one-sided).
func (cl *Caller) Read(ctx context.Context, r RemoteRegion, off uint64, dst []byte) error {
	n, err := cl.region(r, off, len(dst), false)
	if err != nil {
		return err
	}
	n.kind, n.dst = opRead, dst
	return cl.memOp(ctx, n)
}

// Write copies src to off in region r (one-sided).
func (cl *Caller) Write(ctx context.Context, r RemoteRegion, off uint64, src []byte) error {
	n, err := cl.region(r, off, len(src), false)
	if err != nil {
		return err
	}
	n.kind, n.data = opWrite, src
	return cl.memOp(ctx, n)
}

// FetchAdd atomically adds add to the 8-byte word at off and returns its
// previous value.
func (cl *Caller) FetchAdd(ctx context.Context, r RemoteRegion, off, add uint64) (uint64, error) {
	n, err := cl.region(r, off, 8, true)
	if err != nil {
		return 0, err
	}
	n.kind, n.arg1 = opFetchAdd, add
	err = cl.memOp(ctx, n)
	return n.old, err
}

// CompareSwap atomically replaces the word at off with swap if it equals
// cmp, and returns its previous value either way.
func (cl *Caller) CompareSwap(ctx context.Context, r RemoteRegion, off, cmp, swap uint64) (uint64, error) {
	n, err := cl.region(r, off, 8, true)
	if err != nil {
		return 0, err
	}
	n.kind, n.arg1, n.arg2 = opCompareSwap, cmp, swap
	err = cl.memOp(ctx, n)
	return n.old, err
}

// Read, Write, FetchAdd and CompareSwap on a Conn use a pooled Caller.
func (c *Conn) Read(ctx context.Context, r RemoteRegion, off uint64, dst []byte) error {
	cl := c.getCaller()
	defer c.putCaller(cl)
	return cl.Read(ctx, r, off, dst)
}

// Write: see Caller.Write.
func (c *Conn) Write(ctx context.Context, r RemoteRegion, off uint64, src []byte) error {
	cl := c.getCaller()
	defer c.putCaller(cl)
	return cl.Write(ctx, r, off, src)
}

// FetchAdd: see Caller.FetchAdd.
func (c *Conn) FetchAdd(ctx context.Context, r RemoteRegion, off, add uint64) (uint64, error) {
	cl := c.getCaller()
	defer c.putCaller(cl)
	return cl.FetchAdd(ctx, r, off, add)
}

// CompareSwap: see Caller.CompareSwap.
func (c *Conn) CompareSwap(ctx context.Context, r RemoteRegion, off, cmp, swap uint64) (uint64, error) {
	cl := c.getCaller()
	defer c.putCaller(cl)
	return cl.CompareSwap(ctx, r, off, cmp, swap)
}

// schedule is the goroutine scheduler: every interval it reassigns callers
// to the active QPs by Algorithm 1. Callers pick the change up themselves
// (pickQP) once their outstanding requests are answered.
func (c *Conn) schedule() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.schedInterval)
	defer t.Stop()
	var loads []CallerLoad
	var sizes []uint32
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		active := c.ActiveQPs()
		callers := *c.callers.Load()
		loads = loads[:0]
		for _, cl := range callers {
			sizes = sizes[:0]
			for i := range cl.sizes {
				if s := cl.sizes[i].Load(); s > 0 {
					sizes = append(sizes, s)
				}
			}
			loads = append(loads, CallerLoad{ID: cl.id, MedianSize: medianU32(sizes), Count: cl.count.Swap(0),
				Bytes: cl.bytes.Swap(0), Current: int(cl.qp.Load())})
		}
		for id, q := range AssignCallers(loads, active) {
			callers[id].assigned.Store(int32(q))
		}
		c.rounds.Add(1)
	}
}
