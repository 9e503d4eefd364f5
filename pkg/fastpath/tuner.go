package fastpath

import (
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Spinner is what the tuner moves: an event-polling endpoint's spin phase.
type Spinner interface{ SetSpin(time.Duration) }

// Polling decisions of the adaptive tuner (CommonRDMA's decision tree).
const (
	DecideSpin  = iota // spare cores: spin AdaptiveSpin before blocking
	DecideShort        // cores taken but CPU not saturated: spin ShortSpin
	DecideBlock        // saturated: block at once (pure event polling)
	NumDecisions
)

// ShortSpin covers a reply that is already on its way, not a handler.
const ShortSpin = 10 * time.Microsecond

var decisionNames = [NumDecisions]string{"spin", "short_spin", "block"}

// DecisionName names a decision for metrics and logs.
func DecisionName(d int) string { return decisionNames[d] }

// tunePeriod is how often the tuner decides (less often only while it
// decides to spin: tuneMaxPeriod): long enough to average the CPU load
// over many calls, short enough to follow a load burst.
const tunePeriod = 10 * time.Millisecond

// tuneMaxPeriod bounds the tuner's period while it decides DecideSpin
// tick after tick: each such tick doubles the period, up to this; another
// decision, or a lane registered or gone, brings it back to tunePeriod.
// Each tick wakes a thread, and with the lanes' pollers spinning on every
// core that thread runs by preempting one of them: a 64 B lane call at
// the tick took 25-100 µs instead of 1.5, once every 10 ms in each
// process (docs/performance/history.md, "The tuner's tick in the lanes'
// tail"). Under the other decisions the pollers spin short or not at all,
// a tick costs them little, and the tuner follows the load every
// tunePeriod as before.
const tuneMaxPeriod = 80 * time.Millisecond

// nextPeriod is the period after a tick, at period cur, that decided d,
// changed when d is not the decision before it.
func nextPeriod(cur time.Duration, d int, changed bool) time.Duration {
	if changed || d != DecideSpin || cur < tunePeriod {
		return tunePeriod
	}
	return min(2*cur, tuneMaxPeriod)
}

type tuner struct {
	mu      sync.Mutex
	eps     map[Spinner]bool // true: a busy-polling endpoint
	stop    chan struct{}
	done    chan struct{}
	kick    chan struct{} // a lane came or went: back to tunePeriod
	current atomic.Int32
	period  atomic.Int64  // the loop's period now (tests)
	resets  atomic.Uint64 // backed-off periods a kick cut short (tests)

	waiters map[Waiter]time.Duration // every lane, adaptive or not: its Spun at the last tick
	gone    time.Duration            // the polling of lanes no longer counted (PollingStats.Polled)
	counts  [NumDecisions]atomic.Uint64
	load    atomic.Uint64 // the last tick's Sample.CPU (math.Float64bits)
}

var tune = tuner{eps: map[Spinner]bool{}, waiters: map[Waiter]time.Duration{}, kick: make(chan struct{}, 1)}

// kicked tells the loop that the lanes changed, so that it decides again
// within tunePeriod (any goroutine; never blocks).
func (t *tuner) kicked() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Waiter is a lane's endpoint as the tuner counts it: whether it is in a
// wait in C now, and how long its waits have polled since it was created
// (the spinning the tuner leaves out of the process's load).
type Waiter interface {
	InExchange() bool
	Spun() time.Duration
}

// CountWaits puts a lane's endpoint, of any polling kind, among those the
// tuner counts as waiting while they are in C; unregister before closing
// the endpoint. The tuner compares the number of waiting lanes with the
// cores. The lanes say so in memory of their own (a flag C sets and
// clears) and the tuner looks once a tick: a shared count in Go was two
// locked updates of one line on every call of every lane.
func CountWaits(w Waiter) (unregister func()) {
	tune.mu.Lock()
	tune.waiters[w] = w.Spun()
	tune.mu.Unlock()
	tune.kicked()
	return func() {
		tune.mu.Lock()
		tune.gone += max(w.Spun(), tune.waiters[w])
		delete(tune.waiters, w)
		tune.mu.Unlock()
		tune.kicked()
	}
}

// spunLocked is the time the lanes' waits polled since the last tick
// (t.mu held; it moves the lanes' marks to now).
func (t *tuner) spunLocked() time.Duration {
	var d time.Duration
	for w, last := range t.waiters {
		if now := w.Spun(); now > last {
			d += now - last
			t.waiters[w] = now
		}
	}
	return d
}

// polledLocked is the time every lane counted so far polled (t.mu held).
func (t *tuner) polledLocked() time.Duration {
	d := t.gone
	for w, last := range t.waiters {
		d += max(w.Spun(), last)
	}
	return d
}

// waitingLocked counts the lanes in a wait in C (t.mu held).
func (t *tuner) waitingLocked() int {
	n := 0
	for w := range t.waiters {
		if w.InExchange() {
			n++
		}
	}
	return n
}

// RegisterAdaptive puts an adaptive endpoint under the tuner and sets its
// current spin; unregister before closing the endpoint. The tuner runs
// while at least one endpoint is registered.
func RegisterAdaptive(s Spinner) (unregister func()) { return register(s, false) }

// RegisterBusy puts a busy-polling endpoint under the tuner: it spins
// (BusySpin) unless the tuner decides to block, when pollers outnumber the
// cores twice or the CPU is saturated, so a busy plan cannot starve the
// handlers and the other lanes (HatRPC §3.2, Fig. 5).
func RegisterBusy(s Spinner) (unregister func()) { return register(s, true) }

func register(s Spinner, busy bool) (unregister func()) {
	tune.mu.Lock()
	tune.eps[s] = busy
	if tune.stop == nil {
		tune.stop, tune.done = make(chan struct{}), make(chan struct{})
		tune.current.Store(DecideSpin)
		tune.period.Store(int64(tunePeriod))
		go tune.loop(tune.stop, tune.done)
	}
	// Set under mu: the loop sets every endpoint's spin under mu when the
	// decision changes, so a spin set after unlocking could overwrite a
	// newer decision's and stay stale until the next change.
	s.SetSpin(spinFor(int(tune.current.Load()), busy))
	tune.mu.Unlock()
	tune.kicked()
	var once sync.Once
	return func() {
		once.Do(func() {
			tune.mu.Lock()
			delete(tune.eps, s)
			var stop, done chan struct{}
			if len(tune.eps) == 0 {
				stop, done = tune.stop, tune.done
				tune.stop, tune.done = nil, nil
			}
			tune.mu.Unlock()
			tune.kicked()
			if stop != nil {
				close(stop)
				<-done
			}
		})
	}
}

// spinFor is the spin a decision gives an endpoint of each class: a busy
// lane keeps spinning until the CPU is saturated; only then does it block
// like everyone else (a short spin would only delay its own handler: the
// spinning thread keeps a core the handler needs).
func spinFor(d int, busy bool) time.Duration {
	if busy && d != DecideBlock {
		return BusySpin
	}
	return spinOf(d)
}

func spinOf(d int) time.Duration {
	switch d {
	case DecideSpin:
		return AdaptiveSpin
	case DecideShort:
		return ShortSpin
	}
	return 0
}

// Decide is the decision tree: spinning pays while the spinners leave a
// core for the handlers (waiters < cores), the process's goroutines do
// not queue for processors (runnable, a snapshot, fewer than the cores: a
// spinner in C keeps its P until sysmon takes it; a lone caller's process
// shows 0 or 1, a timer or a GC worker) and the CPU has room. With the
// cores taken, a short spin still pays while the waiters fit the cores
// and the CPU is not saturated (a steady stream of calls: the next
// message comes within the short spin, or a reply already on its way).
// Otherwise every waiter blocks (HatRPC §3.2: busy polling collapses when
// pollers outnumber cores), also on a CPU with room: waiters past the
// cores that spin short keep catching just enough answers to stay
// spinning, and large echoes on 8-16 lanes spent a quarter of their CPU
// polling (docs/performance/history.md, "128 KiB lanes: pollers past the
// cores block"). The waiters are a snapshot: with more lanes than cores
// (lanes, every lane of the process) it often catches only one or two of
// them in C while the others' callers queue for a processor (runnable),
// and a short spin then holds a core those callers need. So with lanes
// past the cores a short spin also needs runnable < cores: 128 KiB echoes
// on 8 lanes had the tuner picking short spin on 7-66 % of its ticks,
// and blocking instead made 1.4-1.6x the calls/s at 8 callers with a
// quarter less CPU a call (docs/performance/history.md, "128 KiB lanes: a
// snapshot of the waiters is not the lanes").
//
// Without the runnable count, and with waiters == cores blocking, 64
// callers of a 512 B echo (2 lanes a side, the rest through FLOCK, 2
// cores) had each process at ~0.5 load and the tuner flipping between
// spin (~60 % of ticks), short (~25 %) and block (~15 %): ~250k calls/s;
// short spins throughout gave ~330k, blocking throughout 100-120k
// (docs/performance/history.md, "The tuner at 64 callers"). Loaded
// with 8 or 64 callers a process showed 3-20 runnable goroutines a tick,
// a lone caller's 0.1 on average.
//
// A process on one core (a one-CPU cpuset, taskset) with one lane spins
// short whatever its CPU share, while no goroutine but the lane wants
// the core (the lane in C with none queued, or the lane the only one
// queued: the tuner's goroutine holds the one processor as it looks).
// Its share is the lane's own work, in the handler or the caller between
// calls, which its spin never competes with: counted as load, a 64 B
// echo's server at 75-80 % blocked its lane every other tick, 0.3-21 %
// of calls over 5 µs a repetition where spinning gave 0.3-0.5 %
// (docs/performance/history.md, "A lane process on one CPU spins
// again"). A goroutine queued besides, or a second lane, is contention
// the tree above decides on.
func Decide(s Sample) int {
	switch {
	case s.Cores == 1 && s.Lanes == 1 && s.Waiting+s.Runnable <= 1:
		return DecideShort
	case s.Waiting < s.Cores && s.Runnable < s.Cores && s.CPU < saturated:
		return DecideSpin
	case s.Waiting <= s.Cores && s.CPU < saturated && (s.Lanes <= s.Cores || s.Runnable < s.Cores):
		return DecideShort
	}
	return DecideBlock
}

// saturated is the process's CPU share (of every core) at which every
// waiter blocks, whatever the counts say.
const saturated = 0.75

// Sample is what one tick of the tuner decides by (Decide).
type Sample struct {
	Waiting  int     // lanes waiting in C at the tick
	Lanes    int     // every lane of the process
	Cores    int     // GOMAXPROCS
	Runnable int     // goroutines queued for a processor (a snapshot)
	CPU      float64 // the process's CPU time since the last tick, its lanes' polling left out, over all cores' wall time (0-1)
}

// loadOf is Sample.CPU: the process's CPU time cpu over wall on cores,
// less the time its lanes' waits polled. The polling is not load: it
// gives way to anything that wants the core (the engine yields it), and
// counted, a lane spinning alone on a process's one core read as
// saturated, so the tuner blocked its waits, and the next tick, with the
// core idle, let it spin again (docs/performance/history.md, "A lane
// process on one CPU spins again").
func loadOf(cpu, spun, wall time.Duration, cores int) float64 {
	if wall <= 0 || cores <= 0 {
		return 0
	}
	return max(float64(cpu-spun), 0) / float64(wall) / float64(cores)
}

// runnableMetric counts the goroutines waiting for a processor (Go 1.25+).
const runnableMetric = "/sched/goroutines/runnable:goroutines"

// runnableOf reads the runnableMetric sample; 0 if this runtime lacks it
// (the tree then decides as it did without the count).
func runnableOf(s metrics.Sample) int {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(min(s.Value.Uint64(), 1<<20))
}

func (t *tuner) loop(stop, done chan struct{}) {
	defer close(done)
	period := tunePeriod
	tk := time.NewTimer(period)
	defer tk.Stop()
	cores := runtime.NumCPU()
	runnable := []metrics.Sample{{Name: runnableMetric}}
	lastCPU, lastWall := cpuTime(), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.kick:
			if period > tunePeriod {
				// The next tick within tunePeriod, at the latest; the
				// load is still averaged since the last one.
				period = tunePeriod
				t.period.Store(int64(period))
				t.resets.Add(1)
				tk.Reset(period)
			}
		case <-tk.C:
			// Now, not the timer's time: on a busy core this goroutine
			// runs late, and the CPU time is read now (a tick 20 %
			// late read a lane's process on one core at 1.2x its load).
			now, c := time.Now(), cpuTime()
			t.mu.Lock()
			spun := t.spunLocked()
			waiting, lanes := t.waitingLocked(), len(t.waiters)
			t.mu.Unlock()
			load := loadOf(c-lastCPU, spun, now.Sub(lastWall), cores)
			t.load.Store(math.Float64bits(load))
			lastCPU, lastWall = c, now
			metrics.Read(runnable) // ~0.1 µs: the scheduler keeps the count
			r := runnableOf(runnable[0])
			d := Decide(Sample{Waiting: waiting, Lanes: lanes, Cores: cores, Runnable: r, CPU: load})
			t.counts[d].Add(1)
			same := int(t.current.Swap(int32(d))) == d
			period = nextPeriod(period, d, !same)
			t.period.Store(int64(period))
			tk.Reset(period)
			if same {
				continue
			}
			// One cgo crossing per endpoint, only when the decision changes.
			t.mu.Lock()
			for s, busy := range t.eps {
				s.SetSpin(spinFor(d, busy))
			}
			t.mu.Unlock()
		}
	}
}

