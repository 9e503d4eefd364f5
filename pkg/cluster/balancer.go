package cluster

import (
	"math/rand/v2"
	"sync/atomic"
)

// Balancer picks the server of each call among the ones that can take it
// (up, breaker not open, not already tried by this call): RoundRobin or
// PowerOfTwoChoices. It is a concrete type, not an interface, so that the
// list of candidates stays on the caller's stack.
type Balancer struct {
	p2c  bool
	next *atomic.Uint64 // round robin's position, shared by copies
}

// RoundRobin sends each call to the next available server in turn, so
// every live server gets the same share of calls.
func RoundRobin() Balancer { return Balancer{next: new(atomic.Uint64)} }

// PowerOfTwoChoices compares two servers drawn at random and sends the call
// to the one with fewer calls in flight (Mitzenmacher's "power of two
// choices"): a slow server, whose calls pile up, gets fewer new ones,
// without any bookkeeping shared between calls.
func PowerOfTwoChoices() Balancer { return Balancer{p2c: true} }

func (b Balancer) String() string {
	if b.p2c {
		return "p2c"
	}
	return "round_robin"
}

// pick returns one of avail, which is not empty.
func (b Balancer) pick(avail []*endpoint) *endpoint {
	n := len(avail)
	if n == 1 {
		return avail[0]
	}
	if !b.p2c {
		return avail[(b.next.Add(1)-1)%uint64(n)]
	}
	i := rand.IntN(n)
	j := rand.IntN(n - 1)
	if j >= i {
		j++
	}
	x, y := avail[i], avail[j]
	if y.inflight.Load() < x.inflight.Load() {
		return y
	}
	return x
}
