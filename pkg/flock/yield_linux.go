package flock

import "syscall"

// politeYield hands the core to another runnable OS thread, if there is
// one, for a dispatcher that keeps spinning on empty rings. With client
// and server on the same few cores, runtime.Gosched alone only lets this
// process's goroutines run: the spinner kept its core from the peer
// process whose answer (or next request) it was waiting for. When
// nothing else is runnable the call returns at once, so a lone caller's
// turnaround stays a spin. Raw: it never waits for an event, so the
// runtime need not be told.
func politeYield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
