package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hatrpc/hatrpc/test/testenv"
)

func monoNowNs(t *testing.T) int64 {
	var ts unix.Timespec
	require.NoError(t, unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts))
	return ts.Nano()
}

// TestMeasureLatencyStamps: asked for, a latency run stamps its calls
// over SlowEdges[0] on CLOCK_MONOTONIC, inside the run's span; not asked,
// none. (Which other calls are slow is the host's: only the one made
// slow is asserted.)
func TestMeasureLatencyStamps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	const sleep = 300 * time.Microsecond
	before := monoNowNs(t)
	res, err := measureLatency(ctx, &countingCaller{slowAt: 7, sleep: sleep}, []byte("stamp"), 2, 20, true)
	require.NoError(t, err)
	after := monoNowNs(t)
	st := res.Stamps
	require.NotNil(t, st)
	assert.LessOrEqual(t, before, st.Begin)
	assert.Less(t, st.Begin, st.End)
	assert.LessOrEqual(t, st.End, after)
	assert.Equal(t, int64(res.Elapsed), st.End-st.Begin)
	assert.Zero(t, st.Dropped)
	var slept bool
	for _, c := range st.Calls {
		assert.Greater(t, c.Len, SlowEdges[0])
		assert.LessOrEqual(t, st.Begin, c.Start)
		assert.LessOrEqual(t, c.Start+int64(c.Len), st.End)
		slept = slept || c.Len >= sleep
	}
	assert.True(t, slept, "the slept call is stamped: %+v", st.Calls)

	res, err = measureLatency(ctx, &countingCaller{slowAt: 7, sleep: sleep}, []byte("stamp"), 2, 20, false)
	require.NoError(t, err)
	assert.Nil(t, res.Stamps)
}

// A stamper keeps at most maxStamps calls and counts the rest.
func TestStamperBounded(t *testing.T) {
	s := newStamper()
	now := time.Now()
	for range maxStamps + 3 {
		s.add(now, time.Millisecond)
	}
	st := s.done(now, time.Second)
	assert.Len(t, st.Calls, maxStamps)
	assert.Equal(t, 3, st.Dropped)
}

func TestStampsRoundTrip(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeStamps(&b, "hatrpc-lanes", 64, 0, &Stamps{Begin: 100, End: 900, Calls: []StampedCall{{Start: 200, Len: 6000}, {Start: 500, Len: 21000}}}))
	require.NoError(t, writeStamps(&b, "floor-shm+800ns", 64, 1, &Stamps{Begin: 1000, End: 2000, Dropped: 4}))
	assert.Equal(t, "W hatrpc-lanes 64 0 100 900 0\nS hatrpc-lanes 64 0 200 6000\nS hatrpc-lanes 64 0 500 21000\nW floor-shm+800ns 64 1 1000 2000 4\n", b.String())
	got, err := ReadStamps(&b)
	require.NoError(t, err)
	assert.Equal(t, []StampWindow{
		{System: "hatrpc-lanes", Size: 64, Rep: 0, Stamps: Stamps{Begin: 100, End: 900, Calls: []StampedCall{{Start: 200, Len: 6000}, {Start: 500, Len: 21000}}}},
		{System: "floor-shm+800ns", Size: 64, Rep: 1, Stamps: Stamps{Begin: 1000, End: 2000, Dropped: 4}},
	}, got)

	for _, tt := range []struct{ in, err string }{
		{"S a 64 0 1 2\n", `stamps line 1: a slow call before any window: "S a 64 0 1 2"`},
		{"W a 64 0 1 2 0\nS b 64 0 1 2\n", `stamps line 2: not of the window before it: "S b 64 0 1 2"`},
		{"W a 64 0 1 2\n", `stamps line 1: 6 fields, want 7: "W a 64 0 1 2"`},
		{"W a 64 0 x 2 0\n", `stamps line 1: strconv.ParseInt: parsing "x": invalid syntax: "W a 64 0 x 2 0"`},
		{"X\n", `stamps line 1: neither W nor S: "X"`},
	} {
		_, err := ReadStamps(strings.NewReader(tt.in))
		assert.EqualError(t, err, tt.err, tt.in)
	}
}

