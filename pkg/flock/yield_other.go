//go:build !linux

package flock

// politeYield: only Linux has it (yield_linux.go); elsewhere the spin
// yields to this process's goroutines only.
func politeYield() {}
