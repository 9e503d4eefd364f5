#!/usr/bin/env bash
# twonode.sh - two Soft-RoCE guests joined by a virtual Ethernet link (QEMU
# dgram sockets on the host's loopback): node A (10.0.0.1) serves, node B
# (10.0.0.2) calls across the link. Runs, in order:
#   1. ibv_rc_pingpong A <-> B (the link and rxe work; latency per iteration)
#   2. examples/echo: server on A, client on B with -rdma ibv (planned
#      protocol, a 1 MiB round trip)
#   3. protonode: every engine protocol, busy and event polling, 0 B to
#      1 MiB, bytes checked (the cross-node half of the conformance suite)
#   4. hatkv: serve --transport rdma on A, bench -P workloadb on B (ops/s,
#      p50/p99; emulated, so correctness rather than speed)
#   5. peer kill: the server process is killed -9 in the middle of a bench;
#      the bench's calls fail within a bounded time; the server restarts and
#      calls work again.
#   6. guest kill: node A's whole VM is killed mid-bench (no FIN or RST from
#      its kernel: only the QPs' transport retries notice); the bench still
#      ends on time; a new node A boots and serves, and calls work again.
# Results and a summary land in $RXE_OUT (default: a temporary directory,
# printed at the end). Exit status 0 only if every step passed.
#
# twonode.sh --two-links runs instead two nodes with two links each (two
# QEMU dgram links; rxe0 on eth0, 10.0.0.0/24, rxe1 on eth1, 10.0.1.0/24):
#   A: hatrpc rdma-info for each of its addresses, TestTwoDevicesIBVOnly
#      (a server on each address opens the device that carries it), then
#      hatkv serve on 0.0.0.0 over rdma;
#   B: hatrpc rdma-info for each of A's addresses, TestTwoNodesIBVOnly (a
#      client to each of A's addresses leaves from the device on that
#      link, with its own address's RoCE v2 GID), then hatkv put/get to
#      each of A's addresses over rdma;
#   and A's server log names rxe0 for the client that came in on 10.0.0.1
#   and rxe1 for the one on 10.0.1.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${RXE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/hatrpc-rxe-2node.XXXXXX")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.flag "$out"/*.txt "$out"/*.json
freeport() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
link() { echo "dgram,local.type=inet,local.host=127.0.0.1,local.port=$1,remote.type=inet,remote.host=127.0.0.1,remote.port=$2"; }
if [[ ${1:-} == --two-links ]]; then
	exec test/rxe/twolinks.sh "$out"
fi
go build -o "$out/hatkv" ./cmd/hatkv
go build -o "$out/echo-server" ./examples/echo/server
go build -o "$out/echo-client" ./examples/echo/client
go build -o "$out/protonode" ./test/rxe/protonode

pa=$(freeport)
pb=$(freeport)

cat >"$out/node-a.sh" <<EOS
set -u
S=$out
waitfor() { for i in \$(seq 6000); do [[ -e \$S/\$1.flag ]] && return 0; sleep 0.1; done; return 1; }
ibv_rc_pingpong -d rxe0 -g 1 -n 200 -s 64 >\$S/pingpong-server.txt 2>&1
\$S/protonode -listen 10.0.0.1:7100 >\$S/protonode-server.txt 2>&1 &
pn=\$!
\$S/echo-server -addr 10.0.0.1:7000 -rdma ibv >\$S/echo-server.txt 2>&1 &
e=\$!
waitfor echo-done; kill \$e; wait \$e
serve() { \$S/hatkv serve --db /tmp/kv --listen 10.0.0.1:9090 --transport rdma --shutdown-timeout 5s >>\$S/serve.txt 2>&1 & echo \$! >\$S/serve.pid; }
serve
waitfor kill-now
kill -9 \$(cat \$S/serve.pid)
date +%s.%N >\$S/killed-at.txt
touch \$S/killed.flag
waitfor restart-now
serve
# Served until the host kills this whole VM (step 6).
sleep 1200
EOS

cat >"$out/node-a2.sh" <<EOS
set -u
S=$out
\$S/hatkv serve --db /tmp/kv --listen 10.0.0.1:9090 --transport rdma --shutdown-timeout 5s >\$S/serve2.txt 2>&1 &
p=\$!
for i in \$(seq 6000); do [[ -e \$S/all-done.flag ]] && break; sleep 0.1; done
kill -INT \$p
wait \$p
EOS

cat >"$out/node-b.sh" <<EOS
set -u
S=$out
ok=0
for i in \$(seq 60); do
	if ibv_rc_pingpong -d rxe0 -g 1 -n 200 -s 64 10.0.0.1 >\$S/pingpong-client.txt 2>&1; then ok=1; break; fi
	sleep 0.5
done
echo "pingpong \$ok" >\$S/steps.txt
for i in \$(seq 60); do
	\$S/echo-client -addr 10.0.0.1:7000 -msg across -rdma ibv >\$S/echo-client.txt 2>&1 && break
	sleep 0.5
