//go:build cgo && linux

package hatrpctest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// TestSHMLanes: over the in-memory Listener a server WithRDMA("shm") moves
// the client's calls onto shm lanes, bootstrapped through further dials of
// the Listener; without WithRDMA every call stays on the pipe.
func TestSHMLanes(t *testing.T) {
	c := dial(t, serve(t, server.WithRDMA("shm")))
	ec := echo.NewEchoClient(c)
	for range 3 {
		got, err := ec.Echo(tctx(t), "lane")
		require.NoError(t, err)
		assert.Equal(t, "lane", got)
	}
	st := c.LaneStats()
	require.Len(t, st, 1)
	assert.Equal(t, "shm", st[0].Transport)
	require.NoError(t, c.FastPathErr())

	c = dial(t, serve(t))
	_, err := echo.NewEchoClient(c).Echo(tctx(t), "pipe")
	require.NoError(t, err)
	assert.Empty(t, c.LaneStats())
}
