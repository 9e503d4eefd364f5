package server

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// laneFamily is a metric family whose children the dedicated lanes' meters
// (see laneMeter) and the call shards (callmeter.go) add to at scrape
// time: each child the family has is
// emitted with the lanes' count for its labels added, and labels only the
// lanes counted are emitted on their own. Registered in place of the
// family's vector, so the metric's name, help and labels stay one.
type laneFamily struct {
	vec   prometheus.Collector
	desc  *prometheus.Desc
	names []string // the variable labels, in the vector's order
	kind  laneKind
	snap  func() *laneSnap
	parts func(*laneSnap) map[string]*lanePart
}

type laneKind int

const (
	laneCounter laneKind = iota
	laneGauge
	laneHistogram
)

// lanePart is the lanes' contribution to one child: v, or for a histogram
// the summed cells.
type lanePart struct {
	lvs []string
	v   float64
	c   *laneCells
}

func newLaneFamily(vec prometheus.Collector, names []string, kind laneKind, snap func() *laneSnap, parts func(*laneSnap) map[string]*lanePart) *laneFamily {
	ch := make(chan *prometheus.Desc, 1)
	vec.Describe(ch) // a vector has one Desc
	return &laneFamily{vec: vec, desc: <-ch, names: names, kind: kind, snap: snap, parts: parts}
}

func (f *laneFamily) Describe(ch chan<- *prometheus.Desc) { f.vec.Describe(ch) }

func (f *laneFamily) Collect(ch chan<- prometheus.Metric) {
	parts := f.parts(f.snap())
	inner := make(chan prometheus.Metric)
	go func() {
		f.vec.Collect(inner)
		close(inner)
	}()
	for m := range inner {
		if len(parts) == 0 {
			ch <- m
			continue
		}
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			ch <- m
			continue
		}
		k := f.key(&d)
		p := parts[k]
		if p == nil {
			ch <- m
			continue
		}
		delete(parts, k)
		ch <- f.merge(&d, p)
	}
	for _, p := range parts {
		ch <- f.merge(nil, p)
	}
}

// key is a child's label values in f.names order, joined as partKey does.
func (f *laneFamily) key(d *dto.Metric) string {
	lvs := make([]string, len(f.names))
	for _, lp := range d.GetLabel() {
		for i, n := range f.names {
			if lp.GetName() == n {
				lvs[i] = lp.GetValue()
			}
		}
	}
	return partKey(lvs)
}

func partKey(lvs []string) string { return strings.Join(lvs, "\xff") }

// merge emits the child d (nil: none) with the lanes' part added.
func (f *laneFamily) merge(d *dto.Metric, p *lanePart) prometheus.Metric {
	switch f.kind {
	case laneCounter:
		return prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, d.GetCounter().GetValue()+p.v, p.lvs...)
	case laneGauge:
		return prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, d.GetGauge().GetValue()+p.v, p.lvs...)
	}
	h := d.GetHistogram()
	count, sum := h.GetSampleCount(), h.GetSampleSum()+p.c.latSum.Seconds()
	base := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		base[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	buckets := make(map[float64]uint64, len(DurationBuckets))
	var cum uint64
	for i, ub := range DurationBuckets {
		cum += p.c.lat[i]
		buckets[ub] = base[ub] + cum
	}
	count += cum + p.c.lat[len(DurationBuckets)]
	return prometheus.MustNewConstHistogram(f.desc, count, sum, buckets, p.lvs...)
}

// laneFamilies registers the families the lanes' meters add to, each in
// place of its vector.
func (m *metrics) laneFamilies(snap func() *laneSnap) []prometheus.Collector {
	fn := []string{"service", "function", "transport"}
	// Every method a lane counted a call of has each of these children
	// (as statsFor makes them), zero or not.
	perCall := func(v func(*laneCells) float64) func(*laneSnap) map[string]*lanePart {
		return func(s *laneSnap) map[string]*lanePart {
			out := map[string]*lanePart{}
			for k, c := range s.cells {
				if c.calls > 0 {
					lvs := []string{k.m.svc, k.m.m.Name, transportNames[k.tr]}
					out[partKey(lvs)] = &lanePart{lvs: lvs, v: v(c)}
				}
			}
			return out
		}
	}
	hist := func(s *laneSnap) map[string]*lanePart {
		out := map[string]*lanePart{}
		for k, c := range s.cells {
			if c.calls-uint64(max(c.inflight, 0)) == 0 {
				continue // none ended yet
			}
			lvs := []string{k.m.svc, k.m.m.Name, transportNames[k.tr]}
			out[partKey(lvs)] = &lanePart{lvs: lvs, c: c}
		}
		return out
	}
	handled := func(s *laneSnap) map[string]*lanePart {
		out := map[string]*lanePart{}
		for k, c := range s.cells {
			if c.ok > 0 {
				lvs := []string{k.m.svc, k.m.m.Name, transportNames[k.tr], proto.OutcomeOK}
				out[partKey(lvs)] = &lanePart{lvs: lvs, v: float64(c.ok)}
			}
		}
		return out
	}
	replies := func(s *laneSnap) map[string]*lanePart {
		out := map[string]*lanePart{}
		for k, c := range s.cells {
			for i, n := range c.replies {
				if n == 0 {
					continue
				}
				lvs := []string{k.m.svc, k.m.m.Name, engineProtocolName(i)}
				key := partKey(lvs)
				if p := out[key]; p != nil { // the same method on shm and rdma
					p.v += float64(n)
					continue
				}
				out[key] = &lanePart{lvs: lvs, v: float64(n)}
			}
		}
		return out
	}
	engine := func(s *laneSnap) map[string]*lanePart {
		out := map[string]*lanePart{}
		for m, sent := range s.engine {
			for i, n := range sent {
				if n > 0 {
					lvs := []string{m.svc, m.m.Name, engineProtocolName(i)}
					out[partKey(lvs)] = &lanePart{lvs: lvs, v: float64(n)}
				}
			}
		}
		return out
	}
	io := func(dir int) func(*laneSnap) map[string]*lanePart {
		return func(s *laneSnap) map[string]*lanePart {
			out := map[string]*lanePart{}
			for tr := range s.io {
				if n := s.io[tr][dir]; n > 0 {
					lvs := []string{transportNames[tr]}
					out[partKey(lvs)] = &lanePart{lvs: lvs, v: float64(n)}
				}
			}
			return out
		}
	}
	return []prometheus.Collector{
		newLaneFamily(m.calls, fn, laneCounter, snap, perCall(func(c *laneCells) float64 { return float64(c.calls) })),
		newLaneFamily(m.reqBytes, fn, laneCounter, snap, perCall(func(c *laneCells) float64 { return float64(c.reqBytes) })),
		newLaneFamily(m.repBytes, fn, laneCounter, snap, perCall(func(c *laneCells) float64 { return float64(c.repBytes) })),
		newLaneFamily(m.inflight, fn, laneGauge, snap, perCall(func(c *laneCells) float64 { return float64(c.inflight) })),
		newLaneFamily(m.latency, fn, laneHistogram, snap, hist),
		newLaneFamily(m.handled, append(fn, "outcome"), laneCounter, snap, handled),
		newLaneFamily(m.laneReplies, []string{"service", "function", "protocol"}, laneCounter, snap, replies),
		newLaneFamily(m.engineSent, []string{"service", "function", "protocol"}, laneCounter, snap, engine),
		newLaneFamily(m.bytesIn, []string{"transport"}, laneCounter, snap, io(0)),
		newLaneFamily(m.bytesOut, []string{"transport"}, laneCounter, snap, io(1)),
	}
}
