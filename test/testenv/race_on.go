//go:build race

package testenv

// Race is whether the race detector is built in. Tests shrink or loosen
// by it, each saying why at the use: the detector allows at most 8128 live
// goroutines, slows many-goroutine tests by an order of magnitude, drops a
// quarter of sync.Pool's Puts (so pooled values are allocated again now
// and then), and its own memory (state per goroutine and per sync object
// that it never gives back) grows with everything a test creates, so a
// test that bounds resident memory's growth does so only without it.
const Race = true
