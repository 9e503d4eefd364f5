package fastpath

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
)

// PortLimits are what verbs report for an opened port; the C core is the
// only source, so a build without the fast path has none.
type PortLimits struct {
	MTU, MaxQPWR, MaxSGE, MaxCQE, MaxMR, MaxQP int
	MaxMRSize                                  uint64
	// MaxInline is what a QP was granted when asked for the most of
	// 1024, 512, 256, 128, 64 bytes the device accepted (verbs know it
	// per QP only).
	MaxInline int
}

// InfoOptions say what RDMAInfo reports on.
type InfoOptions struct {
	Sel  Selector // sysfs root, override (Spec), routing
	Addr string   // "" none; else the server's (listen) and client's (dial) choice for it
	// Limits opens a port and returns its verbs limits; nil uses the
	// provider (PortLimitsOf). Tests give a fake.
	Limits func(device string, port int) (PortLimits, error)
	// Fork reports how registered memory survives a fork; nil asks
	// rdma-core (ForkStatus). Tests give a fake.
	Fork func() string
}

// RDMAInfo writes what ibv_devinfo and ucx_info -d would tell, for our
// choices: every device and port with its state, MTU, GID table (type,
// netdev) and limits, the override in force, and the device, port and GID
// a server listening on, and a client dialing, o.Addr would use, and why.
func RDMAInfo(ctx context.Context, w io.Writer, o InfoOptions) error {
	ports, err := o.Sel.Ports()
	if err != nil {
		return err
	}
	if p := os.Getenv("HATRPC_PROVIDER"); p != "" {
		fmt.Fprintf(w, "provider: %s (HATRPC_PROVIDER)\n", p)
	}
	if len(ports) == 0 {
		fmt.Fprintf(w, "no RDMA devices (%s/class/infiniband is empty): lanes use shm, which reaches peers on this host only\n", o.Sel.root())
		return nil
	}
	limits := o.Limits
	if limits == nil {
		limits = PortLimitsOf
	}
	for _, p := range ports {
		node := "unknown"
		if p.NUMANode >= 0 {
			node = strconv.Itoa(p.NUMANode)
		}
		fmt.Fprintf(w, "%s port %d: %s, link layer %s, NUMA node %s\n", p.Device, p.Port, p.State, p.LinkLayer, node)
		if p.State == "ACTIVE" {
			if l, err := limits(p.Device, p.Port); err != nil {
				fmt.Fprintf(w, "  limits: %v\n", err)
			} else {
				fmt.Fprintf(w, "  active MTU %d; max_qp %d, max_qp_wr %d, max_sge %d, max_cqe %d, max_mr %d, max_mr_size %d, max_inline_data %d\n",
					l.MTU, l.MaxQP, l.MaxQPWR, l.MaxSGE, l.MaxCQE, l.MaxMR, l.MaxMRSize, l.MaxInline)
			}
		}
		for _, g := range p.GIDs {
			fmt.Fprintf(w, "  gid %-3d %-39s %-10s %s\n", g.Index, g.GID, g.Type, g.Netdev)
		}
	}
	fork := o.Fork
	if fork == nil {
		fork = ForkStatus
	}
	fmt.Fprintf(w, "fork without exec: %s; os/exec children inherit nothing (close-on-exec)\n", fork())
	if o.Sel.Spec != (RDMASpec{}) {
		fmt.Fprintf(w, "override: %s\n", o.Sel.Spec)
	} else {
		fmt.Fprintf(w, "override: none (%s, %s unset)\n", EnvRDMADevice, EnvRDMAGID)
	}
	if _, ok := o.Sel.NUMA.Node(); ok {
		fmt.Fprintf(w, "handler numa hint: %s (breaks ties among devices that carry the address)\n", o.Sel.NUMA)
	}
	if o.Addr == "" {
		c, err := o.Sel.ForLocal(nil)
		writeChoice(w, "default (no address)", c, err)
		return nil
	}
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		host = o.Addr
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	if ip == nil {
		addrs, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return fmt.Errorf("fastpath: resolve %q: %w", host, errOr(err, fmt.Errorf("no address")))
		}
		ip = addrs[0]
	}
	c, err := o.Sel.Choose(ctx, ip, "")
	writeChoice(w, "server listening on "+o.Addr, c, err)
	if ip.IsUnspecified() {
		fmt.Fprintln(w, "  (each client's lanes use the device that received its TCP connection: its local address is chosen as above)")
	}
	c, err = o.Sel.Choose(ctx, nil, o.Addr)
	writeChoice(w, "client dialing "+o.Addr, c, err)
	return nil
}

func writeChoice(w io.Writer, who string, c RDMAChoice, err error) {
	if err != nil {
		fmt.Fprintf(w, "%s: %v\n", who, err)
		return
	}
	fmt.Fprintf(w, "%s: %s port %d gid %d %s %s %s\n  why: %s\n", who, c.Device, c.Port, c.GIDIndex, c.GID, c.Type, c.Netdev, c.Why)
}
