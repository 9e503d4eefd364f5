package flock

import (
	"runtime"
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
	next := time.Now().Add(s.cfg.schedInterval)
	idle := 0
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		got := false
		s.mu.Lock()
		peers := append([]*Peer(nil), s.peers...)
		s.mu.Unlock()
		for _, p := range peers {
			n, err := p.rcq.Poll(wcs)
			if err != nil || n == 0 {
				continue
			}
			got = true
			for i := range wcs[:n] {
				s.renew(p, &wcs[i])
			}
			_ = p.srq.PostRecv(p.recvs[:n])
		}
		if s.cfg.schedInterval > 0 && time.Now().After(next) {
			s.redistribute(peers)
			next = time.Now().Add(s.cfg.schedInterval)
		}
		if got {
			idle = 0
			continue
		}
		idle++
		if idle < 256 {
			runtime.Gosched()
			continue
		}
		select {
		case <-s.stop:
			return
		case <-time.After(time.Duration(min(idle/256, 20)) * 10 * time.Microsecond):
		}
	}
}

func (s *Server) renew(p *Peer, wc *rdma.Completion) {
	l := p.byQPN[wc.QPNum]
	if l == nil || wc.Err() != nil || !wc.HasImm() {
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

// pushControl sends the QP's credit state to the sender now, coalesced with
// whatever responses are queued on that QP.
func (s *Server) pushControl(l *slane) {
	n := newNode()
	n.ctx, n.kind = s.ctx, opCtl
	l.submit(n)
}

func (s *Server) redistribute(peers []*Peer) {
	loads := make([]SenderLoad, len(peers))
	for i, p := range peers {
		loads[i].QPs = len(p.lanes)
		for _, l := range p.lanes {
			loads[i].U += l.util.Swap(0)
		}
	}
	alloc := AllocateQPs(loads, s.cfg.maxAQP)
	for i, p := range peers {
		for j, l := range p.lanes {
			want := j < alloc[i]
			if want == l.active.Load() {
				continue
			}
			if want {
				l.granted.Add(uint64(s.cfg.credits))
			}
			l.active.Store(want)
			s.pushControl(l)
		}
		s.m.activeQPs.WithLabelValues(strconv.Itoa(int(p.id))).Set(float64(alloc[i]))
	}
}
