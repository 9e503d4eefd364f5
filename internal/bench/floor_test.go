package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestFloorEcho(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := Floor{}.Serve(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop(ctx)) }()
	require.FileExists(t, srv.Addr())

	callers, err := Floor{}.Callers(ctx, srv.Addr(), 1)
	require.NoError(t, err)
	c := callers[0]
	for _, size := range []int{0, 1, 64, 4096, 512 << 10, floorMax} {
		p := bytes.Repeat([]byte{byte(size)}, size)
		for range 3 { // the sequence numbers move on
			got, err := c.Echo(ctx, p)
			require.NoError(t, err, "%d bytes", size)
			require.Equal(t, p, got, "%d bytes", size)
		}
	}
	_, err = c.Echo(ctx, make([]byte, floorMax+1))
	assert.EqualError(t, err, "bench: floor-shm payload of 1048577 bytes over its 1048576")

	_, err = Floor{}.Callers(ctx, srv.Addr(), 1)
	assert.EqualError(t, err, "bench: floor-shm at "+srv.Addr()+" has a caller already")
	require.NoError(t, c.Close())
	again, err := Floor{}.Callers(ctx, srv.Addr(), 1)
	require.NoError(t, err, "attachable once the caller left")
	got, err := again[0].Echo(ctx, []byte("after"))
	require.NoError(t, err)
	assert.Equal(t, "after", string(got))
	require.NoError(t, again[0].Close())
}

func TestFloorErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Floor{}.Callers(ctx, "/dev/shm/hatrpc-floor-none", 2)
	assert.EqualError(t, err, "bench: floor-shm measures 1-caller latency only, not 2 callers")
	_, err = Floor{}.Callers(ctx, "/dev/shm/hatrpc-floor-none", 1)
	assert.ErrorIs(t, err, os.ErrNotExist)

	// A caller whose server stops gets ErrFloorGone, not a spin forever;
	// the server's file is gone.
	srv, err := Floor{}.Serve(ctx, "")
	require.NoError(t, err)
	callers, err := Floor{}.Callers(ctx, srv.Addr(), 1)
	require.NoError(t, err)
	require.NoError(t, srv.Stop(ctx))
	assert.NoFileExists(t, srv.Addr())
	_, err = callers[0].Echo(ctx, []byte("x"))
	assert.ErrorIs(t, err, ErrFloorGone)
	require.NoError(t, callers[0].Close())
	require.NoError(t, srv.Stop(ctx), "a second Stop")

	// A caller's context ends its wait for a server that never answers
	// (a mapping nobody serves).
	path := t.TempDir() + "/floor"
	m, err := mapFloor(path, true)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(m) })
	callers, err = Floor{}.Callers(ctx, path, 1)
	require.NoError(t, err)
	done, stop := context.WithCancel(ctx)
	stop()
	_, err = callers[0].Echo(done, []byte("x"))
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, callers[0].Close())
	assert.Zero(t, m.word(floorAttached).Load(), "Close detaches")
}

