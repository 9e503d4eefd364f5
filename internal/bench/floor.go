package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Floor is the host's own 1-caller echo: two processes, one mapping of
// /dev/shm, the caller copying its payload in and spinning on a word, the
// server spinning on another and copying it back. No engine, no RPC,
// no system call on the way: what a shared-memory echo of that size
// costs on this host, and what the host alone does to its tail (issue
// 47's goals 1 and 2 ask whether the engine's and the lanes' figures
// are theirs or the host's). Latency only, like UCX.
//
// With Work the server also runs a fixed amount of arithmetic before
// each answer, about Work long when it starts: a floor call as long as
// a slower system's (FloorName+"+800ns", say, for a lane call), so the
// two tails meet the same share of the host's interruptions. The work
// is counted in loop steps, not timed: an interruption in it lengthens
// the call by all its length, as one in a real handler's code would
// (a wait on the clock would absorb it up to the pad).
type Floor struct {
	Work time.Duration
}

// FloorName is the floor system's name; a floor with Work is named
// FloorName+"+"+Work ("floor-shm+800ns"), which Lookup resolves.
const FloorName = "floor-shm"

// Name is FloorName, with its Work when it has some.
func (f Floor) Name() string {
	if f.Work > 0 {
		return FloorName + "+" + f.Work.String()
	}
	return FloorName
}

// LaneFloor is the floor with about the time a 64 B lane call adds to the
// bare floor's round trip on this project's hosts (0.66 µs in the host's
// usual phase, 0.83 in its slow one, in the 2026-12-06/07 sweeps): its
// tail is what the host alone does to a call as long as a lane call
// (issue 47 goal 2). The report prints its p50 beside the lanes'.
var LaneFloor = Floor{Work: 800 * time.Nanosecond}

// IsFloor tells whether system is the host's floor, with or without Work.
func IsFloor(system string) bool {
	_, ok := parseFloor(system)
	return ok
}

// maxFloorWork bounds a floor's Work: a floor call stays a short call.
const maxFloorWork = time.Millisecond

// parseFloor reads a floor's name: FloorName, or FloorName+"+"+a
// duration in (0, maxFloorWork].
func parseFloor(name string) (Floor, bool) {
	if name == FloorName {
		return Floor{}, true
	}
	v, ok := strings.CutPrefix(name, FloorName+"+")
	if !ok {
		return Floor{}, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > maxFloorWork {
		return Floor{}, false
	}
	return Floor{Work: d}, true
}

func (f Floor) describe() string {
	if f.Work > 0 {
		return "the host's floor with ~" + f.Work.String() + " of fixed work in the server each call: a floor call as long as a slower system's"
	}
	return "two processes' busy-poll echo through one /dev/shm mapping: no engine, no RPC"
}

func (Floor) latencyOnly() {}

// floorMax is the largest payload (the atb sweep's largest latency size
// is 512 KiB).
const floorMax = 1 << 20

// The mapping: a header page of words on lines of their own, then the
// request and the reply areas.
const (
	floorAttached = 0   // a caller is attached: the server spins
	floorReqSeq   = 64  // the caller's sequence number, its length at +8
	floorRepSeq   = 128 // the server's answer to that sequence number
	floorStop     = 192 // the server is going
	floorBell     = 256 // 32 bits: bumped (and woken) on attach and stop
	floorReq      = 4096
	floorRep      = floorReq + floorMax
	floorSize     = floorRep + floorMax
)

// ErrFloorGone is a floor caller's error when its server stopped.
var ErrFloorGone = errors.New("bench: floor-shm server stopped")

type floorMap []byte

func (m floorMap) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&m[off]))
}

func (m floorMap) bell() *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&m[floorBell]))
}

// futex(2) operations on the shared mapping's bell (not the _PRIVATE
// ones: the waker is another process).
const (
	futexWait = 0
	futexWake = 1
)

// ring bumps the bell and wakes a server asleep on it.
func (m floorMap) ring() {
	b := m.bell()
	b.Add(1)
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(b)), futexWake, 1, 0, 0, 0)
}

// sleep blocks until the bell moves on from rung (at once if it has), or a
// signal interrupts the wait: the caller looks again either way.
func (m floorMap) sleep(rung uint32) {
	b := m.bell()
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(b)), futexWait, uintptr(rung), 0, 0, 0)
}

func mapFloor(path string, create bool) (floorMap, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if create {
		if err := f.Truncate(floorSize); err != nil {
			return nil, err
		}
	}
	m, err := unix.Mmap(int(f.Fd()), 0, floorSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("bench: map %s: %w", path, err)
	}
	return m, nil
}

type floorServer struct {
	path string
	m    floorMap
	done chan struct{}
	once sync.Once
	// steps of floorWork a call (Floor.Work calibrated at Serve), 0 none
	steps int
}

