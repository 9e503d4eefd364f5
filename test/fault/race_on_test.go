//go:build race

package fault_test

// raceEnabled: the race detector allows at most 8128 live goroutines per
// process, fewer than one per idle connection of TestIdleConnections.
const raceEnabled = true
