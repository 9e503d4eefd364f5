package testutil

import "runtime"

// AllocsPerCall is testing.AllocsPerRun without its rounding down to an
// integer, which hides a pool's occasional allocation (and a block
// carved into many calls' values).
func AllocsPerCall(n int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // as AllocsPerRun: no other goroutine's in parallel
	f()                                             // warm: pools, lanes, caches
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}
