//go:build race

package server_test

// raceEnabled: under the race detector sync.Pool drops a quarter of its
// Puts, so pooled values (requests, codecs, call values) are allocated
// again now and then.
const raceEnabled = true
