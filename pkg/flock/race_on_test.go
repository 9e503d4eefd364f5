//go:build race

package flock

// raceEnabled: the race detector slows the many-goroutine tests by an
// order of magnitude, so they do fewer calls under it.
const raceEnabled = true
