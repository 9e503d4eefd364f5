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
// streams on lanes: a server stream's large borrowed messages are read
// in place in the lane's reply (its small ones, its owned ones and those
// of the reply that ends it are copied out into pooled buffers), a
// client stream's come through the server's lane goroutine.
func TestStreamBorrowedMsgsOnLanes(t *testing.T) {
	testBorrowedMsgs(t, []server.Option{server.WithRDMA(fastpathtest.Provider())}, true, func(t *testing.T, c *client.Conn) {
		lane, tcp := c.StreamRoutes()
		require.Equal(t, uint64(2), lane, "both streams on lanes")
		require.Zero(t, tcp)
	})
}
