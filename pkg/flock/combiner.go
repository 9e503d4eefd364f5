package flock

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

type opKind uint8

const (
	opCall opKind = iota // client: RPC request
	opResp               // server: RPC response
	opCtl                // server: credit grant/decline, no entry
	opRead
	opWrite
	opFetchAdd
	opCompareSwap
)

func (k opKind) isMem() bool { return k >= opRead }

type signal uint8

const (
	sigDone signal = iota + 1
	sigLeader
)

// node is one waiting operation in a combining queue. Followers publish
// their request in it and block on sig; the leader serves it and either
// completes it (sigDone, err set) or hands it leadership (sigLeader).
type node struct {
	next atomic.Pointer[node]
	sig  chan signal
	ctx  context.Context
	// wait says how the submitter learns that its node is served; free,
	// set by the leader, says the queue no longer references the node,
	// which may then be reused.
	wait waitMode
	free atomic.Bool
	pool *nodePool // detached nodes go back here once served

	kind    opKind
	caller  uint32
	seq     uint32
	handler uint16
	status  uint16
	data    []byte // request/response payload, or Write source
	size    int    // a response: the length its AppendHandler returned (WithSent)
	// Pooled buffers a response node holds (handlers.go): out an
	// AppendHandler's response, req a worker's request copy. They go back
	// only once nothing references them (recycle).
	out *[]byte
	req *[]byte

	// memory operations
	raddr   uint64
	rkey    uint32
	arg1    uint64 // add, or compare
	arg2    uint64 // swap
	dst     []byte // Read destination
	old     uint64 // atomic result
	err     error
	qp      int // the QP that served it
	scratch int // leader-assigned scratch offset
}

// waitMode is what a node's submitter does while the node is queued.
type waitMode uint8

const (
	// waitSync: the submitter blocks on sig until the node is served.
	waitSync waitMode = iota
	// waitAsync: the submitter waits for something else (an RPC's
	// response) and hears on sig only of a failure or of leadership: a
	// served request costs its follower no wake-up.
	waitAsync
	// waitNone: nobody waits. The leader serves a detached successor
	// itself instead of handing it leadership, and returns the node to its
	// pool (server responses: a worker goes back to work at once).
	waitNone
)

func newNode() *node {
	n := &node{sig: make(chan signal, 1)}
	n.free.Store(true)
	return n
}

func (n *node) reset() {
	n.next.Store(nil)
	n.ctx, n.data, n.dst, n.err = nil, nil, nil, nil
	n.old, n.status, n.scratch, n.size = 0, 0, 0, 0
	n.wait = waitSync
}

// reclaim waits until the queue no longer references n (a leader may still
// be finishing the batch an async node was served in) and takes it.
func (n *node) reclaim() {
	for !n.free.Load() {
		runtime.Gosched()
	}
	n.free.Store(false)
}

// complete tells a served node's submitter, as its wait mode asks.
func (n *node) complete() {
	switch {
	case n.wait == waitNone:
		n.free.Store(true)
		n.pool.put(n)
	case n.wait == waitAsync && n.err == nil:
		n.free.Store(true)
	default:
		// The submitter owns the node again once it has this (and frees
		// it, if it reuses nodes through reclaim).
		n.sig <- sigDone
	}
}

// release ends the queue's use of a served node: the leader's own node
// only becomes free (its owner is running the leader and sees the result),
// unless nobody waits for it; others complete.
func release(own, n *node) {
	if n == own && n.wait != waitNone {
		n.free.Store(true)
		return
	}
	n.complete()
}

// nodePool recycles detached nodes; a plain free list, because the nodes
// cycle between the workers and the leaders of one server.
type nodePool struct {
	mu   sync.Mutex
	free []*node
	made atomic.Int64
	bufs bufPool // the server's request copies and response storage (handlers.go)
}

func (p *nodePool) get() *node {
	p.mu.Lock()
	var n *node
	if k := len(p.free); k > 0 {
		n, p.free = p.free[k-1], p.free[:k-1]
	}
	p.mu.Unlock()
	if n == nil {
		n = newNode()
		n.pool = p
		p.made.Add(1)
	}
	n.reclaim()
	n.reset()
	n.recycle(&p.bufs)
	n.wait = waitNone
	return n
}

func (p *nodePool) put(n *node) {
	p.mu.Lock()
	p.free = append(p.free, n)
	p.mu.Unlock()
}

