package rdma

/*
#include "hr.h"
*/
import "C"

import (
	"net"
	"unsafe"
)

// VerbsPort is one port of a verbs device with its valid GID entries, as
// the kernel's GID table holds them.
type VerbsPort struct {
	Device    string
	Port      int
	State     string // ACTIVE, DOWN, INIT, ARMED, ACTIVE_DEFER (sysfs's words)
	LinkLayer string // Ethernet or InfiniBand
	GIDs      []VerbsGID
}

// VerbsGID is one valid GID table entry.
type VerbsGID struct {
	Index   int
	GID     net.IP
	RoCEv2  bool // RoCE v2; otherwise IB or RoCE v1
	Ifindex int  // its netdev's interface index; 0 on InfiniBand
}

var portStates = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// VerbsPorts lists every port of every verbs device (the ibv provider's
// devices, whatever HATRPC_PROVIDER says) with its GID table: one query
// per device, where sysfs takes three file reads per table slot. No
// device: an empty list.
func VerbsPorts() ([]VerbsPort, error) {
	maxPorts, maxGIDs := 16, 1024
	for {
		ports := make([]C.hr_port_row, maxPorts)
		gids := make([]C.hr_gid_row, maxGIDs)
		var np, ng C.int
		st := C.hr_ibv_ports_read(&ports[0], C.int(maxPorts), &np, &gids[0], C.int(maxGIDs), &ng)
		if st == C.HR_ENORES && maxGIDs < 1<<20 {
			maxPorts, maxGIDs = 4*maxPorts, 4*maxGIDs
			continue
		}
		if err := statusErr("list verbs ports", st); err != nil {
			return nil, err
		}
		out := make([]VerbsPort, int(np))
		for i := range out {
			r := &ports[i]
			p := VerbsPort{Device: C.GoString(&r.dev[0]), Port: int(r.port), LinkLayer: "InfiniBand"}
			if int(r.state) < len(portStates) {
				p.State = portStates[r.state]
			}
			if r.link_layer == C.uint32_t(linkLayerEthernet) {
				p.LinkLayer = "Ethernet"
			}
			out[i] = p
		}
		for _, g := range gids[:int(ng)] {
			raw := C.GoBytes(unsafe.Pointer(&g.gid[0]), 16)
			p := &out[g.port_row]
			p.GIDs = append(p.GIDs, VerbsGID{Index: int(g.index), GID: net.IP(raw), RoCEv2: g._type == 2, Ifindex: int(g.ifindex)})
		}
		return out, nil
	}
}

// linkLayerEthernet is IBV_LINK_LAYER_ETHERNET.
const linkLayerEthernet = 2
