package bench

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"plain", "1234 (atb-tcp) S 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 0 9", 175 * clockTick, true},
		{"spaces and parens in comm", "42 (a) b (c)) R 1 2 3 4 5 6 7 8 9 10 3 4 0 0", 7 * clockTick, true},
		{"truncated", "42 (x) R 1 2 3", 0, false},
		{"no comm", "garbage", 0, false},
		{"not a number", "1 (x) S 1 2 3 4 5 6 7 8 9 10 u s", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseProcStat([]byte(tc.in))
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSampleCPUOwnProcess(t *testing.T) {
	s := sampleCPU(os.Getpid())
	require.True(t, s.serverOK, "this process's /proc stat must parse")
	assert.Positive(t, s.client)
	assert.Equal(t, time.Duration(0), sampleCPU(0).server)
}
