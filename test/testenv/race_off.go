//go:build !race

package testenv

// Race is whether the race detector is built in (race_on.go).
const Race = false
