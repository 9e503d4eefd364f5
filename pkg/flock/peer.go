package flock

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Peer lifecycle. A server lives for weeks among senders that come, go and
// crash, so everything a sender holds — its QPs, send CQs, SRQ, rings and
// stage buffers, its place in the dispatcher's and the QP scheduler's
// books, its metric series — is released when it leaves: Peer.Close (the
// runtime calls it when the sender's liveness link breaks) or a failed
// write to it (the server tears it down by itself; Done tells the runtime).
//
// Who may touch a peer's verbs objects while it is being torn down:
//   - leaders of its QPs' combining queues and the QP scheduler enter its
//     gate (enter/exit); once closing is set no one new gets in, and
//     teardown waits for those inside, whose posts fail at once because
//     the QPs are moved to the error state first;
//   - the request dispatcher reads its rings only inside poll, which
//     loads the QP list afresh each time: teardown removes the QPs from
//     that list and then waits for the poll in progress, if any, to end.

// errPeerClosed fails the work queued for a peer that is being torn down.
var errPeerClosed = errors.New("flock: sender disconnected")

// peerLife is the lifecycle state of a Peer.
type peerLife struct {
	users   atomic.Int64 // goroutines inside the gate
	closing atomic.Bool
	once    sync.Once
	done    chan struct{} // closed once everything is released
	cause   atomic.Pointer[error]
}

// enter lets a goroutine use the peer's QPs, unless it is being torn down.
// The increment comes before the check and teardown sets closing before it
// reads users (both sequentially consistent), so either enter sees
// closing or teardown sees the user.
func (p *Peer) enter() bool {
	p.life.users.Add(1)
	if p.life.closing.Load() {
		p.life.users.Add(-1)
		return false
	}
	return true
}

func (p *Peer) exit() { p.life.users.Add(-1) }

// Done is closed once the peer's resources have been released: after
// Close, or after the server tore the peer down because a write to it
// failed (the runtime then closes the peer's liveness link).
func (p *Peer) Done() <-chan struct{} { return p.life.done }

// Err says why the peer was torn down (nil while it is connected).
func (p *Peer) Err() error {
	if e := p.life.cause.Load(); e != nil {
		return *e
	}
	return nil
}

// Close disconnects the sender: its QPs are moved to the error state (so
// nothing waits on a peer that may be dead), it leaves the dispatcher's
// and the QP scheduler's books, and once nobody uses them its verbs
// objects, rings and metric series are freed. Safe to call more than once
// and concurrently with the server's own teardown; it returns when the
// peer is released (or the server closed, which releases it).
func (p *Peer) Close() error {
	p.teardown(errPeerClosed)
	<-p.life.done
	return nil
}

// fail tears the peer down in the background after a verbs error on one of
// its QPs: the goroutine that saw it is inside the gate.
func (p *Peer) fail(err error) {
	if p.life.closing.Load() {
		return
	}
	go p.teardown(err)
}

func (p *Peer) teardown(cause error) {
	p.life.once.Do(func() {
		p.life.cause.Store(&cause)
		p.life.closing.Store(true)
		defer close(p.life.done)
		for _, l := range p.qps {
			_ = l.qp.SetError() // whatever is posted or polled fails now
		}
		s := p.s
		if !s.forget(p) {
			return // the server is closing and releases every peer itself
		}
		defer s.drops.Done()
		s.waitPoll()
		for p.life.users.Load() != 0 {
			time.Sleep(50 * time.Microsecond)
		}
		p.release()
		s.m.peers.Dec()
	})
}

// forget removes p from the server's books; false when the server is
// closing (Close releases the peers it still lists). On true the caller
// must call s.drops.Done once p is released.
func (s *Server) forget(p *Peer) bool {
	s.schedMu.Lock()
	defer s.schedMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return false
	}
	s.drops.Add(1)
	for i, q := range s.peers {
		if q == p {
			s.peers = append(s.peers[:i:i], s.peers[i+1:]...)
			break
		}
	}
	all := make([]*serverQP, 0, len(*s.qps.Load()))
	byQPN := make(map[uint32]*serverQP, len(all))
	for _, l := range *s.qps.Load() {
		if l.p != p {
			all = append(all, l)
			byQPN[l.qpn] = l
		}
	}
	s.qps.Store(&all)
	s.byQPN.Store(&byQPN)
	s.m.activeQPs.DeleteLabelValues(strconv.Itoa(int(p.id)))
	s.m.qps.Sub(float64(len(p.qps)))
	return true
}

// Peers is the number of connected senders.
func (s *Server) Peers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peers)
}

// waitPoll waits for the dispatcher's poll in progress, if any: a poll
// that began after the QPs were unpublished cannot see them.
func (s *Server) waitPoll() {
	g := s.pollSeq.Load()
	if g&1 == 0 {
		return
	}
	for s.pollSeq.Load() == g {
		time.Sleep(50 * time.Microsecond)
	}
}
