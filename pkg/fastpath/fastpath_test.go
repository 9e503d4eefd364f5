//go:build cgo && linux

package fastpath

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDecide(t *testing.T) {
	cases := []struct {
		name                            string
		waiting, lanes, cores, runnable int
		cpu                             float64
		want                            int
	}{
		{"idle", 0, 1, 2, 0, 0.1, DecideSpin},
		{"a lone caller spinning", 1, 1, 2, 0, 0.5, DecideSpin},
		{"the CPU busy with handlers", 1, 1, 2, 0, 0.8, DecideBlock},
		{"spinners would take every core, the CPU idles", 2, 2, 2, 0, 0.3, DecideShort},
		{"goroutines wait for a P", 1, 1, 2, 3, 0.5, DecideShort},
		{"goroutines queue, the CPU idles", 0, 1, 2, 2, 0.1, DecideShort},
		{"one goroutine runnable (a timer)", 1, 1, 2, 1, 0.5, DecideSpin},
		{"waiters fit the cores, the CPU has room", 2, 2, 2, 0, 0.6, DecideShort},
		{"waiters fit the cores, saturated", 2, 2, 2, 5, 0.8, DecideBlock},
		{"waiters outnumber the cores", 3, 3, 2, 0, 0.6, DecideBlock},
		{"many waiters, the CPU idles", 64, 64, 2, 0, 0.1, DecideBlock},
		{"pollers past the cores, the CPU half idle (128 KiB on 8 lanes)", 8, 8, 2, 3, 0.4, DecideBlock},
		{"one poller past the cores", 3, 3, 2, 0, 0.1, DecideBlock},
		{"many waiters, saturated", 64, 64, 2, 10, 0.95, DecideBlock},
		{"many cores", 63, 63, 64, 0, 0.1, DecideSpin},
		// Lanes past the cores, few of them in C at the tick and the
		// goroutines queued for processors (128 KiB echoes on 8 lanes: the
		// snapshot flips between 8 waiting and 1-2): spinning short holds
		// a core the queued callers need, so the waiters block.
		{"few of many lanes waiting, goroutines queue (128 KiB on 8 lanes)", 1, 8, 2, 3, 0.45, DecideBlock},
		{"cores' worth of many lanes waiting, goroutines queue", 2, 16, 2, 2, 0.5, DecideBlock},
		{"few of many lanes waiting, nothing queued", 1, 8, 2, 1, 0.45, DecideSpin},
		{"cores' worth of many lanes waiting, nothing queued", 2, 8, 2, 0, 0.45, DecideShort},
		// Lanes up to the cores, the rest by FLOCK (512 B at 64 callers):
		// short spins as before, however many goroutines queue.
		{"lanes fit the cores, goroutines queue (512 B, FLOCK past them)", 2, 2, 2, 12, 0.5, DecideShort},
		// One core (a one-CPU cpuset), one lane: its own work is the
		// load; only another goroutine wanting the core is contention.
		{"one core, its lane in C, its work the load", 1, 1, 1, 0, 0.8, DecideShort},
		{"one core, its lane queued behind the tuner", 0, 1, 1, 1, 0.95, DecideShort},
		{"one core, idle", 0, 1, 1, 0, 0.05, DecideShort},
		{"one core, a goroutine queued besides its lane in C", 1, 1, 1, 1, 0.8, DecideBlock},
		{"one core, a goroutine queued besides, the CPU has room", 1, 1, 1, 1, 0.3, DecideShort},
		{"one core, two goroutines queued", 0, 1, 1, 2, 0.8, DecideBlock},
		{"one core, two lanes", 1, 2, 1, 0, 0.8, DecideBlock},
		{"one core, two lanes, the CPU has room", 1, 2, 1, 0, 0.3, DecideShort},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, DecisionName(tc.want), DecisionName(Decide(Sample{Waiting: tc.waiting, Lanes: tc.lanes, Cores: tc.cores, Runnable: tc.runnable, CPU: tc.cpu})))
		})
	}
}