// combiner is the thread combining queue of one QP: an MCS-style queue
// whose head is the leader. Enqueueing is one atomic swap on the tail; no
// mutex is taken anywhere on this path.
type combiner struct {
	tail  atomic.Pointer[node]
	batch []*node // leader only
	max   int
	// serve is called by the leader with the collected batch (at least one
	// node, the leader's first). It returns how many of the batch (a
	// prefix, at least one) it completed; the rest stay queued.
	serve func(batch []*node) int
	// yield, when it reports true, makes a new leader give other runnable
	// goroutines one chance to enqueue before it collects: goroutines woken
	// together by the dispatcher otherwise reach the queue one at a time,
	// each finding it empty.
	yield func() bool
}

// submit runs n through the queue and returns once n is complete.
func (c *combiner) submit(n *node) {
	prev := c.tail.Swap(n)
	if prev != nil {
		prev.next.Store(n)
		if <-n.sig == sigDone {
			return
		}
	}
	c.lead(n)
}

// submitAsync enqueues a node whose submitter does not wait for it to be
// served (wait is waitAsync or waitNone) and reports whether this
// goroutine became the leader and so has served it already. Otherwise
// another goroutine serves it: an async submitter hears on n.sig of a
// failure (sigDone with err set) or of leadership (sigLeader: call lead),
// and of nothing when it was sent; a detached one hears nothing.
func (c *combiner) submitAsync(n *node) bool {
	prev := c.tail.Swap(n)
	if prev != nil {
		prev.next.Store(n)
		return false
	}
	c.lead(n)
	return true
}

// submitChain enqueues ns as one run with a single tail swap (the links
// inside the run are set before it is published) and returns when all of
// them are complete. The server's dispatcher uses it to hand over all
// responses to one request message at once.
func (c *combiner) submitChain(ns []*node) {
	for i := 0; i < len(ns)-1; i++ {
		ns[i].next.Store(ns[i+1])
	}
	prev := c.tail.Swap(ns[len(ns)-1])
	leader := prev == nil
	if !leader {
		prev.next.Store(ns[0])
	}
	for i, n := range ns {
		if (i == 0 && leader) || <-n.sig == sigLeader {
			c.lead(n)
		}
	}
}

// lead serves batches starting at first (the leader's own node, always
// served), then hands leadership to the first node not served; a detached
// successor has nobody to hand it to, so the leader serves it too.
func (c *combiner) lead(first *node) { c.leadFrom(first, c.max) }

// leadFrom leads from own, the leader's node, taking at most limit nodes in
// the first batch and serving detached successors after it.
func (c *combiner) leadFrom(own *node, limit int) {
	for first := c.leadOnce(own, own, limit); first != nil; {
		first = c.leadOnce(own, first, c.max)
	}
}

// tryLeadOne serves n alone if the queue is idle, and reports whether it
// did; nodes that queue up meanwhile get leadership as usual. For a
// goroutine that must not wait in the queue (a client dispatcher: the
// queue's leader may be waiting for credits it delivers).
func (c *combiner) tryLeadOne(n *node) bool {
	if !c.tail.CompareAndSwap(nil, n) {
		return false
	}
	// Detached nodes that queued behind n (server responses) are led on
	// by a goroutine of their own: whoever calls this must not wait on a
	// post to a peer that may be dead (the server's dispatcher).
	if next := c.leadOnce(n, n, 1); next != nil {
		go c.leadFrom(next, c.max)
	}
	return true
}

// leadOnce serves one batch (at most limit nodes) from first and returns
// the detached node to lead next, if any. own is the leader's own node: it
// is not completed here (its owner is running this).
func (c *combiner) leadOnce(own, first *node, limit int) *node {
	if c.yield != nil && first.next.Load() == nil && c.yield() && limit > 1 {
		runtime.Gosched()
	}
	b := c.batch[:0]
	b = append(b, first)
	for cur := first; len(b) < limit; {
		nx := cur.next.Load()
		if nx == nil {
			break
		}
		b = append(b, nx)
		cur = nx
	}
	k := max(c.serve(b), 1)
	last := b[k-1]
	var succ *node
	if k < len(b) {
		succ = b[k]
	}
	// Nodes before last had their successors read while collecting, so
	// they may be completed (and reused) now. c.batch must be finished with
	// before the tail CAS below: after it a new leader may start.
	for i := 0; i < k-1; i++ {
		release(own, b[i])
	}
	clear(b)
	c.batch = b[:0]
	if succ == nil {
		if succ = last.next.Load(); succ == nil && !c.tail.CompareAndSwap(last, nil) {
			// Someone swapped in after last but has not linked yet.
			for succ = last.next.Load(); succ == nil; succ = last.next.Load() {
				runtime.Gosched()
			}
		}
	}
	release(own, last)
	if succ == nil {
		return nil
	}
	if succ.wait == waitNone {
		return succ
	}
	succ.sig <- sigLeader
	return nil
}
