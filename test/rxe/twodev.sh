#!/usr/bin/env bash
# twodev.sh - run inside the Soft-RoCE guest (as vm.sh's command): adds a
# second rxe device so that one guest has two RDMA NICs on two netdevs,
# then runs CMD with HATRPC_RXE_DEVICES naming them.
#
#   test/rxe/vm.sh run -- test/rxe/twodev.sh CMD ARGS...
#
#   rxe0 on dummy0: 10.0.0.1/24 (from init) + fd00::1/64
#   rxe1 on dummy1: 10.0.1.1/24 + fd00:1::1/64
# Each port's GID table then holds the link-local GIDs (v1 and v2), the
# IPv4-mapped ones and the IPv6 ones, each as RoCE v1 and v2.
set -euo pipefail
[[ -e /sys/class/infiniband/rxe0 ]] || { echo "twodev: no rxe0 (run it in the guest: vm.sh run -- $0 ...)" >&2; exit 2; }
ip link add dummy1 type dummy
ip link set dummy1 mtu 4500
ip link set dummy1 up
ip addr add 10.0.1.1/24 dev dummy1
ip -6 addr add fd00::1/64 dev dummy0 nodad
ip -6 addr add fd00:1::1/64 dev dummy1 nodad
rdma link add rxe1 type rxe netdev dummy1
# The port turns ACTIVE and the GID table fills from the netdev's
# addresses asynchronously: wait for both IPv6 GIDs.
for _ in $(seq 100); do
	grep -qs ACTIVE /sys/class/infiniband/rxe1/ports/1/state &&
		grep -qsx 'fd00:0000:0000:0000:0000:0000:0000:0001' /sys/class/infiniband/rxe0/ports/1/gids/* &&
		grep -qsx 'fd00:0001:0000:0000:0000:0000:0000:0001' /sys/class/infiniband/rxe1/ports/1/gids/* && break
	sleep 0.1
done
export HATRPC_RXE_DEVICES="rxe0=10.0.0.1,rxe0=fd00::1,rxe1=10.0.1.1,rxe1=fd00:1::1"
"$@"