// TestRunnableMetric: the runtime keeps the count the tuner reads, and it
// sees goroutines queued for a processor. A runtime without it would
// silently give the tree 0 (runnableOf), so a Go upgrade that renames it
// fails here instead.
func TestRunnableMetric(t *testing.T) {
	s := []metrics.Sample{{Name: runnableMetric}}
	metrics.Read(s)
	require.Equal(t, metrics.KindUint64, s[0].Value.Kind(), "%s not served by this runtime", runnableMetric)

	// Goroutines that spin keep every P busy; the ones queued behind them
	// are runnable until released.
	procs := runtime.GOMAXPROCS(0)
	release := make(chan struct{})
	var started, done sync.WaitGroup
	for range 4 * procs {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			for {
				select {
				case <-release:
					return
				default:
				}
			}
		}()
	}
	started.Wait()
	seen := 0
	for range 1000 {
		metrics.Read(s)
		if seen = runnableOf(s[0]); seen > 0 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	done.Wait()
	require.Positive(t, seen, "no runnable goroutine seen with %d spinners on %d Ps", 4*procs, procs)
}

func TestCheckPair(t *testing.T) {
	cases := []struct {
		lane, client hints.Transport
		server       hints.Set
		err          string
	}{
		{hints.TransportSHM, hints.TransportAuto, hints.Set{}, ""},
		{hints.TransportSHM, hints.TransportSHM, hints.Set{Transport: hints.TransportSHM}, ""},
		{hints.TransportRDMA, hints.TransportAuto, hints.Set{Protocol: hints.ProtoRFP}, ""},
		{hints.TransportSHM, hints.TransportAuto, hints.Set{Transport: hints.TransportTCP},
			"function S:f: the client asks for a shm lane but the server pins the function to transport=tcp"},
		{hints.TransportSHM, hints.TransportAuto, hints.Set{Transport: hints.TransportRDMA},
			"function S:f: the client asks for a shm lane but the server pins the function to transport=rdma"},
		{hints.TransportSHM, hints.TransportTCP, hints.Set{},
			"function S:f: the client pins the function to transport=tcp, yet asked for a lane"},
		{hints.TransportSHM, hints.TransportRDMA, hints.Set{},
			"function S:f: the client pins transport=rdma but the lane is shm"},
	}
	for _, tc := range cases {
		err := CheckPair("S:f", tc.lane, tc.client, tc.server)
		if tc.err == "" {
			require.NoError(t, err)
			continue
		}
		require.EqualError(t, err, tc.err)
		require.ErrorIs(t, err, ErrPlanConflict)
	}
}

// planSide is the client lane side of set on transport tr, the peer
// declaring peer bytes: what the client's lane pool builds.
func planSide(set hints.Set, tr hints.Transport, peer, maxMsg int) Side {
	t := hints.TableFor(set, hints.Env{Side: hints.SideClient, Transport: tr, Cores: runtime.NumCPU(), PeerPayload: peer})
	return PlanSide(&t, maxMsg)
}

