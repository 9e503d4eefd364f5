package fastpath

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

type fakeGID struct {
	gid, typ, ndev string
}

// fakeSysfs writes a /sys/class/infiniband tree: dev -> port 1 with the
// given GID rows (index = position; "" gid is an empty slot).
func fakeSysfs(t *testing.T, link string, devs map[string][]fakeGID) string {
	t.Helper()
	root := t.TempDir()
	for dev, gids := range devs {
		p := filepath.Join(root, "class", "infiniband", dev, "ports", "1")
		for _, d := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
			require.NoError(t, os.MkdirAll(filepath.Join(p, d), 0o755))
		}
		require.NoError(t, os.WriteFile(filepath.Join(p, "state"), []byte("4: ACTIVE\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(p, "link_layer"), []byte(link+"\n"), 0o644))
		for i, g := range gids {
			n := strconv.Itoa(i)
			v := g.gid
			if v == "" {
				v = "0000:0000:0000:0000:0000:0000:0000:0000"
			}
			require.NoError(t, os.WriteFile(filepath.Join(p, "gids", n), []byte(v+"\n"), 0o644))
			if g.typ != "" {
				require.NoError(t, os.WriteFile(filepath.Join(p, "gid_attrs/types", n), []byte(g.typ+"\n"), 0o644))
				require.NoError(t, os.WriteFile(filepath.Join(p, "gid_attrs/ndevs", n), []byte(g.ndev+"\n"), 0o644))
			}
		}
	}
	return root
}

// twoRoCE: rxe0 on dummy0 (10.0.0.1, fd00::1), rxe1 on dummy1 (10.0.1.1),
// each with link-local GIDs in v1 and v2, as the kernel populates them.
func twoRoCE(t *testing.T) string {
	return fakeSysfs(t, "Ethernet", map[string][]fakeGID{
		"rxe0": {
			{"fe80:0000:0000:0000:0200:00ff:fe00:0001", GIDTypeV1, "dummy0"},
			{"fe80:0000:0000:0000:0200:00ff:fe00:0001", GIDTypeV2, "dummy0"},
			{"0000:0000:0000:0000:0000:ffff:0a00:0001", GIDTypeV1, "dummy0"},
			{"0000:0000:0000:0000:0000:ffff:0a00:0001", GIDTypeV2, "dummy0"},
			{"fd00:0000:0000:0000:0000:0000:0000:0001", GIDTypeV1, "dummy0"},
			{"fd00:0000:0000:0000:0000:0000:0000:0001", GIDTypeV2, "dummy0"},
		},
		"rxe1": {
			{"fe80:0000:0000:0000:0200:00ff:fe00:0002", GIDTypeV1, "dummy1"},
			{"fe80:0000:0000:0000:0200:00ff:fe00:0002", GIDTypeV2, "dummy1"},
			{"", "", ""},
			{"0000:0000:0000:0000:0000:ffff:0a00:0101", GIDTypeV2, "dummy1"},
			{"0000:0000:0000:0000:0000:ffff:0a00:0101", GIDTypeV1, "dummy1"},
		},
	})
}

func fakeNetdevs(m map[string]string) func(net.IP) string {
	return func(ip net.IP) string { return m[ip.String()] }
}

func TestSelectForLocal(t *testing.T) {
	root := twoRoCE(t)
	nd := fakeNetdevs(map[string]string{"10.0.0.7": "dummy0", "10.0.1.1": "dummy1", "fe80::200:ff:fe00:2": "dummy1"})
	cases := []struct {
		name, addr, spec, gid string
		dev                   string
		idx                   int
		typ, why              string
	}{
		{"v4 on rxe0", "10.0.0.1", "", "", "rxe0", 3, GIDTypeV2, "GID of 10.0.0.1"},
		{"v4 on rxe1, v2 before v1", "10.0.1.1", "", "", "rxe1", 3, GIDTypeV2, "GID of 10.0.1.1"},
		{"ipv6", "fd00::1", "", "", "rxe0", 5, GIDTypeV2, "GID of fd00::1"},
		{"link-local address is its own GID", "fe80::200:ff:fe00:2", "", "", "rxe1", 1, GIDTypeV2, "GID of fe80::200:ff:fe00:2"},
		{"second address of a netdev", "10.0.0.7", "", "", "rxe0", 3, GIDTypeV2, "netdev dummy0 carries 10.0.0.7"},
		{"0.0.0.0", "0.0.0.0", "", "", "rxe0", 3, GIDTypeV2, "no address to go by: first active port"},
		{"::", "::", "", "", "rxe0", 3, GIDTypeV2, "no address to go by: first active port"},
		{"v1 by index", "10.0.0.1", "", "2", "rxe0", 2, GIDTypeV1, "GID of 10.0.0.1 (override gid=2)"},
		{"device override", "0.0.0.0", "rxe1:1", "", "rxe1", 3, GIDTypeV2, "no address to go by: first active port (override rxe1:1)"},
		{"device override off-address", "10.0.0.1", "rxe1", "v2", "rxe1", 3, GIDTypeV2, "10.0.0.1 is on no port of it (override rxe1 gid=v2)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := ParseRDMASpec(tc.spec, tc.gid)
			require.NoError(t, err)
			c, err := Selector{Root: root, Spec: sp, NetdevOf: nd}.ForLocal(net.ParseIP(tc.addr))
			require.NoError(t, err)
			assert.Equal(t, tc.dev, c.Device)
			assert.Equal(t, 1, c.Port)
			assert.Equal(t, tc.idx, c.GIDIndex)
			assert.Equal(t, tc.typ, c.Type)
			assert.Equal(t, tc.why, c.Why)
		})
	}
}

func TestSelectForRemote(t *testing.T) {
	root := twoRoCE(t)
	routes := map[string]string{"10.0.0.2:9090": "10.0.0.1", "10.0.1.9:9090": "10.0.1.1", "[fd00::2]:9090": "fd00::1"}
	s := Selector{Root: root, NetdevOf: fakeNetdevs(nil), Route: func(_ context.Context, a string) (net.IP, error) {
		if r, ok := routes[a]; ok {
			return net.ParseIP(r), nil
		}
		return nil, errors.New("network is unreachable")
	}}
	ctx := context.Background()
	for addr, dev := range map[string]string{"10.0.0.2:9090": "rxe0", "10.0.1.9:9090": "rxe1", "[fd00::2]:9090": "rxe0"} {
		c, err := s.ForRemote(ctx, addr)
		require.NoError(t, err, addr)
		assert.Equal(t, dev, c.Device, addr)
		assert.Equal(t, GIDTypeV2, c.Type, addr)
		assert.False(t, c.GID.IsLinkLocalUnicast(), addr)
	}
	c, err := s.ForRemote(ctx, "10.0.1.9:9090")
	require.NoError(t, err)
	assert.Equal(t, "route to 10.0.1.9:9090 leaves from 10.0.1.1: GID of 10.0.1.1", c.Why)
	_, err = s.ForRemote(ctx, "192.168.9.9:1")
	require.ErrorIs(t, err, ErrNoRDMAChoice)
	assert.EqualError(t, err, "fastpath: no rdma device/port/gid: route to 192.168.9.9:1: network is unreachable")
	// The real route to loopback runs through lo: no RoCE netdev has it.
	_, err = Selector{Root: root, NetdevOf: fakeNetdevs(nil)}.ForRemote(ctx, "127.0.0.1:9")
	require.ErrorIs(t, err, ErrNoRDMAChoice)
}

const twoRoCETable = "rxe0:1 ACTIVE [0 fe80::200:ff:fe00:1 IB/RoCE v1 dummy0, 1 fe80::200:ff:fe00:1 RoCE v2 dummy0, " +
	"2 10.0.0.1 IB/RoCE v1 dummy0, 3 10.0.0.1 RoCE v2 dummy0, 4 fd00::1 IB/RoCE v1 dummy0, 5 fd00::1 RoCE v2 dummy0]; " +
	"rxe1:1 ACTIVE [0 fe80::200:ff:fe00:2 IB/RoCE v1 dummy1, 1 fe80::200:ff:fe00:2 RoCE v2 dummy1, " +
	"3 10.0.1.1 RoCE v2 dummy1, 4 10.0.1.1 IB/RoCE v1 dummy1]"

func TestSelectWrongOverride(t *testing.T) {
	root := twoRoCE(t)
	cases := []struct{ addr, dev, gid, want string }{
		{"10.0.0.1", "mlx5_1", "", `fastpath: no rdma device/port/gid: rdma device "mlx5_1" not found; have ` + twoRoCETable},
		{"10.0.0.1", "rxe0:2", "", `fastpath: no rdma device/port/gid: rdma device "rxe0:2" not found; have ` + twoRoCETable},
		{"10.0.1.1", "", "2", `fastpath: no rdma device/port/gid: GID index 2 for 10.0.1.1 not found; have ` + twoRoCETable},
		{"10.0.9.9", "", "", `fastpath: no rdma device/port/gid: no rdma port carries 10.0.9.9 (netdev ""); have ` + twoRoCETable},
	}
	for _, tc := range cases {
		sp, err := ParseRDMASpec(tc.dev, tc.gid)
		require.NoError(t, err)
		_, err = Selector{Root: root, Spec: sp, NetdevOf: fakeNetdevs(nil)}.ForLocal(net.ParseIP(tc.addr))
		require.ErrorIs(t, err, ErrNoRDMAChoice)
		assert.EqualError(t, err, tc.want)
	}
	_, err := Selector{Root: t.TempDir()}.ForLocal(nil)
	require.ErrorIs(t, err, ErrNoRDMAChoice)
}

func TestSelectInfiniBand(t *testing.T) {
	root := fakeSysfs(t, "InfiniBand", map[string][]fakeGID{
		"mlx5_0": {{"fe80:0000:0000:0000:506b:4b03:00aa:0001", "", ""}},
	})
	c, err := Selector{Root: root, NetdevOf: fakeNetdevs(nil)}.ForLocal(net.ParseIP("192.168.5.1"))
	require.NoError(t, err)
	assert.Equal(t, "mlx5_0", c.Device)
	assert.Equal(t, 0, c.GIDIndex)
	assert.Equal(t, GIDTypeV1, c.Type)
}

func TestParseRDMASpec(t *testing.T) {
	good := []struct {
		dev, gid string
		want     RDMASpec
	}{
		{"", "", RDMASpec{}},
		{"mlx5_1", "auto", RDMASpec{Device: "mlx5_1"}},
		{"mlx5_1:2", "v2", RDMASpec{Device: "mlx5_1", Port: 2, GID: GIDv2}},
		{"rxe0", "3", RDMASpec{Device: "rxe0", GID: GIDIndex, Index: 3}},
	}
	for _, g := range good {
		sp, err := ParseRDMASpec(g.dev, g.gid)
		require.NoError(t, err)
		assert.Equal(t, g.want, sp)
	}
	bad := map[[2]string]string{
		{"mlx5_1:x", ""}: `fastpath: bad rdma override: device "mlx5_1:x": port "x" is not 1..255`,
		{":1", ""}:       `fastpath: bad rdma override: device ":1": want NAME or NAME:PORT (e.g. mlx5_1:1)`,
		{"", "v3"}:       `fastpath: bad rdma override: gid "v3": want auto, v2 or a GID index`,
		{"", "-1"}:       `fastpath: bad rdma override: gid "-1": want auto, v2 or a GID index`,
	}
	for in, want := range bad {
		_, err := ParseRDMASpec(in[0], in[1])
		require.ErrorIs(t, err, ErrBadRDMASpec)
		assert.EqualError(t, err, want)
	}
	t.Setenv(EnvRDMADevice, "rxe1:1")
	t.Setenv(EnvRDMAGID, "v2")
	sp, err := RDMASpecFromEnv("", "")
	require.NoError(t, err)
	assert.Equal(t, RDMASpec{Device: "rxe1", Port: 1, GID: GIDv2}, sp)
	sp, err = RDMASpecFromEnv("rxe0", "4")
	require.NoError(t, err)
	assert.Equal(t, RDMASpec{Device: "rxe0", GID: GIDIndex, Index: 4}, sp)
}

func TestRDMAInfo(t *testing.T) {
	root := twoRoCE(t)
	sel := Selector{Root: root, NetdevOf: fakeNetdevs(nil), Route: func(context.Context, string) (net.IP, error) {
		return net.ParseIP("10.0.1.1"), nil
	}}
	lim := func(dev string, port int) (PortLimits, error) {
		return PortLimits{MTU: 4096, MaxQP: 64, MaxQPWR: 1024, MaxSGE: 2, MaxCQE: 4096, MaxMR: 512, MaxMRSize: 1 << 30, MaxInline: 256}, nil
	}
	var b strings.Builder
	fork := func() string { return "unneeded (the kernel copies pinned pages on fork)" }
	require.NoError(t, RDMAInfo(context.Background(), &b, InfoOptions{Sel: sel, Addr: "10.0.1.1:9090", Limits: lim, Fork: fork}))
	out := b.String()
	assert.Contains(t, out, "fork without exec: unneeded (the kernel copies pinned pages on fork); os/exec children inherit nothing (close-on-exec)\n")
	assert.Contains(t, out, "rxe1 port 1: ACTIVE, link layer Ethernet, NUMA node unknown\n  active MTU 4096; max_qp 64, max_qp_wr 1024, max_sge 2, max_cqe 4096, max_mr 512, max_mr_size 1073741824, max_inline_data 256\n")
	assert.Contains(t, out, "  gid 3   10.0.1.1                                RoCE v2    dummy1\n")
	assert.Contains(t, out, "override: none (HATRPC_RDMA_DEVICE, HATRPC_RDMA_GID unset)\n")
	assert.Contains(t, out, "server listening on 10.0.1.1:9090: rxe1 port 1 gid 3 10.0.1.1 RoCE v2 dummy1\n  why: GID of 10.0.1.1\n")
	assert.Contains(t, out, "client dialing 10.0.1.1:9090: rxe1 port 1 gid 3 10.0.1.1 RoCE v2 dummy1\n  why: route to 10.0.1.1:9090 leaves from 10.0.1.1: GID of 10.0.1.1\n")

	b.Reset()
	require.NoError(t, RDMAInfo(context.Background(), &b, InfoOptions{Sel: sel, Addr: "0.0.0.0:9090", Limits: lim, Fork: fork}))
	assert.Contains(t, b.String(), "server listening on 0.0.0.0:9090: rxe0 port 1 gid 3 10.0.0.1 RoCE v2 dummy0\n  why: no address to go by: first active port\n  (each client's lanes use the device that received its TCP connection")

	b.Reset()
	require.NoError(t, RDMAInfo(context.Background(), &b, InfoOptions{Sel: Selector{Root: t.TempDir()}}))
	assert.Contains(t, b.String(), "no RDMA devices (")
}

func TestSelectChooseFallback(t *testing.T) {
	root := twoRoCE(t)
	lo := func(context.Context, string) (net.IP, error) { return net.ParseIP("127.0.0.1"), nil }
	c, err := Selector{Root: root, NetdevOf: fakeNetdevs(map[string]string{"127.0.0.1": "lo"}), Route: lo}.Choose(context.Background(), nil, "127.0.0.1:9")
	require.NoError(t, err)
	assert.Equal(t, "rxe0", c.Device)
	assert.Equal(t, 3, c.GIDIndex)
	assert.Equal(t, `no rdma port carries 127.0.0.1 (netdev "lo"): the first active port by default`, c.Why)
	// With an override, nothing falls back.
	_, err = Selector{Root: root, Spec: RDMASpec{GID: GIDv2}, NetdevOf: fakeNetdevs(nil), Route: lo}.Choose(context.Background(), nil, "127.0.0.1:9")
	require.ErrorIs(t, err, ErrNoRDMAChoice)
}

// TestSelectNUMA: two devices carry 10.2.0.0/16 equally (both RoCE v2
// GIDs of addresses on one bridge, numa nodes 0 and 1), a third is on
// node 1 but does not carry the address: the numa hint breaks the tie
// between the first two and never picks the third.
// numaTree: mlx5_0 (node 0) and mlx5_1 (node 1) both carry 10.2.0.1 on
// bond0; mlx5_2 (node 1) carries 10.9.0.1 on eth9.
func numaTree(t *testing.T) string {
	root := fakeSysfs(t, "Ethernet", map[string][]fakeGID{
		"mlx5_0": {{"0000:0000:0000:0000:0000:ffff:0a02:0001", GIDTypeV2, "bond0"}},
		"mlx5_1": {{"0000:0000:0000:0000:0000:ffff:0a02:0001", GIDTypeV2, "bond0"}},
		"mlx5_2": {{"0000:0000:0000:0000:0000:ffff:0a09:0001", GIDTypeV2, "eth9"}},
	})
	for dev, node := range map[string]string{"mlx5_0": "0", "mlx5_1": "1", "mlx5_2": "1"} {
		dir := filepath.Join(root, "class", "infiniband", dev, "device")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "numa_node"), []byte(node+"\n"), 0o644))
	}
	return root
}

