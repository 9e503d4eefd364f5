package flock

import (
	"strconv"
	"time"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// scheduleQPs is the receiver-side QP scheduler. It polls every sender's
// receive CQ for credit renewals (WRITE_WITH_IMM; the immediate is the
// sender's median coalescing degree), grants C more credits on an active QP
// and declines on an inactive one, and every interval redistributes the
// active QPs by eq. 3.1. Grants, declines and (de)activations reach the
// sender as control messages on the QP's response path.
func (s *Server) scheduleQPs() {
	defer s.loops.Done()
	wcs := make([]rdma.Completion, 64)
	dl := deadline{Context: s.ctx}
	next := time.Now().Add(s.cfg.schedInterval)
	for {
		s.schedRounds.Add(1)
		if s.Peers() == 0 {
			// No sender: nothing to renew or redistribute; park until one
			// registers (an idle server costs no CPU).
			select {
			case <-s.stop:
				return
			case <-s.joined:
			}
			continue
		}
		// Renewals are rare next to requests, so this goroutine blocks in
		// the CQ's event wait (off any P) instead of spinning.
		wait := 5 * time.Millisecond
		if s.cfg.schedInterval > 0 {
			wait = min(wait, max(time.Until(next), 0))
		}
		// While the dispatcher sleeps no sender is sending: nothing to
		// redistribute, and the wake-up that ends it lands on this CQ.
		idle := s.asleep.Load()
		if idle {
			wait = idleSlice
		}
		dl.until = time.Now().Add(max(wait, time.Millisecond))
		n, err := s.rcq.Wait(&dl, wcs)
		if s.ctx.Err() != nil {
			return
		}
		if err == nil && n > 0 {
			byQPN := *s.byQPN.Load()
			for i := range wcs[:n] {
				// A sender being torn down is left alone (its SRQ may be
				// freed as soon as nobody is inside its gate).
				if l := byQPN[wcs[i].QPNum]; l != nil && l.p.enter() {
					if wc := &wcs[i]; wc.Err() == nil && wc.HasImm() && wc.Imm == bellImm {
						s.wake() // a sender woke the sleeping dispatcher
					} else {
						s.renew(l, wc)
					}
					_ = l.p.srq.PostRecv(l.p.recvs[:1])
					l.p.exit()
				}
			}
		}
		if s.cfg.schedInterval > 0 && !time.Now().Before(next) && !idle {
			s.mu.Lock()
			peers := append([]*Peer(nil), s.peers...)
			s.mu.Unlock()
			s.redistribute(peers)
			next = time.Now().Add(s.cfg.schedInterval)
		}
	}
}

func (s *Server) wake() {
	s.m.wakeups.Inc()
	s.nudge()
}

// nudge makes a sleeping dispatcher look at its rings (and sleep again,
// telling every sender its new epoch).
func (s *Server) nudge() {
	select {
	case s.bell <- struct{}{}:
	default:
	}
}

func (s *Server) renew(l *serverQP, wc *rdma.Completion) {
	if wc.Err() != nil || !wc.HasImm() {
		return
	}
	l.util.Add(uint64(wc.Imm))
	if l.active.Load() {
		l.granted.Add(uint64(s.cfg.credits))
		s.m.creditsGranted.Inc()
	} else {
		s.m.creditsDeclined.Inc()
	}
	l.answered.Add(1)
	s.pushControl(l)
}

// pushControl sends the QP's credit state to the sender, coalesced with
// whatever responses are queued on that QP. The QP scheduler serves every
// sender, so it never waits for the post (a dead sender's may take a NIC's
// transport retries to fail): a goroutine submits the node, detached. The
// message carries absolute values (credits granted, renewals answered,
// the active flag), so two of them may arrive in either order.
func (s *Server) pushControl(l *serverQP) {
	n := s.nodes.get()
	n.ctx, n.kind = s.ctx, opCtl
	s.ctl.Add(1)
	go func() {
		defer s.ctl.Done()
		l.submitDetached(n)
	}()
}

func (s *Server) redistribute(peers []*Peer) {
	s.schedMu.Lock()
	defer s.schedMu.Unlock()
	s.redistributeLocked(peers)
}

// redistributeLocked applies eq. 3.1. Deactivations go first, so the
// number of active QPs never exceeds MAX_AQP, not even in passing.
func (s *Server) redistributeLocked(peers []*Peer) {
	loads := make([]SenderLoad, len(peers))
	for i, p := range peers {
		loads[i].QPs = len(p.qps)
		for _, l := range p.qps {
			loads[i].U += l.util.Swap(0)
		}
	}
	alloc := AllocateQPs(loads, s.cfg.maxAQP)
	for _, activate := range []bool{false, true} {
		for i, p := range peers {
			for j, l := range p.qps {
				want := j < alloc[i]
				if want != activate || want == l.active.Load() {
					continue
				}
				if want {
					l.granted.Add(uint64(s.cfg.credits))
				}
				l.active.Store(want)
				s.pushControl(l)
			}
		}
	}
	for i, p := range peers {
		if !p.life.closing.Load() { // a leaving sender's series is deleted (peer.go)
			s.m.activeQPs.WithLabelValues(strconv.Itoa(int(p.id))).Set(float64(alloc[i]))
		}
	}
}
