package rdma

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// threadCPU is the calling thread's CPU time.
func threadCPU(t *testing.T) time.Duration {
	var ru unix.Rusage
	require.NoError(t, unix.Getrusage(unix.RUSAGE_THREAD, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestEndpointSpun: an endpoint counts the time its waits polled (what
// the tuner leaves out of the process's load): a call that waits on a
// slow handler adds about the CPU time its thread spent in it when it
// polls throughout (busy, or an event wait spinning longer than the
// handler), next to nothing when it blocks at once; never more than the
// wait took; 0 once closed.
func TestEndpointSpun(t *testing.T) {
	const hold = 30 * time.Millisecond
	for _, tc := range []struct {
		name  string
		poll  Polling
		spin  time.Duration
		polls bool
	}{
		{"busy", PollBusy, 0, true},
		{"event spinning", PollEvent, time.Minute, true},
		{"event blocking", PollEvent, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testEPConfig(tc.poll)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			cli.SetSpin(tc.spin)
			release := make(chan struct{})
			stop := serveCalls(t, srv, func(req []byte) ([]byte, Protocol) {
				<-release
				return req, ProtoEager
			})
			defer stop()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			// A first call, answered at once, warms the pair up.
			close(release)
			_, err := cli.Call(ctx, ProtoEager, []byte("warm"))
			require.NoError(t, err)
			release = make(chan struct{})
			timer := time.AfterFunc(hold, func() { close(release) })
			defer timer.Stop()

			// The call's C runs on this thread: its CPU time is the
			// polling's, and a little more.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			before, cpu, start := cli.Spun(), threadCPU(t), time.Now()
			_, err = cli.Call(ctx, ProtoEager, []byte("held"))
			took, cpu, spun := time.Since(start), threadCPU(t)-cpu, cli.Spun()-before
			require.NoError(t, err)
			require.GreaterOrEqual(t, took, hold)
			t.Logf("spun %v, thread CPU %v, of %v", spun, cpu, took)
			assert.LessOrEqual(t, spun, took, "no more than the wait took")
			if tc.polls {
				// rusage counts in ticks of the kernel's clock: a
				// millisecond's slack each way. On a quiet host the
				// count is within a few % of the thread's CPU; beside
				// stress-ng --cpu 4 it was 0.45-0.68 of it (segments
				// with the thread preempted are credited by count, at
				// a cost the loaded caches make higher).
				assert.GreaterOrEqual(t, spun, cpu/4-time.Millisecond, "about the CPU the thread spent")
				assert.LessOrEqual(t, spun, 2*cpu+time.Millisecond, "about the CPU the thread spent")
				assert.Positive(t, spun)
			} else {
				assert.Less(t, spun, time.Millisecond, "a blocked wait polls only until it sleeps")
			}
		})
	}
	e, err := NewRPCEndpoint(newPD(t, openTest(t)), testEPConfig(PollEvent))
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.Zero(t, e.Spun(), "closed (its C memory is gone: not read)")
}
