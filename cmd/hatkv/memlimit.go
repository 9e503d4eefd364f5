package main

import (
	"math"
	"runtime/debug"

	"github.com/hatrpc/hatrpc/pkg/server"
)

// serveMemoryLimit is the Go runtime's soft memory limit while hatkv
// serve runs: the server's memory budget and 48 MiB. The budget bounds
// what the server holds for its peers (requests, replies waiting for a
// reader), but the collector lets the heap grow to twice what was live at
// the last collection (GOGC=100) and gives freed memory back slowly: 8
// connections pipelining fb303 getCounters without reading took a 38 MB
// server to 426 MB, and to 546 MB 10 s after they left; under this limit
// 229 MB at the peak and 64 MB 10 s after (test/attack/replyflood). The
// records live in LMDB's map, outside the Go heap, so a serving heap
// near the limit is an attack or a leak, not the data.
//
// The process's bound is the budget and 64 MiB; the limit keeps 16 MiB of
// it for what the runtime does not count or lets through: C allocations
// (LMDB, the RDMA provider, cgo threads' stacks) and the limit's overshoot
// while a flood allocates faster than the collector frees. At budget +
// 64 MiB, 200 Scans batched on a shm lane (D9) took RssAnon from 7 to
// 332 MiB (+325, over the bound).
const serveMemoryLimit = server.DefaultMemoryBudget + 48<<20

// limitMemory sets serveMemoryLimit unless a limit is set already
// (GOMEMLIMIT, or a process that embeds the command) and returns what
// puts the previous limit back.
func limitMemory() (restore func()) {
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return func() {}
	}
	prev := debug.SetMemoryLimit(serveMemoryLimit)
	return func() { debug.SetMemoryLimit(prev) }
}
