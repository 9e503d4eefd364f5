//go:build !linux

package wire

import "runtime"

// schedYield: without sched_yield in package syscall, let other goroutines
// run between polls.
func schedYield() { runtime.Gosched() }
