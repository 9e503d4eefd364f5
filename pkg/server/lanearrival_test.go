//go:build cgo && linux

package server

import (
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/stretchr/testify/require"
)

// TestEngineEpoch: an engine timestamp (rdma.MonotonicNow, what a lane's
// request arrival is stamped with) maps onto the server's clock
// (time.Since(epoch)) within the calibration's own error: it falls inside
// a bracket of two server clock readings, widened by that error only.
func TestEngineEpoch(t *testing.T) {
	cal := engineEpoch()
	require.Positive(t, cal.err)
	for i := 0; i < 100; i++ {
		g1 := time.Since(epoch)
		c := rdma.MonotonicNow()
		g2 := time.Since(epoch)
		mapped := c - cal.off
		require.GreaterOrEqual(t, mapped, int64(g1)-cal.err, "reading %d: %d before its bracket [%d, %d] (±%d)", i, mapped, g1, g2, cal.err)
		require.LessOrEqual(t, mapped, int64(g2)+cal.err, "reading %d: %d after its bracket [%d, %d] (±%d)", i, mapped, g1, g2, cal.err)
	}
}
