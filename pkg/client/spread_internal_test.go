package client

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGrowSpreadRechecksLimit: a caller that saw fewer connections than
// its limit may call growSpread after a dial finished; growSpread looks
// again and starts no dial once the limit is reached.
func TestGrowSpreadRechecksLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra int
		limit int
		dial  bool
	}{
		{"below the small cap", 2, smallConns, true},
		{"at the small cap", smallConns - 1, smallConns, false},
		{"at the Conn's cap", 7, 16, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Conn{o: defaultOptions()}
			c.o.conns = 8
			extra := make([]*session, tc.extra)
			c.spread.extra.Store(&extra)
			c.growSpread(tc.limit)
			// Whether a dial started, by its done channel (set under c.mu
			// as it starts), not by dialing: the dial to no address fails
			// at once and may clear dialing before it is read.
			c.mu.Lock()
			done := c.spread.done
			c.mu.Unlock()
			started := done != nil
			if started {
				<-done
			}
			assert.Equal(t, tc.dial, started)
		})
	}
}
