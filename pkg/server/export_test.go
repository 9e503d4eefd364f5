package server

import (
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Hooks for the external tests of the connection time limits: they drive
// the sweeper by hand, so what closes a connection is the logical time
// they pass, never how fast the machine runs.

const (
	PhHandshake = phHandshake
	PhIdle      = phIdle
	PhFrame     = phFrame
	PhBusy      = phBusy
	IdleGrace   = idleGrace
	CtxSlabSize = ctxSlabSize
)

// ManualSweep keeps s from starting its own sweeper; call before Serve.
func ManualSweep(s *Server) { s.opts.manualSweep = true }

// Sweep runs one sweep at logical time now.
func Sweep(s *Server, now time.Duration) { s.sweep(now) }

// ConnState is what the sweeper sees of a connection.
type ConnState struct {
	Phase    uint32
	Progress int64 // bytes of the message arriving
	InBytes  int64
	Closing  string // close reason once one is set
	GoAway   bool
	Inflight int
}

// Conns returns the state of every connection.
func Conns(s *Server) []ConnState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ConnState
	for c := range s.conns {
		c.mu.Lock()
		n := int(c.inflight.Load())
		c.mu.Unlock()
		out = append(out, ConnState{
			Phase: c.phase.Load(), Progress: c.inBytes.Load() - c.base.Load(), InBytes: c.inBytes.Load(),
			Closing: whyNames[c.why.Load()], GoAway: c.goawayAt.Load() != 0, Inflight: n,
		})
	}
	return out
}

// SweepTick is options.sweepTick for the given limits.
func SweepTick(handshake, idle, grace time.Duration) time.Duration {
	o := options{handshakeTimeout: handshake, idleTimeout: idle, readGrace: grace}
	return o.sweepTick()
}

// GiveBacks counts the times s returned memory to the OS.
func GiveBacks(s *Server) int64 { return s.budget.gives.Load() }

// FastPathInUse is what the server's lane budget holds: open lanes, FLOCK
// peers, registered bytes and setups pending.
func FastPathInUse(s *Server) (lanes, flockPeers int, bytes int64, pending int) {
	b := &s.laneBudget
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total.lanes, b.total.flockPeers, b.total.bytes, b.total.pending
}

// SumOf sums a family's children that carry labels (counters, gauges,
// histogram counts).
var SumOf = sumOf

// sumOf sums the children of mf with labels (counters, gauges, histogram
// counts).
func sumOf(mf *dto.MetricFamily, labels map[string]string) float64 {
	var sum float64
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
	}
	return sum
}

// CountFreshCalls counts the call values method key ("Service:method")
// allocates: its NewCall asked for one with nothing to reuse. Set before
// the method is called.
func CountFreshCalls(s *Server, key string) *atomic.Int64 {
	m := (*s.methods.Load())[key]
	orig, fresh := m.m.NewCall, new(atomic.Int64)
	m.m.NewCall = func(reuse any) (proto.Struct, any) {
		if reuse == nil {
			fresh.Add(1)
		}
		return orig(reuse)
	}
	return fresh
}

// BudgetUsed is the memory the server's budget holds (requests and
// expected replies).
func BudgetUsed(s *Server) int64 {
	s.budget.mu.Lock()
	defer s.budget.mu.Unlock()
	return s.budget.used
}

// MaxConnMemHeld is the most any one connection of s holds of the budget.
func MaxConnMemHeld(s *Server) int64 {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.budget.mu.Lock() // memHeld's guard; never taken with s.mu here
	defer s.budget.mu.Unlock()
	var most int64
	for _, c := range conns {
		most = max(most, c.memHeld)
	}
	return most
}

// SetColdLease sets how long a cold call holds its place (replygate.go);
// call it before s serves.
func SetColdLease(s *Server, d time.Duration) { s.coldLease = d }

// ReadBufGrown counts the connections whose read buffer grew (readbuf.go).
func ReadBufGrown(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		c.mu.Lock() // grown is the reader's; the lock orders the read after the burst's replies
		if c.grown {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

const BigReadBufSize = bigReadBufSize

// ReplyEstimate is what a call of method name (as registered, e.g.
// "Echo:echo") expects its reply to take (replygate.go): 0 until one
// reply told its size.
func ReplyEstimate(s *Server, name string) int {
	m := (*s.methods.Load())[name]
	if m == nil {
		return -1
	}
	return m.repHint.Max()
}

// PlainAhead is how many calls a plain connection reads ahead (order.go).
const PlainAhead = plainAhead
