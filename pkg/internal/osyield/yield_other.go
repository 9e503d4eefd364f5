//go:build !linux

// Package osyield gives the CPU to another OS thread without parking the
// goroutine (sched_yield on Linux).
package osyield

import "runtime"

// Thread: without sched_yield in package syscall, let other goroutines
// run.
func Thread() { runtime.Gosched() }
