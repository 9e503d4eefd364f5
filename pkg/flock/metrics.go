package flock

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Metrics are FLOCK's counters, kept in plain atomics so that pkg/flock,
// and so every client binary, links no metrics library; Snapshot reads
// them, and pkg/flock/flockmetrics exports them to Prometheus
// (flock_* series). One Metrics may be shared by a server and any number
// of connections.
//
// Each field is its own allocation padded to a cache line: the per-message
// counters of the client's QPs and of the server's dispatcher would
// otherwise bounce one line between cores.
type Metrics struct {
	sides           [len(sideNames)]*sideSeries
	creditsGranted  *counter
	creditsDeclined *counter
	activeQPs       *gaugeSet
	migrations      *counter
	headReads       *counter
	sleeps          *counter
	wakeups         *counter
	peers           *gauge
	qps             *gauge
}

// NewMetrics creates a set of metrics, all zero.
func NewMetrics() *Metrics {
	m := &Metrics{creditsGranted: new(counter), creditsDeclined: new(counter), activeQPs: &gaugeSet{},
		migrations: new(counter), headReads: new(counter), sleeps: new(counter), wakeups: new(counter),
		peers: new(gauge), qps: new(gauge)}
	for i := range m.sides {
		m.sides[i] = new(sideSeries)
	}
	return m
}

// DegreeBuckets are the upper bounds of the coalescing-degree histogram
// (flock_coalescing_degree); one more bucket counts what lies above.
var DegreeBuckets = [...]float64{1, 2, 4, 8, 16, 32, 64}

// sideNames are the values of the side label.
var sideNames = [...]string{"client", "server"}

// sideSeries is one side's labelled series.
type sideSeries struct {
	used     atomic.Bool // side() was called: the series exist (as a Vec's child would)
	degree   histogram
	messages counter
	requests counter
}

// sideMetrics are one side's series, looked up once per Conn or Server.
type sideMetrics struct {
	degree             *histogram
	messages, requests *counter
}

func (m *Metrics) side(name string) sideMetrics {
	i := slices.Index(sideNames[:], name)
	if i < 0 {
		panic("flock: unknown metrics side " + name)
	}
	s := m.sides[i]
	s.used.Store(true)
	return sideMetrics{degree: &s.degree, messages: &s.messages, requests: &s.requests}
}

// cacheLine is the padding that keeps a hot atomic off other metrics' line.
const cacheLine = 64

// counter counts whole events: Add takes a float64 for the call sites'
// sake (they were Prometheus counters) but only whole, non-negative
// values are meant, which a uint64 adds in one instruction.
type counter struct {
	n atomic.Uint64
	_ [cacheLine - 8]byte
}

func (c *counter) Inc()          { c.n.Add(1) }
func (c *counter) Add(v float64) { c.n.Add(uint64(v)) }
func (c *counter) value() uint64 { return c.n.Load() }

// gauge is a float64 that goes up and down.
type gauge struct {
	bits atomic.Uint64
	_    [cacheLine - 8]byte
}

func (g *gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }
func (g *gauge) Inc()          { g.Add(1) }
func (g *gauge) Dec()          { g.Add(-1) }
func (g *gauge) Sub(v float64) { g.Add(-v) }
func (g *gauge) Add(v float64) { addFloat(&g.bits, v) }
func (g *gauge) value() float64 {
	return math.Float64frombits(g.bits.Load())
}

