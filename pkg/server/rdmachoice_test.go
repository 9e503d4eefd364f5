//go:build cgo && linux

package server_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestWithRDMADeviceWrong: a device override the host lacks fails Serve
// and Dial, with what exists (the exact list is TestSelectWrongOverride's,
// against a fake sysfs); a misspelt one fails before any lookup.
func TestWithRDMADeviceWrong(t *testing.T) {
	t.Setenv(fastpath.EnvRDMADevice, "")
	t.Setenv(fastpath.EnvRDMAGID, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := server.New(server.WithLogger(quiet), server.WithRDMA("ibv"), server.WithRDMADevice("mlx5_9"))
	err = s.Serve(ln)
	require.ErrorIs(t, err, fastpath.ErrNoRDMAChoice)
	assert.Contains(t, err.Error(), "server: WithRDMADevice/WithRDMAGID: fastpath: no rdma device/port/gid: ")
	require.NoError(t, s.Close())

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s = server.New(server.WithLogger(quiet), server.WithRDMA("auto"), server.WithRDMAGID("v9"))
	err = s.Serve(ln)
	require.ErrorIs(t, err, fastpath.ErrBadRDMASpec)
	assert.EqualError(t, err, `server: fastpath: bad rdma override: gid "v9": want auto, v2 or a GID index`)
	require.NoError(t, s.Close())

	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	_, err = client.Dial(ctx, "127.0.0.1:1", client.WithRDMA("ibv"), client.WithRDMADevice("mlx5_9"))
	require.ErrorIs(t, err, fastpath.ErrNoRDMAChoice)
	assert.Contains(t, err.Error(), "client: WithRDMADevice/WithRDMAGID: fastpath: no rdma device/port/gid: ")
	t.Setenv(fastpath.EnvRDMADevice, "mlx5_9:x")
	_, err = client.Dial(ctx, "127.0.0.1:1", client.WithRDMA("auto"))
	require.ErrorIs(t, err, fastpath.ErrBadRDMASpec)
	assert.EqualError(t, err, `client: fastpath: bad rdma override: device "mlx5_9:x": port "x" is not 1..255`)
}
