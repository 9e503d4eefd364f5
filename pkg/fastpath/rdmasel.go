package fastpath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

// GID types as sysfs spells them (gid_attrs/types/N).
const (
	GIDTypeV1 = "IB/RoCE v1"
	GIDTypeV2 = "RoCE v2"
)

// GIDEntry is one populated row of a port's GID table.
type GIDEntry struct {
	Index  int
	GID    net.IP
	Type   string // GIDTypeV1 or GIDTypeV2
	Netdev string // "" on InfiniBand
}

// RDMAPort is one port of a verbs device as sysfs shows it.
type RDMAPort struct {
	Device    string
	Port      int
	State     string // ACTIVE, DOWN, ...
	LinkLayer string // Ethernet or InfiniBand
	// NUMANode is the node the device's PCI function hangs off (sysfs
	// device/numa_node), -1 when the kernel does not say (rxe, one-node
	// machines).
	NUMANode int
	GIDs     []GIDEntry
}

// RDMAChoice is the device, port and GID picked for an address, and why.
type RDMAChoice struct {
	Device   string
	Port     int
	GIDIndex int
	GID      net.IP
	Type     string
	Netdev   string
	Why      string
}

// Key names the choice for sharing one open device per device/port/GID.
func (c RDMAChoice) Key() string { return fmt.Sprintf("%s:%d:%d", c.Device, c.Port, c.GIDIndex) }

// Selector chooses an RDMA device, port and GID from sysfs (Root; "/sys"
// when empty) and the host's interface addresses. It is plain file reading
// and routing, so it runs and is tested without a NIC.
type Selector struct {
	Root string
	Spec RDMASpec
	// NetdevOf names the interface holding ip ("" none); nil reads the
	// host's interfaces. Tests give a fake.
	NetdevOf func(ip net.IP) string
	// Route returns the local source address the kernel uses to reach
	// addr; nil "connects" a UDP socket (no packet is sent).
	Route func(ctx context.Context, addr string) (net.IP, error)
	// NUMA is the handler's numa hint: where several devices carry the
	// address equally well, the one on that node wins. It only breaks
	// ties: a device that does not carry the address is never chosen
	// for being local. NUMANone and NUMANIC (follow the NIC) prefer none.
	NUMA hints.NUMA
}

// Ports reads every port of every verbs device, sorted by device and port.
// The host's own ports (Root "") are read at most once every portsTTL,
// through verbs where they are linked in: in sysfs a port's GID table is
// three files per slot (Soft-RoCE: 1024 slots), and every client
// connection to an RDMA server chooses its device; under emulation ten
// processes reading them at once outlasted their dial timeouts.
func (s Selector) Ports() ([]RDMAPort, error) {
	if s.Root != "" {
		return readPorts(s.Root)
	}
	hostPorts.mu.Lock()
	defer hostPorts.mu.Unlock()
	if now := time.Now(); hostPorts.at.IsZero() || now.Sub(hostPorts.at) > portsTTL {
		ports, err := readHostPorts()
		if err != nil {
			return nil, err
		}
		hostPorts.ports, hostPorts.at = ports, now
	}
	return slices.Clone(hostPorts.ports), nil
}

// portsTTL is how long the host's ports as read stand for it: devices,
// port states and GIDs change when an operator changes them, not per
// connection.
const portsTTL = 2 * time.Second

// readHostPorts reads the host's ports: from sysfs, or where verbs are
// linked in (cgo on Linux) from the kernel's GID tables through verbs, one
// query per device (hostports_cgo.go).
var readHostPorts = func() ([]RDMAPort, error) { return readPorts("/sys") }

var hostPorts struct {
	mu    sync.Mutex
	at    time.Time
	ports []RDMAPort
}

