// Package bench is the Apache Thrift Benchmark (ATB) harness over TCP: an
// echo service served and called by HatRPC and by Apache Thrift Go, the
// latency and throughput loops that measure them, and the report table.
// cmd/atb-tcp runs server and client in separate processes (optionally
// pinned with taskset); the Benchmark* functions are the in-process view.
package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Caller performs echo round trips. A Caller is used by one goroutine at a
// time; systems whose connections are concurrency-safe hand the same
// connection to several Callers.
type Caller interface {
	Echo(ctx context.Context, payload []byte) ([]byte, error)
	Close() error
}

// Server is a running echo server.
type Server interface {
	Addr() string
	// Stop shuts the server down, waiting at most until ctx is done.
	Stop(ctx context.Context) error
}

// System is one RPC implementation under test.
type System interface {
	Name() string
	// Serve starts an echo server on addr ("127.0.0.1:0" for any port).
	Serve(ctx context.Context, addr string) (Server, error)
	// Callers opens n callers to addr, one per concurrent goroutine.
	Callers(ctx context.Context, addr string, n int) ([]Caller, error)
}

var (
	registryMu sync.Mutex
	registry   = map[string]System{}
)

// Register makes a system available by name to the runner.
func Register(s System) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[s.Name()]; dup {
		panic("bench: duplicate system " + s.Name())
	}
	registry[s.Name()] = s
}

// ErrUnknownSystem is returned by Lookup for a name nobody registered.
var ErrUnknownSystem = errors.New("bench: unknown system")

// Lookup finds a registered system.
func Lookup(name string) (System, error) {
	if base, ok := strings.CutSuffix(name, BaselineSuffix); ok {
		// The baseline build may not know the system this one does (or
		// the other way round): its processes will say.
		if _, _, err := binaryFor(name); err != nil {
			return nil, err
		}
		if base == "" || strings.Contains(base, BaselineSuffix) {
			return nil, fmt.Errorf("%w %q", ErrUnknownSystem, name)
		}
		return baselineSystem{name: name}, nil
	}
	if f, ok := parseFloor(name); ok && f.Work > 0 {
		return f, nil // a floor with work is named by its work, not registered
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	s, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (have %v, and %s+<duration>)", ErrUnknownSystem, name, systemNames(), FloorName)
	}
	return s, nil
}

// Systems lists the registered system names, sorted.
func Systems() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	return systemNames()
}

func systemNames() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrEchoMismatch means a reply did not carry the request's bytes back.
var ErrEchoMismatch = errors.New("bench: echo reply differs from request")

// Payload is a deterministic non-constant payload of n bytes.
func Payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + 7)
	}
	return b
}

// inPlaceCaller is a Caller that can have a reply checked where it arrived,
// before its buffer is reused (hatrpc's generated EchoBorrowed): the same
// check the harness makes of every reply, without the reply becoming the
// caller's to keep.
type inPlaceCaller interface {
	EchoCheck(ctx context.Context, payload []byte, check func(rep []byte) error) error
}

// echoer makes calls of one payload through one Caller and checks each
// reply (see checkEcho). Built once per caller and run: an in-place
// check's closure made per call would be the harness's allocation inside
// every timed call of the systems that check in place, and not of the
// others.
type echoer struct {
	c       Caller
	ic      inPlaceCaller // c, when it checks in place
	payload []byte
	check   func(rep []byte) error
}

func newEchoer(c Caller, payload []byte) *echoer {
	e := &echoer{c: c, payload: payload}
	e.ic, _ = c.(inPlaceCaller)
	e.check = func(rep []byte) error { return checkEcho(payload, rep) }
	return e
}

// call makes one call and checks its reply.
func (e *echoer) call(ctx context.Context) error {
	if e.ic != nil {
		return e.ic.EchoCheck(ctx, e.payload, e.check)
	}
	rep, err := e.c.Echo(ctx, e.payload)
	if err != nil {
		return err
	}
	return checkEcho(e.payload, rep)
}

func checkEcho(req, rep []byte) error {
	// Length plus both ends catches truncation and misrouted replies without
	// a full compare dominating small-message timings.
	if len(req) != len(rep) || (len(req) > 0 && (req[0] != rep[0] || req[len(req)-1] != rep[len(rep)-1])) {
		return fmt.Errorf("%w: sent %d bytes, got %d", ErrEchoMismatch, len(req), len(rep))
	}
	return nil
}

// NewHistogram records latencies in nanoseconds up to 10s with three
// significant digits. The lowest discernible value sets the finest bucket
// (a power of two at or below it): 1µs made 512 ns buckets, too coarse for
// the ~2 µs round trips of the shm engine; 10 ns gives 8 ns buckets.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(10, 10_000_000_000, 3)
}