// perfScript is a made-up `perf script --ns -F
// comm,pid,tid,cpu,time,event,trace,ip,sym` of two pollers (tasks 100 on
// CPU 0, 200 on CPU 1) and the five things a slow call can meet.
const perfScript = `         swapper     0/0     [000] 1.000000000: sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=atb next_pid=100 next_prio=120
	ffffffff82249848 __schedule
         swapper     0/0     [001] 1.000000000: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=atb next_pid=200 next_prio=120
             atb   50/200    [001] 1.000102000: sched:sched_switch: prev_comm=atb prev_pid=200 prev_prio=120 prev_state=R ==> next_comm=atb next_pid=300 next_prio=120
	ffffffff82249848 __schedule
             atb   50/300    [001] 1.000108000: sched:sched_switch: prev_comm=atb prev_pid=300 prev_prio=120 prev_state=S ==> next_comm=atb next_pid=200 next_prio=120
	ffffffff82249848 __schedule
	ffffffff8224a1b3 schedule
	ffffffff82251510 do_nanosleep
	ffffffff8223df91 do_syscall_64
	          4712a1 runtime.usleep.abi0
	          44c2d0 runtime.sysmon
	          448a10 runtime.mstart1
             atb   40/100    [000] 1.000502000: irq_vectors:local_timer_entry: vector=236
             atb   40/100    [000] 1.001302000: irq_vectors:local_timer_entry: vector=236
             atb   40/100    [000] 1.001303000: irq:softirq_entry: vec=7 [action=SCHED] ffffffff81369dd3 handle_softirqs
             atb   40/100    [000] 1.001701000: sched:sched_switch: prev_comm=atb prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
	ffffffff82249848 __schedule
	ffffffff8224a1b3 schedule
	ffffffff81624d52 do_epoll_wait
	ffffffff81625a10 __x64_sys_epoll_wait
	ffffffff8223df91 do_syscall_64
	ffffffff81000130 entry_SYSCALL_64_after_hwframe
	           f2d5a epoll_wait
	           1c2e0 hr_ep_call
         swapper     0/0     [000] 1.001707000: sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=atb next_pid=100 next_prio=120
`

const tailStamps = `W hatrpc-lanes 64 0 1000000000 1002000000 0
S hatrpc-lanes 64 0 1000100000 12000
S hatrpc-lanes 64 0 1000500000 6000
S hatrpc-lanes 64 0 1000900000 25000
S hatrpc-lanes 64 0 1001300000 15000
S hatrpc-lanes 64 0 1001700000 8000
W hatrpc-lanes 64 1 1003000000 1005000000 2
S hatrpc-lanes 64 1 1003100000 7000
`

func TestTraceReport(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, TraceReport(&b, strings.NewReader(tailStamps), strings.NewReader(perfScript)))
	assert.Equal(t, `
hatrpc-lanes 64B: 2 repetitions, 4.0 ms of calls, 6 calls over 5µs (1.50 a ms), 2 more not stamped

| inside the slow call | 5µs–10µs | 10µs–20µs | ≥ 20µs | a ms |
|---|---:|---:|---:|---:|
| nothing the guest saw | 1 | 0 | 1 | 0.50 |
| a softirq (SCHED) | 0 | 1 | 0 | 0.25 |
| a thread running at the call's start slept: atb (epoll_wait < hr_ep_call) | 1 | 0 | 0 | 0.25 |
| a timer interrupt only | 1 | 0 | 0 | 0.25 |
| another thread ran: atb (runtime.usleep.abi0 < runtime.sysmon) | 0 | 1 | 0 | 0.25 |
`, b.String())

	err := TraceReport(&b, strings.NewReader(tailStamps), strings.NewReader("not perf\n"))
	assert.EqualError(t, err, "tail trace: no events in the perf script output (want perf script --ns -F comm,pid,tid,cpu,time,event,trace,ip,sym)")
}