func TestPlanSide(t *testing.T) {
	eager := hints.DefaultEagerThreshold
	cases := []struct {
		name         string
		set          hints.Set
		small, large rdma.Protocol
		polling      hints.Polling
		spin         time.Duration
	}{
		{"default latency", hints.Set{}, rdma.ProtoDirectWriteIMM, rdma.ProtoDirectWriteIMM, hints.PollBusy, BusySpin},
		{"hybrid is two rows", hints.Set{Protocol: hints.ProtoHybrid}, rdma.ProtoEager, rdma.ProtoWriteRNDV, hints.PollBusy, BusySpin},
		{"throughput over-subscribed", hints.Set{PerfGoal: hints.Throughput, Concurrency: 1 << 20},
			rdma.ProtoDirectWriteIMM, rdma.ProtoRFP, hints.PollEvent, 0},
		{"explicit eager adaptive", hints.Set{Protocol: hints.ProtoEager, Polling: hints.PollAdaptive},
			rdma.ProtoEager, rdma.ProtoEager, hints.PollAdaptive, AdaptiveSpin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := planSide(tc.set, hints.TransportRDMA, 0, 1<<20)
			require.Equal(t, tc.polling, s.Polling)
			require.Equal(t, tc.spin, s.Config.SpinTime)
			require.Equal(t, rdma.PollEvent, s.Config.Polling, "lanes always build event-capable endpoints")
			require.Equal(t, tc.small, s.Protocol(1))
			require.Equal(t, tc.small, s.Protocol(eager-1))
			require.Equal(t, tc.small, s.Protocol(eager))
			require.Equal(t, tc.large, s.Protocol(eager+1))
			require.Equal(t, tc.large, s.Protocol(1<<30))
			require.Equal(t, 1<<20, s.Config.MaxMessage)
		})
	}
	require.Equal(t, -1, planSide(hints.Set{InlineThreshold: hints.InlineDisabled}, hints.TransportSHM, 0, 0).Config.InlineThreshold)
	// A bare endpoint busy-polling memory gets tiny shm messages by RFP;
	// lanes are event-capable and send them by Direct-WriteIMM, unless the
	// hints ask for RFP: the table says which.
	shmSet := hints.Set{}
	bare := hints.TableFor(shmSet, hints.Env{Transport: hints.TransportSHM, Cores: 2, PeerPollsMemory: true})
	require.Equal(t, hints.ProtoRFP, bare.LaneRowFor(hints.ShmTinyMessage).Protocol)
	shm := planSide(shmSet, hints.TransportSHM, 0, 0)
	for _, n := range []int{1, 64, hints.ShmTinyMessage, hints.ShmTinyMessage + 1} {
		require.Equal(t, rdma.ProtoDirectWriteIMM, shm.Protocol(n), n)
	}
	asked := shmSet
	asked.Protocol = hints.ProtoRFP
	kept := planSide(asked, hints.TransportSHM, 0, 0)
	require.Equal(t, rdma.ProtoRFP, kept.Protocol(hints.ShmTinyMessage), "an rfp hint is kept")
	require.Equal(t, hints.TransportTCP, OnTransport(hints.Set{Transport: hints.TransportTCP}, hints.TransportSHM).Transport)
	nic := planSide(hints.Set{}, hints.TransportRDMA, 0, 0)
	require.Equal(t, rdma.ProtoDirectWriteIMM, nic.Protocol(64))
	require.Equal(t, MaxMessage, nic.Config.MaxMessage)
	sized := planSide(hints.Set{PayloadSize: 1 << 20}, hints.TransportSHM, 128<<10, 0)
	require.Equal(t, 128<<10+hints.FrameRoom, sized.Config.DirectSize, "the peer's messages fit the pre-known buffer")
	require.Equal(t, 1<<20+hints.FrameRoom, sized.Config.RespSize, "this side's responses fit the RFP buffer")
	require.Equal(t, hints.BufferCap, planSide(hints.Set{PayloadSize: 1 << 30}, hints.TransportSHM, 1<<30, 0).Config.RespSize)
	require.Equal(t, 64<<10, nic.Config.DirectSize)
	grown := nic.Sized(200<<10, 1<<30)
	require.Equal(t, 200<<10+hints.FrameRoom, grown.Config.DirectSize)
	require.Equal(t, hints.BufferCap, grown.Config.RespSize)
	require.Equal(t, 64<<10, nic.Sized(10, 0).Config.DirectSize, "never shrinks below the default")
	// Not a fast-path table: every size by hybrid, safe for any size.
	tcp := hints.TableFor(hints.Set{}, hints.Env{Transport: hints.TransportTCP})
	tcpSide := PlanSide(&tcp, 0)
	require.Equal(t, rdma.ProtoHybrid, tcpSide.Protocol(64))
}

// TestPlanSideIsTheTable: for a sample of hint sets on both fast paths and
// both sides, the lane's protocol at every row boundary (b-1, b, b+1) is
// the table's row, as hatgen explain prints it.
func TestPlanSideIsTheTable(t *testing.T) {
	sets := []hints.Set{
		{}, {PerfGoal: hints.Throughput, Concurrency: 64}, {PerfGoal: hints.ResUtil, Concurrency: 2},
		{Protocol: hints.ProtoHybrid, EagerThreshold: 8192}, {Protocol: hints.ProtoRFP, RFPFetchSize: 128},
		{PerfGoal: hints.Throughput, Concurrency: 3, PayloadSize: 1 << 20}, {QPSharing: hints.SwitchOn, PayloadSize: 64},
		{InlineThreshold: hints.InlineDisabled, PerfGoal: hints.Throughput, Concurrency: 9},
		{InlineThreshold: 512, Polling: hints.PollAdaptive},
	}
	for _, tr := range []hints.Transport{hints.TransportSHM, hints.TransportRDMA} {
		for _, side := range []hints.Side{hints.SideClient, hints.SideServer} {
			for _, set := range sets {
				tb := hints.TableFor(set, hints.Env{Side: side, Transport: tr, Cores: 2})
				sd := PlanSide(&tb, 0)
				for _, r := range tb.Lane {
					for _, n := range []int{r.Min - 1, r.Min, r.Min + 1, r.Max - 1, r.Max, r.Max + 1} {
						if n < 0 || n > 1<<40 {
							continue
						}
						want := EngineProtocol(tb.LaneRowFor(n).Protocol)
						require.Equal(t, want, sd.Protocol(n), "%s %s %+v at %d", tr, side, set, n)
						require.NotEqual(t, rdma.ProtoHybrid, want, "a lane row is concrete")
					}
				}
			}
		}
	}
}

