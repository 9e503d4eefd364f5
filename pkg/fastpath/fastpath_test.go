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
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDecide(t *testing.T) {
	cases := []struct {
		name                     string
		waiting, cores, runnable int
		cpu                      float64
		want                     int
	}{
		{"idle", 0, 2, 0, 0.1, DecideSpin},
		{"a lone caller spinning", 1, 2, 0, 0.5, DecideSpin},
		{"the CPU busy with handlers", 1, 2, 0, 0.8, DecideBlock},
		{"spinners would take every core, the CPU idles", 2, 2, 0, 0.3, DecideShort},
		{"goroutines wait for a P", 1, 2, 3, 0.5, DecideShort},
		{"goroutines queue, the CPU idles", 0, 2, 2, 0.1, DecideShort},
		{"one goroutine runnable (a timer)", 1, 2, 1, 0.5, DecideSpin},
		{"waiters fit the cores, the CPU has room", 2, 2, 0, 0.6, DecideShort},
		{"waiters fit the cores, saturated", 2, 2, 5, 0.8, DecideBlock},
		{"waiters outnumber the cores", 3, 2, 0, 0.6, DecideBlock},
		{"many waiters, the CPU idles", 64, 2, 0, 0.1, DecideShort},
		{"many waiters, saturated", 64, 2, 10, 0.95, DecideBlock},
		{"many cores", 63, 64, 0, 0.1, DecideSpin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, DecisionName(tc.want), DecisionName(Decide(tc.waiting, tc.cores, tc.runnable, tc.cpu)))
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

func TestPlanSide(t *testing.T) {
	cases := []struct {
		name         string
		set          hints.Set
		small, large rdma.Protocol
		polling      hints.Polling
		spin         time.Duration
	}{
		{"default latency", hints.Set{}, rdma.ProtoDirectWriteIMM, rdma.ProtoDirectWriteIMM, hints.PollBusy, BusySpin},
		{"hybrid stays the engine's", hints.Set{Protocol: hints.ProtoHybrid}, rdma.ProtoHybrid, rdma.ProtoHybrid, hints.PollBusy, BusySpin},
		{"throughput over-subscribed", hints.Set{PerfGoal: hints.Throughput, Concurrency: 1 << 20},
			rdma.ProtoDirectWriteIMM, rdma.ProtoRFP, hints.PollEvent, 0},
		{"explicit eager adaptive", hints.Set{Protocol: hints.ProtoEager, Polling: hints.PollAdaptive},
			rdma.ProtoEager, rdma.ProtoEager, hints.PollAdaptive, AdaptiveSpin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := PlanSide(tc.set, 0, 1<<20)
			require.Equal(t, tc.small, s.Small)
			require.Equal(t, tc.large, s.Large)
			require.Equal(t, tc.polling, s.Polling)
			require.Equal(t, tc.spin, s.Config.SpinTime)
			require.Equal(t, rdma.PollEvent, s.Config.Polling, "lanes always build event-capable endpoints")
			require.Equal(t, tc.small, s.Protocol(s.Threshold))
			require.Equal(t, tc.large, s.Protocol(s.Threshold+1))
			require.Equal(t, 1<<20, s.Config.MaxMessage)
		})
	}
	require.Equal(t, -1, PlanSide(hints.Set{InlineThreshold: hints.InlineDisabled}, 0, 0).Config.InlineThreshold)
	// On shm the planner sends tiny messages of an under-subscribed plan by
	// RFP, for busy endpoints; lanes are event-capable and send them by
	// Direct-WriteIMM, unless the hints ask for RFP.
	shmSet := OnTransport(hints.Set{}, hints.TransportSHM)
	require.Equal(t, hints.ProtoRFP, hints.PlanFor(shmSet, 2, hints.ShmTinyMessage).Protocol)
	shm := PlanSide(shmSet, 0, 0)
	require.Equal(t, rdma.ProtoDirectWriteIMM, shm.Protocol(1))
	require.Equal(t, rdma.ProtoDirectWriteIMM, shm.Protocol(hints.ShmTinyMessage))
	require.Equal(t, rdma.ProtoDirectWriteIMM, shm.Protocol(hints.ShmTinyMessage+1))
	require.Equal(t, hints.ShmTinyMessage, shm.TinyMax)
	// A fetch of 128 B holds 56 B of response: the tiny class ends there.
	fetch128 := shmSet
	fetch128.RFPFetchSize = 128
	require.Equal(t, 128-rdma.MinFetchSize, PlanSide(fetch128, 0, 0).TinyMax)
	asked := shmSet
	asked.Protocol = hints.ProtoRFP
	kept := PlanSide(asked, 0, 0)
	require.Equal(t, rdma.ProtoRFP, kept.Protocol(hints.ShmTinyMessage), "an rfp hint is kept")
	require.Equal(t, hints.TransportTCP, OnTransport(hints.Set{Transport: hints.TransportTCP}, hints.TransportSHM).Transport)
	nic := PlanSide(OnTransport(hints.Set{}, hints.TransportRDMA), 0, 0)
	require.Equal(t, rdma.ProtoDirectWriteIMM, nic.Protocol(64))
	require.Equal(t, MaxMessage, PlanSide(hints.Set{}, 0, 0).Config.MaxMessage)
	sized := PlanSide(hints.Set{PayloadSize: 1 << 20}, 128<<10, 0)
	require.Equal(t, 128<<10+frameRoom, sized.Config.DirectSize, "the peer's messages fit the pre-known buffer")
	require.Equal(t, 1<<20+frameRoom, sized.Config.RespSize, "this side's responses fit the RFP buffer")
	require.Equal(t, bufferCap, PlanSide(hints.Set{PayloadSize: 1 << 30}, 1<<30, 0).Config.RespSize)
	require.Equal(t, 64<<10, PlanSide(hints.Set{}, 0, 0).Config.DirectSize)
	grown := PlanSide(hints.Set{}, 0, 0).Sized(200<<10, 1<<30)
	require.Equal(t, 200<<10+frameRoom, grown.Config.DirectSize)
	require.Equal(t, bufferCap, grown.Config.RespSize)
	require.Equal(t, 64<<10, PlanSide(hints.Set{}, 0, 0).Sized(10, 0).Config.DirectSize, "never shrinks below the default")
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

// waitRec is a lane that says whether it is in C.
type waitRec struct{ in atomic.Bool }

func (w *waitRec) InExchange() bool { return w.in.Load() }

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
	}, 5*time.Second, tunePeriod)
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
	case <-time.After(5 * time.Second):
		t.Fatal("go-away not seen")
	}
	require.NoError(t, b.Close())
	select {
	case <-dead:
	case <-time.After(5 * time.Second):
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