// A floor with work is named by it, found by that name in this process
// and the server's (Lookup), and still echoes; names that are no floor's
// are unknown systems.
func TestFloorWork(t *testing.T) {
	tests := []struct {
		name string
		want Floor
		ok   bool
	}{
		{"floor-shm", Floor{}, true},
		{"floor-shm+800ns", Floor{Work: 800 * time.Nanosecond}, true},
		{"floor-shm+1.5µs", Floor{Work: 1500 * time.Nanosecond}, true},
		{"floor-shm+1ms", Floor{Work: time.Millisecond}, true},
		{"floor-shm+1.001ms", Floor{}, false},
		{"floor-shm+0s", Floor{}, false},
		{"floor-shm+-1µs", Floor{}, false},
		{"floor-shm+", Floor{}, false},
		{"floor-shm+x", Floor{}, false},
		{"floor-shmx", Floor{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := parseFloor(tt.name)
			require.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, f)
			assert.Equal(t, tt.ok, IsFloor(tt.name))
			sys, err := Lookup(tt.name)
			if !tt.ok {
				assert.ErrorIs(t, err, ErrUnknownSystem)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, sys)
			assert.True(t, LatencyOnly(tt.name))
			assert.Equal(t, "memory", providerOf(tt.name))
			assert.NotContains(t, TCPSystems(), tt.name)
		})
	}
	assert.Equal(t, "floor-shm+800ns", Floor{Work: 800 * time.Nanosecond}.Name())
	assert.Equal(t, "floor-shm+1.5µs", Floor{Work: 1500 * time.Nanosecond}.Name())
	assert.Contains(t, systemLabel("floor-shm+800ns", 64, 1), "floor-shm+800ns (the host's floor with ~800ns of fixed work")

	// Steps grow with the work asked for (the count itself is the host's).
	assert.Zero(t, floorSteps(0))
	short, long := floorSteps(time.Microsecond), floorSteps(100*time.Microsecond)
	assert.Positive(t, short)
	assert.Greater(t, long, short)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := Floor{Work: 2 * time.Microsecond}
	srv, err := f.Serve(ctx, "")
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop(ctx)) }()
	assert.Positive(t, srv.(*floorServer).steps)
	callers, err := f.Callers(ctx, srv.Addr(), 1)
	require.NoError(t, err)
	for _, size := range []int{0, 64, 4096} {
		p := bytes.Repeat([]byte{byte(size + 1)}, size)
		got, err := callers[0].Echo(ctx, p)
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	require.NoError(t, callers[0].Close())
}

func TestFloorDescribed(t *testing.T) {
	proto, poll := Describe(FloorName, 64, 1)
	assert.Equal(t, []string{"spin", "busy"}, []string{proto, poll})
	assert.True(t, LatencyOnly(FloorName))
	assert.Equal(t, "memory", providerOf(FloorName))
	assert.Contains(t, systemLabel(FloorName, 64, 1), "floor-shm (two processes' busy-poll echo")
}

// An idle floor server sleeps in futex(2) on its bell, with no wake-ups
// of its own (its napping thread once woke ~2,700 times a second on the
// CPUs where the sweep's other systems spin), and an attach or a Stop
// wakes it.
func TestFloorIdleSleeps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	for _, wake := range []string{"attach", "stop"} {
		t.Run(wake, func(t *testing.T) {
			srv, err := Floor{}.Serve(ctx, "")
			require.NoError(t, err)
			s := srv.(*floorServer)
			defer func() { assert.NoError(t, srv.Stop(ctx)) }()

			tid := floorSleeper(ctx, t, s.m)
			before := voluntarySwitches(t, tid)
			time.Sleep(100 * time.Millisecond) // 100 naps' worth
			assert.Equal(t, before, voluntarySwitches(t, tid), "the idle server's thread woke")

			if wake == "stop" {
				require.NoError(t, srv.Stop(ctx))
				assert.NoFileExists(t, srv.Addr())
				return
			}
			callers, err := Floor{}.Callers(ctx, srv.Addr(), 1)
			require.NoError(t, err)
			got, err := callers[0].Echo(ctx, []byte("awake"))
			require.NoError(t, err)
			assert.Equal(t, "awake", string(got))
			require.NoError(t, callers[0].Close())
		})
	}
}

// floorSleeper waits (until ctx ends) for a thread of this process to
// block in futex(2) on m's bell and returns its id.
func floorSleeper(ctx context.Context, t *testing.T, m floorMap) string {
	t.Helper()
	bell := fmt.Sprintf("202 0x%x ", uintptr(unsafe.Pointer(m.bell())))
	for ctx.Err() == nil {
		tasks, err := os.ReadDir("/proc/self/task")
		require.NoError(t, err)
		for _, task := range tasks {
			sc, err := os.ReadFile("/proc/self/task/" + task.Name() + "/syscall")
			if err == nil && strings.HasPrefix(string(sc), bell) {
				return task.Name()
			}
		}
		time.Sleep(time.Millisecond)
	}
	require.FailNow(t, "no thread sleeps on the floor's bell")
	return ""
}

func voluntarySwitches(t *testing.T, tid string) string {
	t.Helper()
	st, err := os.ReadFile("/proc/self/task/" + tid + "/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "voluntary_ctxt_switches:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "voluntary_ctxt_switches:"))
		}
	}
	require.FailNow(t, "no voluntary_ctxt_switches in /proc/self/task/"+tid+"/status")
	return ""
}
