#!/usr/bin/env bash
# twolinks.sh OUT - two Soft-RoCE guests with two links each; run it as
# `test/rxe/twonode.sh --two-links` (which passes its results directory).
# Each guest gets eth0 (rxe0, from init) and eth1 (rxe1, set up here by
# link1.sh), each link a pair of QEMU dgram sockets on the host's loopback:
#   node A: 10.0.0.1 on eth0, 10.0.1.1 on eth1
#   node B: 10.0.0.2 on eth0, 10.0.1.2 on eth1
# Exit status 0 only if every step passed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$1
go build -o "$out/hatkv" ./cmd/hatkv
go build -o "$out/hatrpc" ./cmd/hatrpc
go test -c -o "$out/fastpath.test" ./pkg/fastpath

freeport() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
link() { echo "dgram,local.type=inet,local.host=127.0.0.1,local.port=$1,remote.type=inet,remote.host=127.0.0.1,remote.port=$2"; }
a0=$(freeport) b0=$(freeport) a1=$(freeport) b1=$(freeport)

cat >"$out/link1.sh" <<'EOS'
# link1.sh ADDR: eth1 up with ADDR/24 and rxe1 on it, ACTIVE with ADDR's GID.
set -eu
ip link set eth1 mtu 4500
ip link set eth1 up
ip addr add "$1/24" dev eth1
rdma link add rxe1 type rxe netdev eth1
gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo "$1" | tr . ' '))
for _ in $(seq 300); do
	grep -qs ACTIVE /sys/class/infiniband/rxe1/ports/1/state &&
		grep -qsx "$gid" /sys/class/infiniband/rxe1/ports/1/gids/* && exit 0
	sleep 0.1
done
echo "link1: rxe1 on eth1 ($1) did not come up" >&2
exit 1
EOS

cat >"$out/node-a.sh" <<'EOS'
set -u
S=$1 R=$2
waitfor() { for _ in $(seq 6000); do [[ -e $S/$1.flag ]] && return 0; sleep 0.1; done; return 1; }
if ! bash "$S/link1.sh" 10.0.1.1 >"$S/a-link1.txt" 2>&1; then
	echo "a-link 0" >>"$S/steps.txt"
	touch "$S/a-ready.flag"
	exit 1
fi
for a in 10.0.0.1 10.0.1.1; do "$S/hatrpc" rdma-info --addr "$a:9090" >"$S/a-info-$a.txt" 2>&1; done
(cd "$R/pkg/fastpath" && HATRPC_RXE_DEVICES=rxe0=10.0.0.1,rxe1=10.0.1.1 "$S/fastpath.test" -test.v -test.run '^TestTwoDevicesIBVOnly$') >"$S/a-test.txt" 2>&1 && ok=1 || ok=0
echo "a-test $ok" >>"$S/steps.txt"
"$S/hatkv" serve --db /tmp/kv --listen 0.0.0.0:9090 --transport rdma --verify meta >"$S/a-serve.txt" 2>&1 &
p=$!
touch "$S/a-ready.flag"
waitfor b-done
kill -INT $p
wait $p
EOS

cat >"$out/node-b.sh" <<'EOS'
set -u
S=$1 R=$2
waitfor() { for _ in $(seq 6000); do [[ -e $S/$1.flag ]] && return 0; sleep 0.1; done; return 1; }
trap 'touch "$S/b-done.flag"' EXIT
bash "$S/link1.sh" 10.0.1.2 >"$S/b-link1.txt" 2>&1 || { echo "b-link 0" >>"$S/steps.txt"; exit 1; }
waitfor a-ready
for a in 10.0.0.1 10.0.1.1; do "$S/hatrpc" rdma-info --addr "$a:9090" >"$S/b-info-$a.txt" 2>&1; done
(cd "$R/pkg/fastpath" && HATRPC_RXE_ROUTES=rxe0=10.0.0.1,rxe1=10.0.1.1 "$S/fastpath.test" -test.v -test.run '^TestTwoNodesIBVOnly$') >"$S/b-test.txt" 2>&1 && ok=1 || ok=0
echo "b-test $ok" >>"$S/steps.txt"
for a in 10.0.0.1 10.0.1.1; do
	ok=0
	for _ in $(seq 120); do
		"$S/hatkv" put "k-$a" "f=via-$a" --addr "$a:9090" --transport rdma >/dev/null 2>>"$S/b-kv.txt" && { ok=1; break; }
		sleep 0.5
	done
	got=$("$S/hatkv" get "k-$a" --addr "$a:9090" --transport rdma 2>&1)
	echo "get k-$a from $a: $got" >>"$S/b-kv.txt"
	[[ $ok == 1 && $got == *"via-$a"* ]] && echo "kv-$a 1" >>"$S/steps.txt" || echo "kv-$a 0" >>"$S/steps.txt"
done
EOS

set +e
test/rxe/vm.sh run --name node-a --ip 10.0.0.1/24 --net "$(link "$a0" "$b0")" --net2 "$(link "$a1" "$b1")" --share "$out" --timeout 1500 -- bash "$out/node-a.sh" "$out" "$root" >"$out/node-a.log" 2>&1 &
a=$!
test/rxe/vm.sh run --name node-b --ip 10.0.0.2/24 --net "$(link "$b0" "$a0")" --net2 "$(link "$b1" "$a1")" --share "$out" --timeout 1500 -- bash "$out/node-b.sh" "$out" "$root" >"$out/node-b.log" 2>&1 &
b=$!
wait $b
rb=$?
wait $a
ra=$?
set -e
echo "node A exit $ra, node B exit $rb; results in $out"
cat "$out/steps.txt" 2>/dev/null
for f in a-info-10.0.1.1 b-info-10.0.1.1; do echo "=== $f"; cat "$out/$f.txt" 2>/dev/null; done
echo "=== the address -> device table (server on A, client on B)"
grep -hE '^\s+rdmavm_test.go:[0-9]+: (side|server|client) ' "$out/a-test.txt" "$out/b-test.txt" 2>/dev/null
echo "=== A's server"
grep -o 'lanes enabled.*' "$out/a-serve.txt" 2>/dev/null
cat "$out/b-kv.txt" 2>/dev/null
fail=0
for step in a-test b-test kv-10.0.0.1 kv-10.0.1.1; do
	grep -qx "$step 1" "$out/steps.txt" 2>/dev/null || { echo "FAILED: $step"; fail=1; }
done
for want in 'local=10.0.0.1 device=rxe0' 'local=10.0.1.1 device=rxe1'; do
	grep -q "$want" "$out/a-serve.txt" 2>/dev/null || { echo "FAILED: A's server has no lane with $want"; fail=1; }
done
grep -q 'client dialing 10.0.0.1:9090: rxe0 port 1' "$out/b-info-10.0.0.1.txt" 2>/dev/null || { echo "FAILED: B's rdma-info for 10.0.0.1"; fail=1; }
grep -q 'client dialing 10.0.1.1:9090: rxe1 port 1' "$out/b-info-10.0.1.1.txt" 2>/dev/null || { echo "FAILED: B's rdma-info for 10.0.1.1"; fail=1; }
exit $fail
