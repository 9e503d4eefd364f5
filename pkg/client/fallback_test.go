//go:build cgo && linux

package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestFastPathErrAtConnectionLimit: a server at its connection limit hangs
// up on the handshake; the Conn goes on as plain Thrift, and FastPathErr
// says so instead of leaving a caller to think the server has no lanes.
func TestFastPathErrAtConnectionLimit(t *testing.T) {
	ts := serve(t, "", server.WithMaxConns(1), server.WithRDMA("auto"))
	first := dial(t, ts.addr)
	require.NoError(t, first.FastPathErr())
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	second, err := client.Dial(ctx, ts.addr)
	require.NoError(t, err) // the server accepts, then closes: Dial retries as plain Thrift
	defer second.Close()
	require.Error(t, second.FastPathErr())
	assert.Contains(t, second.FastPathErr().Error(),
		"the server closed the connection during the HatRPC handshake (at its connection limit?)")
}
