package wire

import "syscall"

// schedYield gives the CPU to another thread between polls of a socket
// without parking the goroutine (runtime.Gosched would only switch
// goroutines on this thread).
func schedYield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