func readPorts(root string) ([]RDMAPort, error) {
	base := filepath.Join(root, "class", "infiniband")
	devs, err := os.ReadDir(base)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fastpath: read %s: %w", base, err)
	}
	var out []RDMAPort
	for _, d := range devs {
		pdir := filepath.Join(base, d.Name(), "ports")
		ports, err := os.ReadDir(pdir)
		if err != nil {
			continue // a device going away while read
		}
		for _, p := range ports {
			n, err := strconv.Atoi(p.Name())
			if err != nil {
				continue
			}
			port := readPort(filepath.Join(pdir, p.Name()), d.Name(), n)
			port.NUMANode = numaNodeOf(filepath.Join(base, d.Name()))
			out = append(out, port)
		}
	}
	sortPorts(out)
	return out, nil
}

// sortPorts orders ports by device and port, and each one's GIDs by
// index, however they were read.
func sortPorts(ps []RDMAPort) {
	for i := range ps {
		g := ps[i].GIDs
		sort.Slice(g, func(a, b int) bool { return g[a].Index < g[b].Index })
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Device != ps[j].Device {
			return ps[i].Device < ps[j].Device
		}
		return ps[i].Port < ps[j].Port
	})
}

// numaNodeOf reads a device's device/numa_node; -1 when absent or unknown.
func numaNodeOf(devDir string) int {
	n, err := strconv.Atoi(readSys(filepath.Join(devDir, "device", "numa_node")))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func readSys(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readPort(dir, dev string, port int) RDMAPort {
	p := RDMAPort{Device: dev, Port: port, LinkLayer: readSys(filepath.Join(dir, "link_layer"))}
	p.State = readSys(filepath.Join(dir, "state")) // "4: ACTIVE"
	if _, st, ok := strings.Cut(p.State, ": "); ok {
		p.State = st
	}
	gids, _ := os.ReadDir(filepath.Join(dir, "gids"))
	for _, g := range gids {
		i, err := strconv.Atoi(g.Name())
		if err != nil {
			continue
		}
		ip := net.ParseIP(readSys(filepath.Join(dir, "gids", g.Name())))
		if ip == nil || ip.IsUnspecified() {
			continue // an empty slot
		}
		e := GIDEntry{Index: i, GID: ip,
			Type:   readSys(filepath.Join(dir, "gid_attrs", "types", g.Name())),
			Netdev: readSys(filepath.Join(dir, "gid_attrs", "ndevs", g.Name()))}
		if e.Type == "" {
			e.Type = GIDTypeV1 // InfiniBand ports have no type attribute
		}
		p.GIDs = append(p.GIDs, e)
	}
	return p
}

// rank orders a port's GIDs as the C core does with no address to go by:
// RoCE v2 with an IPv4-mapped address, then other RoCE v2, then v1;
// link-local GIDs last (they do not route).
func rank(e GIDEntry) int {
	r := 1
	if e.Type == GIDTypeV2 {
		r = 3
		if e.GID.To4() != nil {
			r = 4
		}
	}
	if e.GID.IsLinkLocalUnicast() {
		r -= 10 // only when nothing else matches; v2 still before v1
	}
	return r
}

// ForLocal chooses for an address this process owns: the one a server
// listens on or accepted a connection on, or a client's source address.
// An unspecified (0.0.0.0, ::) or nil address takes the first active port.
func (s Selector) ForLocal(ip net.IP) (RDMAChoice, error) {
	ports, err := s.Ports()
	if err != nil {
		return RDMAChoice{}, err
	}
	if len(ports) == 0 {
		return RDMAChoice{}, fmt.Errorf("%w: no rdma devices in %s", ErrNoRDMAChoice, filepath.Join(s.root(), "class", "infiniband"))
	}
	cand := ports
	if s.Spec.Device != "" {
		cand = nil
		for _, p := range ports {
			if p.Device == s.Spec.Device && (s.Spec.Port == 0 || p.Port == s.Spec.Port) {
				cand = append(cand, p)
			}
		}
		if len(cand) == 0 {
			return RDMAChoice{}, fmt.Errorf("%w: rdma device %q not found; have %s", ErrNoRDMAChoice, s.Spec.String(), Describe(ports))
		}
	}
	over := ""
	if s.Spec.Device != "" || s.Spec.GID != GIDAuto {
		over = " (override " + s.Spec.String() + ")"
	}
	any := func(GIDEntry) bool { return true }
	if ip == nil || ip.IsUnspecified() {
		return s.pick(cand, ports, any, "no address to go by: first active port"+over, "any address")
	}
	// The address itself is a RoCE GID (IPv4-mapped or IPv6) on the port
	// whose netdev carries it: the direct answer.
	c, errGID := s.pick(cand, ports, func(e GIDEntry) bool { return e.GID.Equal(ip) }, "GID of "+ip.String()+over, ip.String())
	if errGID == nil {
		return c, nil
	}
	nd := s.netdevOf(ip)
	if nd != "" {
		if c, err := s.pick(cand, ports, func(e GIDEntry) bool { return e.Netdev == nd }, "netdev "+nd+" carries "+ip.String()+over, ip.String()); err == nil {
			return c, nil
		}
	}
	if s.Spec.Device != "" {
		return s.pick(cand, ports, any, ip.String()+" is on no port of it"+over, ip.String())
	}
	if s.Spec.GID != GIDAuto {
		return RDMAChoice{}, errGID
	}
	// InfiniBand ports have no IP GIDs: an IPoIB address still reaches the
	// fabric through the first active IB port.
	for _, p := range cand {
		if p.LinkLayer == "InfiniBand" && p.State == "ACTIVE" {
			return s.pick([]RDMAPort{p}, ports, any, "InfiniBand port; "+ip.String()+" is on no RoCE netdev", ip.String())
		}
	}
	return RDMAChoice{}, fmt.Errorf("%w: no rdma port carries %s (netdev %q); have %s", ErrNoRDMAChoice, ip, nd, Describe(ports))
}

// ForRemote chooses the device and source GID that route to addr
// ("host:port" or a host): the kernel's route to it names the source
// address, and that address's GID is chosen as ForLocal does.
func (s Selector) ForRemote(ctx context.Context, addr string) (RDMAChoice, error) {
	route := s.Route
	if route == nil {
		route = kernelRoute
	}
	src, err := route(ctx, addr)
	if err != nil {
		return RDMAChoice{}, fmt.Errorf("%w: route to %s: %w", ErrNoRDMAChoice, addr, err)
	}
	c, err := s.ForLocal(src)
	if err != nil {
		return RDMAChoice{}, err
	}
	c.Why = "route to " + addr + " leaves from " + src.String() + ": " + c.Why
	return c, nil
}

// Choose is what lanes use: ForRemote for a client (remote != ""), else
// ForLocal. With no override, an address no RDMA port carries (loopback,
// say) falls back to the first active port, the reason saying so; with an
// override, a choice that does not exist is the error.
func (s Selector) Choose(ctx context.Context, local net.IP, remote string) (RDMAChoice, error) {
	var c RDMAChoice
	var err error
	if remote != "" {
		c, err = s.ForRemote(ctx, remote)
	} else {
		c, err = s.ForLocal(local)
	}
	if err != nil && s.Spec == (RDMASpec{}) && errors.Is(err, ErrNoRDMAChoice) {
		why, _, _ := strings.Cut(err.Error(), "; have ")
		why = strings.TrimPrefix(why, ErrNoRDMAChoice.Error()+": ")
		if c, err = s.ForLocal(nil); err == nil {
			c.Why = why + ": the first active port by default"
		}
	}
	return c, err
}

// kernelRoute asks the kernel which local address reaches addr: a UDP
// "connect" runs the route lookup and sends nothing.
func kernelRoute(ctx context.Context, addr string) (net.IP, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "9"
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}

func (s Selector) root() string {
	if s.Root == "" {
		return "/sys"
	}
	return s.Root
}

func (s Selector) netdevOf(ip net.IP) string {
	if s.NetdevOf != nil {
		return s.NetdevOf(ip)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, it := range ifs {
		addrs, _ := it.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return it.Name
			}
		}
	}
	return ""
}

// pick takes the best GID that match accepts on the candidate ports,
// active ports first, honouring the GID part of the spec.
func (s Selector) pick(cand, all []RDMAPort, match func(GIDEntry) bool, why, addr string) (RDMAChoice, error) {
	var best *GIDEntry
	var bp RDMAPort
	bestR := -100
	node, prefer := s.NUMA.Node()
	local := func(p RDMAPort) bool { return prefer && p.NUMANode == node }
	// tied: the devices that carry the best GID equally well, so the numa
	// hint's part in the choice can be told.
	var tied []RDMAPort
	consider := func(e *GIDEntry, p RDMAPort, r int) {
		switch {
		case best == nil || r > bestR:
			best, bp, bestR, tied = e, p, r, []RDMAPort{p}
		case r == bestR && p.Device != bp.Device:
			tied = append(tied, p)
			if local(p) && !local(bp) {
				best, bp = e, p
			}
		}
	}
	for _, p := range cand {
		if p.State != "ACTIVE" && s.Spec.Device == "" {
			continue
		}
		for i := range p.GIDs {
			e := &p.GIDs[i]
			if !match(*e) || (s.Spec.GID == GIDv2 && e.Type != GIDTypeV2) ||
				(s.Spec.GID == GIDIndex && e.Index != s.Spec.Index) {
				continue
			}
			r := rank(*e)
			if s.Spec.GID == GIDIndex {
				r = 0 // the index is the choice: only the device is left to choose
			}
			consider(e, p, r)
		}
	}
	if best != nil && prefer && len(tied) > 1 {
		why += "; " + numaWhy(node, bp, tied)
	}
	if best == nil {
		want := "a GID"
		switch s.Spec.GID {
		case GIDv2:
			want = "a RoCE v2 GID"
		case GIDIndex:
			want = fmt.Sprintf("GID index %d", s.Spec.Index)
		}
		return RDMAChoice{}, fmt.Errorf("%w: %s for %s not found; have %s", ErrNoRDMAChoice, want, addr, Describe(all))
	}
	return RDMAChoice{Device: bp.Device, Port: bp.Port, GIDIndex: best.Index, GID: best.GID,
		Type: best.Type, Netdev: best.Netdev, Why: why}, nil
}

// numaWhy says how the numa hint chose among tied devices.
func numaWhy(node int, chosen RDMAPort, tied []RDMAPort) string {
	nodes := make([]string, 0, len(tied))
	for _, p := range tied {
		nodes = append(nodes, fmt.Sprintf("%s node %d", p.Device, p.NUMANode))
	}
	verdict := fmt.Sprintf("numa=%d: %s is on node %d", node, chosen.Device, node)
	if chosen.NUMANode != node {
		verdict = fmt.Sprintf("numa=%d: none is on node %d, the first kept", node, node)
	}
	return fmt.Sprintf("%s (of %s, all carrying the address)", verdict, strings.Join(nodes, ", "))
}

// Describe lists ports and their GID tables on one line, for errors:
// "rxe0:1 ACTIVE [0 fe80::1 IB/RoCE v1 dummy0, 1 ::ffff:10.0.0.1 RoCE v2 dummy0]".
func Describe(ports []RDMAPort) string {
	if len(ports) == 0 {
		return "no rdma devices"
	}
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		g := make([]string, 0, len(p.GIDs))
		for _, e := range p.GIDs {
			g = append(g, strings.TrimSpace(fmt.Sprintf("%d %s %s %s", e.Index, e.GID, e.Type, e.Netdev)))
		}
		parts = append(parts, fmt.Sprintf("%s:%d %s [%s]", p.Device, p.Port, p.State, strings.Join(g, ", ")))
	}
	return strings.Join(parts, "; ")
}

func errOr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}
