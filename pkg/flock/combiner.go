package flock

import (
	"context"
	"runtime"
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

	kind    opKind
	caller  uint32
	seq     uint32
	handler uint16
	status  uint16
	data    []byte // request/response payload, or Write source

	// memory operations
	raddr   uint64
	rkey    uint32
	arg1    uint64 // add, or compare
	arg2    uint64 // swap
	dst     []byte // Read destination
	old     uint64 // atomic result
	err     error
	lane    int // the lane that served it
	scratch int // leader-assigned scratch offset
}

func newNode() *node { return &node{sig: make(chan signal, 1)} }

func (n *node) reset() {
	n.next.Store(nil)
	n.ctx, n.data, n.dst, n.err = nil, nil, nil, nil
	n.old, n.status, n.scratch = 0, 0, 0
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

// lead serves one batch starting at first (the leader's own node, which is
// always served), then hands leadership to the first node not served.
func (c *combiner) lead(first *node) {
	if c.yield != nil && first.next.Load() == nil && c.yield() {
		runtime.Gosched()
	}
	b := c.batch[:0]
	b = append(b, first)
	for cur := first; len(b) < c.max; {
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
	for i := 1; i < k-1; i++ {
		b[i].sig <- sigDone
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
	if last != first {
		last.sig <- sigDone
	}
	if succ != nil {
		succ.sig <- sigLeader
	}
}
