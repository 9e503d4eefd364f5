package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

func newRDMAInfoCmd() *cobra.Command {
	var addr, device, gid, sysfs, numa string
	cmd := &cobra.Command{
		Use:   "rdma-info [--addr ADDR] [--numa NODE]",
		Short: "Show RDMA devices, ports, GID tables and limits, and which device/port/GID lanes would use for ADDR",
		Long: `rdma-info prints every RDMA device and port (state, link layer, active MTU,
the verbs limits: max_qp, max_qp_wr, max_sge, max_cqe, max_mr, max_mr_size,
max_inline_data) with its GID table (index, GID, RoCE v1/v2, netdev), the
override in force (--rdma-device/--rdma-gid, else $HATRPC_RDMA_DEVICE and
$HATRPC_RDMA_GID), and, for --addr, the device, port and GID a server
listening on ADDR and a client dialing ADDR would choose, with the reason.
--numa NODE is a handler's numa hint: where several devices carry ADDR
equally, the one on that NUMA node (sysfs device/numa_node) is chosen.
It also says how registered memory survives a fork() without exec
(rdma-core's ibv_is_fork_initialized). On a host without RDMA devices it
says so: lanes use shm there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sp, err := fastpath.RDMASpecFromEnv(device, gid)
			if err != nil {
				return err
			}
			n, err := hints.ParseNUMA(numa)
			if err != nil {
				return fmt.Errorf("--numa: %w", err)
			}
			return fastpath.RDMAInfo(cmd.Context(), cmd.OutOrStdout(), fastpath.InfoOptions{
				Sel: fastpath.Selector{Root: sysfs, Spec: sp, NUMA: n}, Addr: addr})
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "", "an address to show the server's (listen) and client's (dial) choice for, e.g. 10.0.0.1:9090")
	f.StringVar(&device, "rdma-device", "", "device[:port] override, as server.WithRDMADevice and hatkv --rdma-device")
	f.StringVar(&gid, "rdma-gid", "", "GID override: auto, v2 or an index")
	f.StringVar(&sysfs, "sysfs", "/sys", "sysfs root to read")
	f.StringVar(&numa, "numa", "none", "the handler's numa hint (a node id, nic or none): among devices that carry ADDR, prefer the one on that node")
	return cmd
}
