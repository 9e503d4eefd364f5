//go:build race

package cluster

// raceEnabled: under the race detector sync.Pool drops a quarter of its
// Puts, so pooled values are allocated again now and then.
const raceEnabled = true