// spinRec records the spins it is given; first is the one registration
// set (the tuner changes spins only under the lock registration holds).
type spinRec struct {
	last, first atomic.Int64
	set         atomic.Bool
}

func (s *spinRec) SetSpin(d time.Duration) {
	if s.set.CompareAndSwap(false, true) {
		s.first.Store(int64(d))
	}
	s.last.Store(int64(d))
}

// waitRec is a lane that says whether it is in C, and reports spun (if
// set) as its waits' polling.
type waitRec struct {
	in   atomic.Bool
	spun func() time.Duration
}

func (w *waitRec) InExchange() bool { return w.in.Load() }

func (w *waitRec) Spun() time.Duration {
	if w.spun == nil {
		return 0
	}
	return w.spun()
}

func TestTunerLifecycle(t *testing.T) {
	// A fresh tuner starts at DecideSpin, and registration applies it
	// whatever the tuner decides a tick later (on a loaded machine the
	// first tick may come before the next line), so each class is checked
	// on a tuner of its own.
	first := &spinRec{}
	RegisterAdaptive(first)()
	require.Equal(t, int64(AdaptiveSpin), first.first.Load(), "fresh tuner: spin")
	first = &spinRec{}
	RegisterBusy(first)()
	require.Equal(t, int64(BusySpin), first.first.Load(), "fresh tuner: a busy lane spins without end")
	require.Zero(t, Polling().Adaptive, "the tuner stopped with its last endpoint")

	a, b := &spinRec{}, &spinRec{}
	ua := RegisterAdaptive(a)
	ub := RegisterBusy(b)
	require.True(t, a.set.Load() && b.set.Load(), "registration sets the spin")
	require.Equal(t, BusySpin, spinFor(DecideShort, true), "a busy lane spins on while the CPU has room")
	require.Equal(t, ShortSpin, spinFor(DecideShort, false))
	require.Equal(t, time.Duration(0), spinFor(DecideBlock, true))
	// Waiting counts the registered lanes in C at the time of asking, of
	// any polling kind, and none once unregistered.
	w1, w2 := &waitRec{}, &waitRec{}
	uw1, uw2 := CountWaits(w1), CountWaits(w2)
	require.Equal(t, 0, Polling().Waiting)
	w1.in.Store(true)
	require.Equal(t, 1, Polling().Waiting)
	w2.in.Store(true)
	require.Equal(t, 2, Polling().Waiting)
	w1.in.Store(false)
	require.Equal(t, 1, Polling().Waiting)
	uw2()
	require.Equal(t, 0, Polling().Waiting, "an unregistered lane is not counted")
	uw1()
	require.Eventually(t, func() bool {
		s := Polling()
		return s.Decisions[DecideSpin]+s.Decisions[DecideShort]+s.Decisions[DecideBlock] > 0
	}, testenv.HangGuard(5*time.Second), tunePeriod)
	require.Equal(t, 2, Polling().Adaptive)
	ua()
	ua() // twice is harmless
	ub()
	require.Equal(t, 0, Polling().Adaptive) // and the tuner goroutine ended (goleak)
}

func TestLink(t *testing.T) {
	a, b := net.Pipe()
	goaway := make(chan struct{}, 1)
	dead := make(chan struct{}, 1)
	l := Watch(a, func() { goaway <- struct{}{} }, func() { dead <- struct{}{} })
	peer := &Link{nc: b}
	go func() { _ = peer.SendGoAway() }()
	select {
	case <-goaway:
	case <-time.After(testenv.HangGuard(5 * time.Second)):
		t.Fatal("go-away not seen")
	}
	require.NoError(t, b.Close())
	select {
	case <-dead:
	case <-time.After(testenv.HangGuard(5 * time.Second)):
		t.Fatal("peer close not seen")
	}
	l.Close()
}