// Serve maps a new file in /dev/shm (addr is ignored: the file's path is
// the address) and answers on a thread of its own, which spins while a
// caller is attached and otherwise sleeps in futex(2) on the mapping's bell
// until a caller attaches or Stop rings: an idle floor server must cost
// the sweep's other systems nothing. It napped a millisecond at a time
// once: 2,000-3,700 wake-ups a second of its threads (each nap a timer and
// a hand-off to the locked thread) while the other systems measured, on
// the CPUs where their pollers spin (docs/performance/history.md, "The
// tail traced").
func (f Floor) Serve(ctx context.Context, _ string) (Server, error) {
	var rnd [8]byte
	if _, err := unix.Getrandom(rnd[:], 0); err != nil {
		return nil, err
	}
	path := filepath.Join("/dev/shm", fmt.Sprintf("hatrpc-floor-%d-%x", os.Getpid(), rnd))
	m, err := mapFloor(path, true)
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	s := &floorServer{path: path, m: m, done: make(chan struct{}), steps: floorSteps(f.Work)}
	go s.loop()
	return s, nil
}

func (s *floorServer) loop() {
	defer close(s.done)
	// Exiting while locked ends the thread: the spinning thread is not
	// handed back to the runtime.
	runtime.LockOSThread()
	stop, attached := s.m.word(floorStop), s.m.word(floorAttached)
	req, rep := s.m.word(floorReqSeq), s.m.word(floorRepSeq)
	last := rep.Load()
	bell := s.m.bell()
	for n := 0; ; n++ {
		if seq := req.Load(); seq != last {
			size := int(s.m.word(floorReqSeq + 8).Load())
			if s.steps > 0 {
				floorSink.Store(floorWork(s.steps, seq))
			}
			copy(s.m[floorRep:floorRep+size], s.m[floorReq:floorReq+size])
			rep.Store(seq)
			last = seq
			continue
		}
		if n&0xfff != 0 {
			continue
		}
		if stop.Load() != 0 {
			return
		}
		// The bell is read before the words it guards: an attach or a
		// stop after these loads moves it, and the sleep returns at once.
		if rung := bell.Load(); attached.Load() == 0 && stop.Load() == 0 {
			s.m.sleep(rung)
		}
	}
}

// floorSink keeps floorWork's result, so the compiler cannot drop it.
var floorSink atomic.Uint64

// floorWork runs n steps of a dependent multiply-add chain: ~1 ns a step,
// no memory traffic, no call, nothing the peer or the host sees.
func floorWork(n int, x uint64) uint64 {
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// floorSteps is how many floorWork steps take about d on this host now:
// the fastest of a few timed millisecond runs (a run the host interrupted
// is slow, and would make the work too short).
func floorSteps(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	const probe = 1 << 20
	best := time.Duration(math.MaxInt64)
	for range 5 {
		t0 := time.Now()
		floorSink.Store(floorWork(probe, uint64(t0.UnixNano())))
		best = min(best, time.Since(t0))
	}
	return max(1, int(float64(probe)*float64(d)/float64(max(best, 1))))
}

func (s *floorServer) Addr() string { return s.path }

func (s *floorServer) Stop(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		s.m.word(floorStop).Store(1)
		s.m.ring()
		select {
		case <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
			return // the loop still reads the mapping: leave it mapped
		}
		err = errors.Join(unix.Munmap(s.m), os.Remove(s.path))
	})
	return err
}

type floorCaller struct {
	m   floorMap
	seq uint64
	out []byte
}

// Callers attaches one caller to the server at addr (the mapping's path).
func (Floor) Callers(_ context.Context, addr string, n int) ([]Caller, error) {
	if n != 1 {
		return nil, fmt.Errorf("bench: %s measures 1-caller latency only, not %d callers", FloorName, n)
	}
	m, err := mapFloor(addr, false)
	if err != nil {
		return nil, err
	}
	if m.word(floorAttached).Swap(1) != 0 {
		_ = unix.Munmap(m)
		return nil, fmt.Errorf("bench: %s at %s has a caller already", FloorName, addr)
	}
	m.ring()
	return []Caller{&floorCaller{m: m, seq: m.word(floorRepSeq).Load(), out: make([]byte, floorMax)}}, nil
}

func (c *floorCaller) Echo(ctx context.Context, payload []byte) ([]byte, error) {
	if len(payload) > floorMax {
		return nil, fmt.Errorf("bench: %s payload of %d bytes over its %d", FloorName, len(payload), floorMax)
	}
	copy(c.m[floorReq:], payload)
	c.m.word(floorReqSeq + 8).Store(uint64(len(payload)))
	c.seq++
	c.m.word(floorReqSeq).Store(c.seq)
	rep := c.m.word(floorRepSeq)
	for n := 1; rep.Load() != c.seq; n++ {
		if n&0xffff != 0 {
			continue
		}
		if c.m.word(floorStop).Load() != 0 {
			return nil, ErrFloorGone
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return append(c.out[:0], c.m[floorRep:floorRep+len(payload)]...), nil
}

func (c *floorCaller) Close() error {
	c.m.word(floorAttached).Store(0)
	return unix.Munmap(c.m)
}

func init() { Register(Floor{}) }