// LatencyResult is one closed-loop single-caller latency run.
type LatencyResult struct {
	Calls int64         `json:"calls"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Mean  time.Duration `json:"mean_ns"`
	// Elapsed is the recorded calls' wall time and Over[i] how many of
	// them took longer than SlowEdges[i]: how often a run is interrupted
	// per millisecond of calls, comparable between systems of different
	// speeds where a percentile is not (zero Elapsed: not measured, as
	// for UCX's own tool).
	Elapsed time.Duration         `json:"elapsed_ns,omitempty"`
	Over    [len(SlowEdges)]int64 `json:"over"`
	// Stamps, asked for by ClientSpec.Stamps, place the slow calls in
	// time (stamps.go); the driver writes them out and drops them.
	Stamps *Stamps `json:"stamps,omitempty"`
}

// SlowEdges are the call lengths LatencyResult.Over counts calls beyond.
var SlowEdges = [...]time.Duration{5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond}

// overCounts counts h's values above each of SlowEdges.
func overCounts(h *hdrhistogram.Histogram) (over [len(SlowEdges)]int64) {
	for _, b := range h.Distribution() {
		for i, e := range SlowEdges {
			// A bucket counts once its lowest value is past the edge:
			// buckets are 8 ns wide up to ~16 µs, 16-32 ns beyond.
			if b.From > int64(e) {
				over[i] += b.Count
			}
		}
	}
	return over
}

// MeasureLatency makes warmup unrecorded calls, then calls recorded ones.
func MeasureLatency(ctx context.Context, c Caller, payload []byte, warmup, calls int) (LatencyResult, error) {
	return measureLatency(ctx, c, payload, warmup, calls, false)
}

// measureLatency is MeasureLatency, with the recorded calls over
// SlowEdges[0] stamped when stamps is set (LatencyResult.Stamps).
func measureLatency(ctx context.Context, c Caller, payload []byte, warmup, calls int, stamps bool) (LatencyResult, error) {
	e := newEchoer(c, payload)
	for i := 0; i < warmup; i++ {
		if err := e.call(ctx); err != nil {
			return LatencyResult{}, err
		}
	}
	h := NewHistogram()
	var st *stamper
	if stamps {
		st = newStamper()
	}
	began := time.Now()
	for i := 0; i < calls; i++ {
		start := time.Now()
		err := e.call(ctx)
		d := time.Since(start)
		if err != nil {
			return LatencyResult{}, err
		}
		_ = h.RecordValue(int64(d))
		if st != nil && d > SlowEdges[0] {
			st.add(start, d)
		}
	}
	res := LatencyResult{
		Calls:   h.TotalCount(),
		P50:     time.Duration(h.ValueAtQuantile(50)),
		P99:     time.Duration(h.ValueAtQuantile(99)),
		P999:    time.Duration(h.ValueAtQuantile(99.9)),
		Mean:    time.Duration(h.Mean()),
		Elapsed: time.Since(began),
		Over:    overCounts(h),
	}
	if st != nil {
		res.Stamps = st.done(began, res.Elapsed)
	}
	return res, nil
}

// ThroughputResult is one closed-loop run with several concurrent callers.
type ThroughputResult struct {
	Callers int           `json:"callers"`
	Calls   int64         `json:"calls"`
	Elapsed time.Duration `json:"elapsed_ns"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	// User+sys CPU time of the client process and of the server process
	// over the measured window (zero: not measured).
	ClientCPU time.Duration `json:"client_cpu_ns,omitempty"`
	ServerCPU time.Duration `json:"server_cpu_ns,omitempty"`
}

// OpsPerSec is completed calls per second.
func (r ThroughputResult) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// MeasureThroughput runs every caller in its own goroutine in a closed loop
// for d (after a short unrecorded warm-up) and counts completed calls.
func MeasureThroughput(ctx context.Context, callers []Caller, payload []byte, d time.Duration) (ThroughputResult, error) {
	return measureThroughput(ctx, callers, payload, d, 0)
}

// measureThroughput is MeasureThroughput that also samples this process's
// CPU time and serverPID's (0: none) at the edges of the measured window.
func measureThroughput(ctx context.Context, callers []Caller, payload []byte, d time.Duration, serverPID int) (ThroughputResult, error) {
	warm := d / 10
	var (
		calls    atomic.Int64
		measured atomic.Bool
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	hists := make([]*hdrhistogram.Histogram, len(callers))
	for i, c := range callers {
		hists[i] = NewHistogram()
		wg.Add(1)
		go func(e *echoer, h *hdrhistogram.Histogram) {
			defer wg.Done()
			for runCtx.Err() == nil {
				start := time.Now()
				if err := e.call(runCtx); err != nil {
					if runCtx.Err() != nil {
						return // the run ended while this call was in flight
					}
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				if measured.Load() {
					calls.Add(1)
					_ = h.RecordValue(int64(time.Since(start)))
				}
			}
		}(newEchoer(c, payload), hists[i])
	}
	timer := time.NewTimer(warm)
	defer timer.Stop()
	var (
		start      time.Time
		cpu0, cpu1 cpuSample
	)
	select {
	case <-timer.C:
		cpu0 = sampleCPU(serverPID)
		measured.Store(true)
		start = time.Now()
	case <-runCtx.Done():
	}
	timer.Reset(d)
	select {
	case <-timer.C:
	case <-runCtx.Done():
	}
	measured.Store(false)
	n := calls.Load()
	elapsed := time.Since(start)
	cpu1 = sampleCPU(serverPID)
	cancel()
	wg.Wait()
	if firstErr != nil {
		return ThroughputResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return ThroughputResult{}, err
	}
	all := NewHistogram()
	for _, h := range hists {
		all.Merge(h)
	}
	res := ThroughputResult{
		Callers:   len(callers),
		Calls:     n,
		Elapsed:   elapsed,
		P50:       time.Duration(all.ValueAtQuantile(50)),
		P99:       time.Duration(all.ValueAtQuantile(99)),
		ClientCPU: cpu1.client - cpu0.client,
	}
	if cpu0.serverOK && cpu1.serverOK {
		res.ServerCPU = cpu1.server - cpu0.server
	}
	return res, nil
}

// CloseAll closes every caller and returns the first error.
func CloseAll(cs []Caller) error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