func TestDeviceShared(t *testing.T) {
	d1, err := Acquire(rdma.ProviderSHM)
	require.NoError(t, err)
	d2, err := Acquire(rdma.ProviderSHM)
	require.NoError(t, err)
	require.Same(t, d1.Device, d2.Device, "one device per process and provider")
	require.Equal(t, hints.TransportSHM, d1.Transport())
	d1.Release()
	d1.Release() // a second release of the same reference is ignored
	pd, err := d2.AllocPD()
	require.NoError(t, err, "the device outlives one of its two references")
	require.NoError(t, pd.Close())
	d2.Release()
	_, err = Acquire("nonsense")
	require.ErrorIs(t, err, ErrUnavailable)
	require.NotEmpty(t, HostID())
}

func TestNUMA(t *testing.T) {
	require.Equal(t, -1, PlanNUMA(hints.NUMANone, nil).Node)
	// A fake two-node machine.
	root := t.TempDir()
	for node, cpus := range []string{"0-1\n", "2,3\n"} {
		dir := filepath.Join(root, fmt.Sprintf("node%d", node))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cpulist"), []byte(cpus), 0o644))
	}
	old := nodeRoot
	nodeRoot = root
	defer func() { nodeRoot = old }()
	require.Equal(t, []int{0, 1}, Nodes())
	p := PlanNUMA(hints.NUMANode(1), nil)
	require.Equal(t, NUMAPlan{Node: 1, CPUs: []int{2, 3}}, p)
	require.Equal(t, "numa=nic ignored: the device reports no NUMA node", PlanNUMA(hints.NUMANIC, nil).Note)
	require.Equal(t, "numa=7 ignored: node 7 has no CPUs here", PlanNUMA(hints.NUMANode(7), nil).Note)
	// One node: a no-op with a note.
	nodeRoot = filepath.Join(root, "node0")
	require.Contains(t, PlanNUMA(hints.NUMANode(0), nil).Note, "ignored: this machine has 0 NUMA node(s)")
	// Binding to this machine's first node's CPUs works and restores.
	nodeRoot = old
	if nodes := Nodes(); len(nodes) > 0 {
		cpus, err := nodeCPUs(nodes[0])
		require.NoError(t, err)
		restore, err := NUMAPlan{Node: nodes[0], CPUs: cpus}.Bind()
		require.NoError(t, err)
		restore()
	}
}

// A lane's buffers and slots never pass its largest message, which the
// engine refuses (rdma: invalid argument): under a message limit below
// the buffers' 64 KiB minimum every lane failed and its calls went over
// TCP. Within the limit they are as planned.
func TestPlanSideWithinMaxMessage(t *testing.T) {
	sets := []hints.Set{{}, {Protocol: hints.ProtoHybrid, EagerThreshold: 64 << 10}, {PayloadSize: 1 << 20}}
	for _, maxMsg := range []int{4<<10 + 20, 8<<10 + 20, 64<<10 + 20, 4 << 20} {
		for _, set := range sets {
			t.Run(fmt.Sprint(maxMsg, "/", set.EagerThreshold, "/", set.PayloadSize), func(t *testing.T) {
				s := planSide(set, hints.TransportSHM, 0, maxMsg)
				want := planSide(set, hints.TransportSHM, 0, 0).Config
				cfg := s.Config
				require.Equal(t, maxMsg, cfg.MaxMessage)
				require.Equal(t, min(want.DirectSize, maxMsg), cfg.DirectSize)
				require.Equal(t, min(want.RespSize, maxMsg), cfg.RespSize)
				require.Equal(t, min(want.SlotSize, maxMsg), cfg.SlotSize)
				require.Equal(t, min(want.EagerThreshold, maxMsg), cfg.EagerThreshold)
				sized := s.Sized(1<<20, 1<<20).Config
				require.Equal(t, min(hints.BufferFor(1<<20), maxMsg), sized.DirectSize)
				require.Equal(t, min(hints.BufferFor(1<<20), maxMsg), sized.RespSize)
			})
		}
	}
}
