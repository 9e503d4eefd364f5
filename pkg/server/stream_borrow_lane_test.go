//go:build cgo && linux

package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
)

// TestStreamBorrowedMsgsOnLanes is TestStreamBorrowedMsgs with the
// streams on lanes: a server stream's frames are copied out of the
// lane's reply into pooled buffers, a client stream's come through the
// server's lane goroutine.
func TestStreamBorrowedMsgsOnLanes(t *testing.T) {
	testBorrowedMsgs(t, []server.Option{server.WithRDMA(fastpathtest.Provider())}, func(t *testing.T, c *client.Conn) {
		lane, tcp := c.StreamRoutes()
		require.Equal(t, uint64(2), lane, "both streams on lanes")
		require.Zero(t, tcp)
	})
}
