//go:build cgo && linux

package fastpath

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// nodeRoot is where Linux describes the NUMA nodes (a variable for tests).
var nodeRoot = "/sys/devices/system/node"

// Nodes lists the NUMA node ids of this machine.
func Nodes() []int {
	ents, _ := os.ReadDir(nodeRoot)
	var out []int
	for _, e := range ents {
		if id, ok := strings.CutPrefix(e.Name(), "node"); ok {
			if n, err := strconv.Atoi(id); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// nodeCPUs parses the node's cpulist ("0-3,8-11").
func nodeCPUs(node int) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(nodeRoot, fmt.Sprintf("node%d", node), "cpulist"))
	if err != nil {
		return nil, err
	}
	var cpus []int
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		if part == "" {
			continue
		}
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, err
		}
		z := a
		if found {
			if z, err = strconv.Atoi(hi); err != nil {
				return nil, err
			}
		}
		for c := a; c <= z; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// NUMAPlan is what a numa hint means on this machine.
type NUMAPlan struct {
	Node int    // -1: no binding
	CPUs []int  // the node's CPUs
	Note string // why there is no binding, for the log
}

// PlanNUMA resolves a numa hint: a node id binds to that node; nic to the
// node of the device's NIC (shm has none); on a one-node machine every
// hint is a no-op, said once in the log by the caller.
func PlanNUMA(n hints.NUMA, d *Device) NUMAPlan {
	if n == hints.NUMANone {
		return NUMAPlan{Node: -1}
	}
	nodes := Nodes()
	if len(nodes) <= 1 {
		return NUMAPlan{Node: -1, Note: fmt.Sprintf("numa=%s ignored: this machine has %d NUMA node(s)", n, len(nodes))}
	}
	node := int(n) - 1
	if n == hints.NUMANIC {
		node = nicNode(d)
		if node < 0 {
			return NUMAPlan{Node: -1, Note: "numa=nic ignored: the device reports no NUMA node"}
		}
	}
	cpus, err := nodeCPUs(node)
	if err != nil || len(cpus) == 0 {
		return NUMAPlan{Node: -1, Note: fmt.Sprintf("numa=%s ignored: node %d has no CPUs here", n, node)}
	}
	return NUMAPlan{Node: node, CPUs: cpus}
}

// Bind pins the calling goroutine's thread to the plan's CPUs, so a poller
// and the buffers it first touches stay on the node; the returned function
// restores the thread. A plan without a node binds nothing.
func (p NUMAPlan) Bind() (restore func(), err error) {
	if p.Node < 0 {
		return func() {}, nil
	}
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return func() {}, err
	}
	for _, c := range p.CPUs {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return func() {}, err
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}, nil
}

// nicNode is the NUMA node of the device's NIC, -1 when unknown (shm has
// no NIC).
func nicNode(d *Device) int {
	if d == nil || d.Provider() != rdma.ProviderIBV {
		return -1
	}
	info, err := d.Info()
	if err != nil {
		return -1
	}
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", info.Name, "device", "numa_node"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}