// addFloat adds v to the float64 whose bits b holds.
func addFloat(b *atomic.Uint64, v float64) {
	for {
		old := b.Load()
		if b.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// histogram counts observations into DegreeBuckets. A reader racing
// Observe may see the bucket count before the sum; Snapshot's Count is
// the sum of the buckets it read.
type histogram struct {
	counts [len(DegreeBuckets) + 1]atomic.Uint64
	sum    atomic.Uint64 // float64 bits
	_      [cacheLine]byte
}

func (h *histogram) Observe(v float64) {
	i := 0
	for i < len(DegreeBuckets) && v > DegreeBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	addFloat(&h.sum, v)
}

// gaugeSet is a gauge per label value (flock_active_qps by peer). It is
// touched on attach, leave and scheduling rounds, not per call.
type gaugeSet struct{ m sync.Map } // label value -> *gauge

// WithLabelValues returns the label value's gauge, creating it at zero.
func (s *gaugeSet) WithLabelValues(v string) *gauge {
	if g, ok := s.m.Load(v); ok {
		return g.(*gauge)
	}
	g, _ := s.m.LoadOrStore(v, new(gauge))
	return g.(*gauge)
}

// DeleteLabelValues drops the label value's gauge; false if it had none.
func (s *gaugeSet) DeleteLabelValues(v string) bool {
	_, ok := s.m.LoadAndDelete(v)
	return ok
}

// Snapshot is a copy of the metrics at one moment (each value read
// atomically, not all of them at one instant).
type Snapshot struct {
	// Sides holds, by side ("client", "server"), the series of the sides
	// in use: a Conn records as "client", a Server as "server".
	Sides map[string]SideSnapshot
	// CreditsGranted and CreditsDeclined count credit renewals the QP
	// scheduler granted and declined (the QP deactivated).
	CreditsGranted, CreditsDeclined uint64
	// Migrations counts callers moved to another QP by the goroutine
	// scheduler.
	Migrations uint64
	// HeadReads counts RDMA READs of a peer's ring head.
	HeadReads uint64
	// DispatcherSleeps and DispatcherWakeups count dispatcher sleeps on
	// the doorbell and the doorbells rung to end them.
	DispatcherSleeps, DispatcherWakeups uint64
	// Peers and ServerQPs are the senders connected to the server and the
	// QPs it holds for them.
	Peers, ServerQPs float64
	// ActiveQPs holds the active QPs of each sender, by peer id.
	ActiveQPs map[string]float64
}

// SideSnapshot is one side's series.
type SideSnapshot struct {
	// Degree is the coalescing degree: requests or responses per posted
	// RPC message.
	Degree HistogramSnapshot
	// Messages counts coalesced messages posted, Entries the requests or
	// responses they carried.
	Messages, Entries uint64
}

// HistogramSnapshot is a histogram over DegreeBuckets.
type HistogramSnapshot struct {
	// Counts[i] counts observations v with DegreeBuckets[i-1] < v <=
	// DegreeBuckets[i] (not cumulative); the last one counts those above
	// the last bound.
	Counts [len(DegreeBuckets) + 1]uint64
	Count  uint64
	Sum    float64
}

// Snapshot reads the metrics.
func (m *Metrics) Snapshot() Snapshot {
	s := Snapshot{
		Sides:          map[string]SideSnapshot{},
		CreditsGranted: m.creditsGranted.value(), CreditsDeclined: m.creditsDeclined.value(),
		Migrations: m.migrations.value(), HeadReads: m.headReads.value(),
		DispatcherSleeps: m.sleeps.value(), DispatcherWakeups: m.wakeups.value(),
		Peers: m.peers.value(), ServerQPs: m.qps.value(),
		ActiveQPs: map[string]float64{},
	}
	for i, ss := range m.sides {
		if !ss.used.Load() {
			continue
		}
		var h HistogramSnapshot
		for b := range ss.degree.counts {
			h.Counts[b] = ss.degree.counts[b].Load()
			h.Count += h.Counts[b]
		}
		h.Sum = math.Float64frombits(ss.degree.sum.Load())
		s.Sides[sideNames[i]] = SideSnapshot{Degree: h, Messages: ss.messages.value(), Entries: ss.requests.value()}
	}
	m.activeQPs.m.Range(func(k, v any) bool {
		s.ActiveQPs[k.(string)] = v.(*gauge).value()
		return true
	})
	return s
}
