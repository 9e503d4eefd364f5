// Package osyield gives the CPU to another OS thread without parking the
// goroutine: a spinning poller (a socket reader's, a FLOCK dispatcher's)
// lets the peer process, on the same few cores, produce what it waits
// for. runtime.Gosched alone only switches goroutines on this thread.
package osyield

import "syscall"

// Thread hands the core to another runnable OS thread, if there is one;
// when nothing else is runnable it returns at once. Raw: it never waits
// for an event, so the runtime need not be told.
func Thread() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
