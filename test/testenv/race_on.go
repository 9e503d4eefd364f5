//go:build race

package testenv

// Race is whether the race detector is built in: its own memory (state
// per goroutine and per sync object that it never gives back) grows with
// everything a test creates, so a test that bounds resident memory's
// growth does so only without it.
const Race = true
