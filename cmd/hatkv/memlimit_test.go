package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLimitMemory: serve runs under the budget's soft limit, leaves a
// limit already set (GOMEMLIMIT) alone, and puts the previous one back.
func TestLimitMemory(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)

	restore := limitMemory()
	assert.Equal(t, int64(serveMemoryLimit), debug.SetMemoryLimit(-1))
	assert.Equal(t, int64(304<<20), int64(serveMemoryLimit), "the default budget and 48 MiB")
	inner := limitMemory() // a second serve in the process: left as is
	inner()
	assert.Equal(t, int64(serveMemoryLimit), debug.SetMemoryLimit(-1))
	restore()
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))

	debug.SetMemoryLimit(1 << 30) // as GOMEMLIMIT=1GiB
	limitMemory()()
	assert.Equal(t, int64(1<<30), debug.SetMemoryLimit(-1))
}
