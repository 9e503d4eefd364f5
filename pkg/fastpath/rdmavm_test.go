//go:build cgo && linux

package fastpath

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestTwoDevicesIBVOnly runs in the Soft-RoCE guest with two rxe devices
// (test/rxe/twodev.sh, which sets HATRPC_RXE_DEVICES): a server on each
// address opens the device whose netdev carries it, with that address's
// RoCE v2 GID; a client to each address leaves from a GID that routes;
// a wrong override fails listing both devices.
func TestTwoDevicesIBVOnly(t *testing.T) {
	ctx, pairs := vmTable(t, "HATRPC_RXE_DEVICES", "two rxe devices (test/rxe/twodev.sh in the guest)", "address")
	for _, pair := range pairs {
		dev, addr := pair[0], pair[1]
		ip := net.ParseIP(addr)
		for _, side := range []string{"server", "client"} {
			tg := Target{Local: ip}
			if side == "client" {
				tg = Target{Remote: net.JoinHostPort(addr, "9090")}
			}
			checkOpened(ctx, t, side, addr, tg, dev, ip)
		}
	}
	_, err := AcquireFor(ctx, rdma.ProviderIBV, Target{Spec: RDMASpec{Device: "mlx5_9"}, Local: net.ParseIP("10.0.0.1")})
	require.ErrorIs(t, err, ErrNoRDMAChoice)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), `rdma device "mlx5_9" not found; have rxe0:1 ACTIVE [`)
	assert.Contains(t, err.Error(), `; rxe1:1 ACTIVE [`)
	_, err = AcquireFor(ctx, rdma.ProviderIBV, Target{Spec: RDMASpec{Device: "rxe1", GID: GIDIndex, Index: 99}})
	require.ErrorIs(t, err, ErrNoRDMAChoice)
	assert.Contains(t, err.Error(), "GID index 99 for any address not found; have rxe0:1 ACTIVE [")
}

// TestVerbsPortsMatchSysfsIBVOnly: the ports and GID tables read through
// verbs (what the host's Selector uses) are what sysfs shows.
func TestVerbsPortsMatchSysfsIBVOnly(t *testing.T) {
	if os.Getenv(rdma.EnvProvider) != rdma.ProviderIBV {
		t.Skip("IBVOnly: needs verbs devices (the Soft-RoCE guest)")
	}
	fromSys, err := readPorts("/sys")
	require.NoError(t, err)
	fromVerbs, err := verbsPorts()
	require.NoError(t, err)
	require.NotEmpty(t, fromSys)
	require.Equal(t, Describe(fromSys), Describe(fromVerbs)) // devices, ports, states, GIDs with types and netdevs
	for i := range fromSys {
		assert.Equal(t, fromSys[i].LinkLayer, fromVerbs[i].LinkLayer, fromSys[i].Device)
	}
}

// TestTwoNodesIBVOnly runs on node B of test/rxe/twonode.sh --two-links
// (two guests, two links each: rxe0 on eth0 10.0.0.0/24, rxe1 on eth1
// 10.0.1.0/24), with HATRPC_RXE_ROUTES naming each remote address and the
// local device that reaches it: a client to each of node A's addresses
// leaves from the device on that link, with the RoCE v2 GID of its own
// address there (the kernel's route's source), and opens that device.
func TestTwoNodesIBVOnly(t *testing.T) {
	ctx, pairs := vmTable(t, "HATRPC_RXE_ROUTES", "two nodes with two links (test/rxe/twonode.sh --two-links)", "remote")
	for _, pair := range pairs {
		dev, addr := pair[0], pair[1]
		remote := net.JoinHostPort(addr, "9090")
		src, err := kernelRoute(ctx, remote)
		require.NoError(t, err)
		checkOpened(ctx, t, "client", addr, Target{Remote: remote}, dev, src)
	}
}

// vmTable reads env ("DEV=ADDR,...") for an IBVOnly test, which is skipped
// without it or off ibv, and logs the header of its address -> device
// table; the context bounds the test.
func vmTable(t *testing.T, env, needs, addrCol string) (context.Context, [][2]string) {
	t.Helper()
	v := os.Getenv(env)
	if os.Getenv(rdma.EnvProvider) != rdma.ProviderIBV || v == "" {
		t.Skip("IBVOnly: needs ibv with " + needs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	t.Cleanup(cancel)
	t.Logf("%-8s %-10s %-6s %-4s %-5s %-8s %s", "side", addrCol, "device", "port", "gid", "type", "gid value")
	var pairs [][2]string
	for _, pair := range strings.Split(v, ",") {
		dev, addr, ok := strings.Cut(pair, "=")
		require.True(t, ok, pair)
		pairs = append(pairs, [2]string{dev, addr})
	}
	return ctx, pairs
}

// checkOpened acquires the device for tg and checks it is dev, opened on
// the RoCE v2 GID of gid, logging a row of the address -> device table.
func checkOpened(ctx context.Context, t *testing.T, side, addr string, tg Target, dev string, gid net.IP) {
	t.Helper()
	d, err := AcquireFor(ctx, rdma.ProviderIBV, tg)
	require.NoError(t, err, "%s %s", side, addr)
	defer d.Release()
	ch := d.Choice
	require.NotNil(t, ch)
	info, err := d.Info()
	require.NoError(t, err)
	t.Logf("%-8s %-10s %-6s %-4d %-5d %-8s %s (%s)", side, addr, ch.Device, ch.Port, ch.GIDIndex, ch.Type, ch.GID, ch.Why)
	assert.Equal(t, dev, ch.Device, "%s %s", side, addr)
	assert.Equal(t, dev, info.Name, "%s %s: the opened device", side, addr)
	assert.Equal(t, ch.GIDIndex, info.GIDIndex, "%s %s: the opened GID", side, addr)
	assert.Equal(t, GIDTypeV2, ch.Type, "%s %s", side, addr)
	assert.True(t, ch.GID.Equal(gid), "%s %s: GID %s, want %s", side, addr, ch.GID, gid)
}