done
grep -q "echoBytes: 1048576 bytes round trip ok" \$S/echo-client.txt && echo "echo 1" >>\$S/steps.txt || echo "echo 0" >>\$S/steps.txt
touch \$S/echo-done.flag
\$S/protonode -connect 10.0.0.1:7100 >\$S/protonode.txt 2>&1 && echo "protonode 1" >>\$S/steps.txt || echo "protonode 0" >>\$S/steps.txt
for i in \$(seq 120); do \$S/hatkv put probe f=1 --addr 10.0.0.1:9090 --transport rdma >/dev/null 2>&1 && break; sleep 0.5; done
\$S/hatkv bench -P workloadb --threads 8 --duration 20s -p recordcount=2000 --addr 10.0.0.1:9090 --transport rdma --progress off --json \$S/bench-b.json >\$S/bench-b.txt 2>&1 && echo "bench 1" >>\$S/steps.txt || echo "bench 0" >>\$S/steps.txt
# Peer kill: a bench runs; 8 s in, the server is killed -9.
\$S/hatkv bench -P workloadb --threads 8 --duration 30s --phase run -p recordcount=2000 --addr 10.0.0.1:9090 --transport rdma --progress off >\$S/bench-kill.txt 2>&1 &
b=\$!
sleep 8
touch \$S/kill-now.flag
for i in \$(seq 100); do [[ -e \$S/killed.flag ]] && break; sleep 0.1; done
wait \$b
echo "\$? \$(date +%s.%N)" >\$S/bench-kill-exit.txt
touch \$S/restart-now.flag
t0=\$(date +%s.%N)
rec=0
for i in \$(seq 120); do
	if \$S/hatkv get probe --addr 10.0.0.1:9090 --transport rdma >\$S/after-restart.txt 2>&1; then rec=1; break; fi
	sleep 0.5
done
echo "\$rec \$t0 \$(date +%s.%N)" >\$S/recovered.txt
# Guest kill: 8 s into a 30 s bench the host kills node A's VM.
start=\$(date +%s.%N)
timeout 180 \$S/hatkv bench -P workloadb --threads 8 --duration 30s --phase run -p recordcount=2000 --addr 10.0.0.1:9090 --transport rdma --progress off >\$S/bench-vmkill.txt 2>&1 &
b=\$!
sleep 8
date +%s.%N >\$S/vmkill-at.txt
touch \$S/vmkill-now.flag
wait \$b
echo "\$? \$start \$(date +%s.%N)" >\$S/bench-vmkill-exit.txt
t0=\$(date +%s.%N)
rec=0
for i in \$(seq 300); do
	if timeout 20 \$S/hatkv put probe2 f=1 --addr 10.0.0.1:9090 --transport rdma >\$S/after-vm.txt 2>&1; then rec=1; break; fi
	sleep 1
done
echo "\$rec \$t0 \$(date +%s.%N)" >\$S/vm-recovered.txt
touch \$S/all-done.flag
EOS

set +e
test/rxe/vm.sh run --name node-a --ip 10.0.0.1/24 --net "$(link "$pa" "$pb")" --share "$out" --timeout 1500 -- bash "$out/node-a.sh" >"$out/node-a.log" 2>&1 &
a=$!
test/rxe/vm.sh run --name node-b --ip 10.0.0.2/24 --net "$(link "$pb" "$pa")" --share "$out" --timeout 1500 -- bash "$out/node-b.sh" >"$out/node-b.log" 2>&1 &
b=$!
# Step 6: kill node A's VM when B asks, then boot a new node A.
while kill -0 $b 2>/dev/null && [[ ! -e $out/vmkill-now.flag ]]; do sleep 0.2; done
a2=""
if [[ -e $out/vmkill-now.flag ]]; then
	pkill -9 -f "qemu-system-x86_64 -name node-a " || true
	wait $a
	test/rxe/vm.sh run --name node-a2 --ip 10.0.0.1/24 --net "$(link "$pa" "$pb")" --share "$out" --timeout 900 -- bash "$out/node-a2.sh" >"$out/node-a2.log" 2>&1 &
	a2=$!
fi
wait $b
rb=$?
ra=killed
if [[ -n $a2 ]]; then
	wait $a2
	ra=$?
else
	wait $a
	ra=$?
fi
set -e
echo "node A (after its VM was replaced) exit $ra, node B exit $rb; results in $out"
cat "$out/steps.txt" 2>/dev/null
grep -h "iters in" "$out"/pingpong-*.txt 2>/dev/null
grep -h "plan\|round trip" "$out/echo-client.txt" 2>/dev/null
cat "$out/protonode.txt" 2>/dev/null
grep -hiE "throughput|ops/s|p50|p99|READ|UPDATE" "$out/bench-b.txt" 2>/dev/null | head -12
echo "--- peer kill"; cat "$out/killed-at.txt" "$out/bench-kill-exit.txt" "$out/recovered.txt" 2>/dev/null
tail -5 "$out/bench-kill.txt" 2>/dev/null
echo "--- guest kill"; cat "$out/vmkill-at.txt" "$out/bench-vmkill-exit.txt" "$out/vm-recovered.txt" 2>/dev/null
tail -5 "$out/bench-vmkill.txt" 2>/dev/null
grep -q "pingpong 1" "$out/steps.txt" && grep -q "echo 1" "$out/steps.txt" && grep -q "protonode 1" "$out/steps.txt" &&
	grep -q "bench 1" "$out/steps.txt" &&
	[[ $(cut -d' ' -f1 "$out/recovered.txt" 2>/dev/null) == 1 ]] &&
	[[ $(cut -d' ' -f1 "$out/bench-vmkill-exit.txt" 2>/dev/null) != 124 ]] &&
	[[ $(cut -d' ' -f1 "$out/vm-recovered.txt" 2>/dev/null) == 1 ]]