func TestSelectNUMA(t *testing.T) {
	root := numaTree(t)
	ports, err := Selector{Root: root}.Ports()
	require.NoError(t, err)
	require.Len(t, ports, 3)
	assert.Equal(t, []int{0, 1, 1}, []int{ports[0].NUMANode, ports[1].NUMANode, ports[2].NUMANode})

	ip := net.ParseIP("10.2.0.1")
	cases := []struct {
		name string
		numa hints.NUMA
		spec RDMASpec
		dev  string
		why  string
	}{
		{"no hint: the first", hints.NUMANone, RDMASpec{}, "mlx5_0", "GID of 10.2.0.1"},
		{"nic: no preference", hints.NUMANIC, RDMASpec{}, "mlx5_0", "GID of 10.2.0.1"},
		{"node 0", hints.NUMANode(0), RDMASpec{}, "mlx5_0",
			"GID of 10.2.0.1; numa=0: mlx5_0 is on node 0 (of mlx5_0 node 0, mlx5_1 node 1, all carrying the address)"},
		{"node 1", hints.NUMANode(1), RDMASpec{}, "mlx5_1",
			"GID of 10.2.0.1; numa=1: mlx5_1 is on node 1 (of mlx5_0 node 0, mlx5_1 node 1, all carrying the address)"},
		{"node 2: none there", hints.NUMANode(2), RDMASpec{}, "mlx5_0",
			"GID of 10.2.0.1; numa=2: none is on node 2, the first kept (of mlx5_0 node 0, mlx5_1 node 1, all carrying the address)"},
		{"gid index: still a tie", hints.NUMANode(1), RDMASpec{GID: GIDIndex, Index: 0}, "mlx5_1",
			"GID of 10.2.0.1 (override gid=0); numa=1: mlx5_1 is on node 1 (of mlx5_0 node 0, mlx5_1 node 1, all carrying the address)"},
		{"a device override wins", hints.NUMANode(1), RDMASpec{Device: "mlx5_0"}, "mlx5_0", "GID of 10.2.0.1 (override mlx5_0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := Selector{Root: root, Spec: c.spec, NUMA: c.numa, NetdevOf: fakeNetdevs(nil)}.ForLocal(ip)
			require.NoError(t, err)
			assert.Equal(t, c.dev, ch.Device)
			assert.Equal(t, c.why, ch.Why)
		})
	}
	// mlx5_2 is on node 1 but carries 10.9.0.1 only: 10.2.0.1's choice
	// never goes there, and 10.9.0.1's goes nowhere else.
	ch, err := Selector{Root: root, NUMA: hints.NUMANode(0), NetdevOf: fakeNetdevs(nil)}.ForLocal(net.ParseIP("10.9.0.1"))
	require.NoError(t, err)
	assert.Equal(t, "mlx5_2", ch.Device)
	assert.Equal(t, "GID of 10.9.0.1", ch.Why)
}

