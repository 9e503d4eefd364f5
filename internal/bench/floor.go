package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
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
type Floor struct{}

// FloorName is the floor system's name.
const FloorName = "floor-shm"

// Name is FloorName.
func (Floor) Name() string { return FloorName }

func (Floor) describe() string {
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
func (Floor) Serve(ctx context.Context, _ string) (Server, error) {
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
	s := &floorServer{path: path, m: m, done: make(chan struct{})}
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
