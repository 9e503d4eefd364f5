package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRDMAInfoCmd(t *testing.T) {
	t.Setenv("HATRPC_RDMA_DEVICE", "")
	t.Setenv("HATRPC_RDMA_GID", "")
	empty := t.TempDir()
	code, out, _ := hatrpc(t, "rdma-info", "--sysfs", empty, "--addr", "127.0.0.1:9090")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "no RDMA devices ("+empty+"/class/infiniband is empty): lanes use shm")

	// One RoCE port with a v2 GID on eth9: a wrong override lists it.
	p := filepath.Join(t.TempDir(), "class", "infiniband", "rxe0", "ports", "1")
	for _, d := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(p, d), 0o755))
	}
	for f, v := range map[string]string{"state": "4: ACTIVE", "link_layer": "Ethernet",
		"gids/0": "0000:0000:0000:0000:0000:ffff:0a00:0001", "gid_attrs/types/0": "RoCE v2", "gid_attrs/ndevs/0": "eth9"} {
		require.NoError(t, os.WriteFile(filepath.Join(p, f), []byte(v+"\n"), 0o644))
	}
	root := filepath.Join(p, "..", "..", "..", "..", "..")
	code, _, errOut := hatrpc(t, "rdma-info", "--sysfs", root, "--rdma-gid", "v3")
	assert.Equal(t, 1, code)
	assert.Equal(t, "hatrpc: fastpath: bad rdma override: gid \"v3\": want auto, v2 or a GID index\n", errOut)
	code, out, _ = hatrpc(t, "rdma-info", "--sysfs", root, "--rdma-device", "mlx5_0", "--addr", "10.0.0.1:1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "override: mlx5_0\n")
	assert.Contains(t, out, `server listening on 10.0.0.1:1: fastpath: no rdma device/port/gid: rdma device "mlx5_0" not found; have rxe0:1 ACTIVE [0 10.0.0.1 RoCE v2 eth9]`)
	code, out, _ = hatrpc(t, "rdma-info", "--sysfs", root, "--numa", "1", "--addr", "10.0.0.1:1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "rxe0 port 1: ACTIVE, link layer Ethernet, NUMA node unknown\n")
	assert.Contains(t, out, "handler numa hint: 1 (breaks ties among devices that carry the address)\n")
	assert.Contains(t, out, "fork without exec: ")
	code, _, errOut = hatrpc(t, "rdma-info", "--sysfs", root, "--numa", "east")
	assert.Equal(t, 1, code)
	assert.Equal(t, "hatrpc: --numa: bad numa \"east\": want a node id, nic or none\n", errOut)
}