func TestRDMAInfoNUMA(t *testing.T) {
	sel := Selector{Root: numaTree(t), NUMA: hints.NUMANode(1), NetdevOf: fakeNetdevs(nil),
		Route: func(context.Context, string) (net.IP, error) { return net.ParseIP("10.2.0.1"), nil }}
	lim := func(string, int) (PortLimits, error) { return PortLimits{}, nil }
	var b strings.Builder
	require.NoError(t, RDMAInfo(context.Background(), &b, InfoOptions{Sel: sel, Addr: "10.2.0.1:9090", Limits: lim,
		Fork: func() string { return "enabled" }}))
	out := b.String()
	assert.Contains(t, out, "mlx5_0 port 1: ACTIVE, link layer Ethernet, NUMA node 0\n")
	assert.Contains(t, out, "mlx5_1 port 1: ACTIVE, link layer Ethernet, NUMA node 1\n")
	assert.Contains(t, out, "handler numa hint: 1 (breaks ties among devices that carry the address)\n")
	assert.Contains(t, out, "server listening on 10.2.0.1:9090: mlx5_1 port 1 gid 0 10.2.0.1 RoCE v2 bond0\n"+
		"  why: GID of 10.2.0.1; numa=1: mlx5_1 is on node 1 (of mlx5_0 node 0, mlx5_1 node 1, all carrying the address)\n")
	assert.Contains(t, out, "client dialing 10.2.0.1:9090: mlx5_1 port 1 gid 0 10.2.0.1 RoCE v2 bond0\n"+
		"  why: route to 10.2.0.1:9090 leaves from 10.2.0.1: GID of 10.2.0.1; numa=1: mlx5_1 is on node 1")
}
