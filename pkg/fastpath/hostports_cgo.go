//go:build cgo && linux

package fastpath

import (
	"net"
	"path/filepath"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

func init() { readHostPorts = verbsPorts }

// verbsPorts reads the host's ports through verbs (rdma.VerbsPorts),
// naming each GID's netdev; where verbs fail (a device this user may not
// open, say) sysfs still answers.
func verbsPorts() ([]RDMAPort, error) {
	vps, err := rdma.VerbsPorts()
	if err != nil {
		return readPorts("/sys")
	}
	names := map[int]string{}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			names[i.Index] = i.Name
		}
	}
	out := make([]RDMAPort, 0, len(vps))
	for _, vp := range vps {
		p := RDMAPort{Device: vp.Device, Port: vp.Port, State: vp.State, LinkLayer: vp.LinkLayer,
			NUMANode: numaNodeOf(filepath.Join("/sys", "class", "infiniband", vp.Device))}
		for _, g := range vp.GIDs {
			if g.GID.IsUnspecified() {
				continue
			}
			e := GIDEntry{Index: g.Index, GID: g.GID, Type: GIDTypeV1, Netdev: names[g.Ifindex]}
			if g.RoCEv2 {
				e.Type = GIDTypeV2
			}
			p.GIDs = append(p.GIDs, e)
		}
		out = append(out, p)
	}
	sortPorts(out)
	return out, nil
}