// PollingStats is what the tuner did: decisions taken per kind (one per
// tick while adaptive lanes exist: every tunePeriod, up to tuneMaxPeriod
// apart while DecideSpin holds), the decision in force, and the lanes
// currently waiting in C.
type PollingStats struct {
	Decisions [NumDecisions]uint64
	Current   int
	Waiting   int
	Adaptive  int           // endpoints under the tuner (adaptive and busy)
	Load      float64       // the CPU share the last tick decided by (Sample.CPU)
	Polled    time.Duration // the time the waits of every lane counted so far polled (CPU the spinning took)
}

// Polling reports the tuner's state.
func Polling() PollingStats {
	var s PollingStats
	for i := range s.Decisions {
		s.Decisions[i] = tune.counts[i].Load()
	}
	s.Current = int(tune.current.Load())
	s.Load = math.Float64frombits(tune.load.Load())
	tune.mu.Lock()
	s.Waiting = tune.waitingLocked()
	s.Polled = tune.polledLocked()
	s.Adaptive = len(tune.eps)
	tune.mu.Unlock()
	return s
}

// BusySpin is the spin phase of a busy-polling lane: far longer than any
// gap between calls of a busy caller, so it does not block while calls
// come, yet an idle lane stops burning a core 20 ms after its last one.
const BusySpin = 20 * time.Millisecond

// AdaptiveSpin is the spin phase the tuner gives adaptive lanes while the
// CPU has room: a few round trips long, so a quick answer costs no wakeup.
const AdaptiveSpin = 100 * time.Microsecond
