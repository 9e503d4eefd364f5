package ycsb

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in nanoseconds from 1 ns to one minute with three
// significant digits; longer ones are clamped to the maximum so that a
// stall still counts.
const (
	histMin    = 1
	histMax    = int64(time.Minute)
	histSigFig = 3
)

type opStats struct {
	mu     sync.Mutex
	hist   *hdrhistogram.Histogram
	errors int64
	// The current interval (TrackIntervals): what Interval reports and
	// then starts over, beside the whole phase's.
	ival       *hdrhistogram.Histogram
	ivalErrors int64
}

// Measurements collects per-operation latency histograms. It is safe for
// concurrent use.
type Measurements struct {
	mu        sync.RWMutex
	ops       map[string]*opStats
	intervals bool
}

// TrackIntervals makes m also keep what was recorded since the last
// Interval call, for periodic status lines. Call it before any Record.
func (m *Measurements) TrackIntervals() { m.intervals = true }

// NewMeasurements returns an empty collector.
func NewMeasurements() *Measurements {
	return &Measurements{ops: map[string]*opStats{}}
}

func (m *Measurements) stats(op string) *opStats {
	m.mu.RLock()
	s := m.ops[op]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.ops[op]; s == nil {
		s = &opStats{hist: hdrhistogram.New(histMin, histMax, histSigFig)}
		if m.intervals {
			s.ival = hdrhistogram.New(histMin, histMax, histSigFig)
		}
		m.ops[op] = s
	}
	return s
}

// Record adds one operation's latency; a non-nil err counts it as failed
// (failed operations are counted but kept out of the latency histogram).
func (m *Measurements) Record(op string, d time.Duration, err error) {
	s := m.stats(op)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errors++
		if s.ival != nil {
			s.ivalErrors++
		}
		return
	}
	v := int64(d)
	v = min(max(v, histMin), histMax)
	_ = s.hist.RecordValue(v) // cannot fail: v is clamped to the range
	if s.ival != nil {
		_ = s.ival.RecordValue(v)
	}
}

// Interval returns, per operation (sorted by name), what was recorded
// since the previous call, with throughput over elapsed (the interval's
// length), and starts the next interval. Without TrackIntervals it is
// empty.
func (m *Measurements) Interval(elapsed time.Duration) []Summary {
	var out []Summary
	for _, name := range m.Operations() {
		s := m.stats(name)
		s.mu.Lock()
		if s.ival != nil {
			out = append(out, summarize(name, s.ival, s.ivalErrors, elapsed))
			s.ival.Reset()
			s.ivalErrors = 0
		}
		s.mu.Unlock()
	}
	return out
}

// summarize is one operation's Summary of h, with throughput over elapsed.
func summarize(name string, h *hdrhistogram.Histogram, errors int64, elapsed time.Duration) Summary {
	sum := Summary{Operation: name, Count: h.TotalCount(), Errors: errors}
	if sum.Count > 0 {
		sum.AvgUs = h.Mean() / 1e3
		sum.MinUs, sum.MaxUs = us(h.Min()), us(h.Max())
		sum.P50Us = us(h.ValueAtQuantile(50))
		sum.P95Us = us(h.ValueAtQuantile(95))
		sum.P99Us = us(h.ValueAtQuantile(99))
		sum.P999Us = us(h.ValueAtQuantile(99.9))
	}
	if secs := elapsed.Seconds(); secs > 0 {
		sum.Throughput = float64(sum.Count) / secs
	}
	return sum
}

// Summary is the result for one operation type. Latencies are in
// microseconds, as YCSB reports them.
type Summary struct {
	Operation  string  `json:"operation"`
	Count      int64   `json:"count"`
	Errors     int64   `json:"errors"`
	Throughput float64 `json:"throughput_ops_sec"`
	AvgUs      float64 `json:"avg_us"`
	MinUs      float64 `json:"min_us"`
	MaxUs      float64 `json:"max_us"`
	P50Us      float64 `json:"p50_us"`
	P95Us      float64 `json:"p95_us"`
	P99Us      float64 `json:"p99_us"`
	P999Us     float64 `json:"p999_us"`
}

// Report is a full run result.
type Report struct {
	Elapsed    time.Duration `json:"elapsed_ns"`
	Operations int64         `json:"operations"`
	Throughput float64       `json:"throughput_ops_sec"`
	Ops        []Summary     `json:"ops"`
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

// Report summarises everything recorded, with throughput over elapsed.
func (m *Measurements) Report(elapsed time.Duration) Report {
	r := Report{Elapsed: elapsed}
	secs := elapsed.Seconds()
	for _, name := range m.Operations() {
		s := m.stats(name)
		s.mu.Lock()
		sum := summarize(name, s.hist, s.errors, elapsed)
		s.mu.Unlock()
		r.Operations += sum.Count
		r.Ops = append(r.Ops, sum)
	}
	if secs > 0 {
		r.Throughput = float64(r.Operations) / secs
	}
	return r
}

// WriteText writes an aligned table.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "[OVERALL] RunTime(ms)\t%d\t\n", r.Elapsed.Milliseconds())
	fmt.Fprintf(tw, "[OVERALL] Throughput(ops/sec)\t%.2f\t\n", r.Throughput)
	fmt.Fprintln(tw, "operation\tcount\terrors\tops/sec\tavg(us)\tp50(us)\tp95(us)\tp99(us)\tp99.9(us)\tmax(us)\t")
	for _, s := range r.Ops {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n",
			s.Operation, s.Count, s.Errors, s.Throughput, s.AvgUs, s.P50Us, s.P95Us, s.P99Us, s.P999Us, s.MaxUs)
	}
	return tw.Flush()
}

// WriteCSV writes one header row and one row per operation.
func (r Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	_ = cw.Write([]string{"operation", "count", "errors", "throughput_ops_sec", "avg_us", "min_us", "p50_us", "p95_us", "p99_us", "p999_us", "max_us"})
	for _, s := range r.Ops {
		_ = cw.Write([]string{s.Operation, strconv.FormatInt(s.Count, 10), strconv.FormatInt(s.Errors, 10),
			f(s.Throughput), f(s.AvgUs), f(s.MinUs), f(s.P50Us), f(s.P95Us), f(s.P99Us), f(s.P999Us), f(s.MaxUs)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// distribution returns (percentile, latency µs) points for plotting.
func (m *Measurements) distribution(op string) [][2]float64 {
	s := m.stats(op)
	s.mu.Lock()
	defer s.mu.Unlock()
	var pts [][2]float64
	for _, b := range s.hist.CumulativeDistribution() {
		if b.Count == 0 {
			continue
		}
		pts = append(pts, [2]float64{b.Quantile, us(b.ValueAt)})
	}
	return pts
}

// Operations returns the recorded operation names, sorted.
func (m *Measurements) Operations() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	names := make([]string, 0, len(m.ops))
	for n := range m.ops {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
