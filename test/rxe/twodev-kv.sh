#!/usr/bin/env bash
# twodev-kv.sh BIN - in the two-device guest (twodev.sh): the diagnostic for
# each address, a hatkv server on each rxe device's address, RDMA puts and
# gets to each, and a wrong --rdma-device refused with the list of devices.
# BIN holds hatkv and hatrpc built on the host.
#
#   test/rxe/vm.sh run -- test/rxe/twodev.sh test/rxe/twodev-kv.sh BIN
set -euo pipefail
B=$1
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$tmp"' EXIT
for a in 10.0.0.1 10.0.1.1 '[fd00:1::1]' 0.0.0.0; do
	echo "=== hatrpc rdma-info --addr $a:9090"
	"$B/hatrpc" rdma-info --addr "$a:9090"
done
i=0
for a in 10.0.0.1 10.0.1.1; do
	"$B/hatkv" serve --db "$tmp/db$i" --listen "$a:9090" --transport rdma --verify meta >"$tmp/serve$i.log" 2>&1 &
	pids+=($!)
	i=$((i + 1))
done
fail=0
i=0
for a in 10.0.0.1 10.0.1.1; do
	ok=""
	for _ in $(seq 120); do
		"$B/hatkv" put "k$i" "f=on-$a" --addr "$a:9090" --transport rdma >/dev/null 2>&1 && { ok=1; break; }
		sleep 0.5
	done
	[[ -n $ok ]] || { echo "put to $a failed"; cat "$tmp/serve$i.log"; fail=1; }
	echo "=== get k$i from $a over rdma: $("$B/hatkv" get "k$i" --addr "$a:9090" --transport rdma 2>&1 | tr '\n' ' ')"
	echo "=== server on $a:"
	grep -o 'lanes enabled.*' "$tmp/serve$i.log" || { echo "no lanes logged"; fail=1; }
	i=$((i + 1))
done
# One server on 0.0.0.0: each client's lanes on the device that received
# its connection.
"$B/hatkv" serve --db "$tmp/dbany" --listen 0.0.0.0:9092 --transport rdma --verify meta >"$tmp/serveany.log" 2>&1 &
pids+=($!)
for a in 10.0.0.1 10.0.1.1; do
	ok=""
	for _ in $(seq 120); do
		"$B/hatkv" put "any-$a" "f=$a" --addr "$a:9092" --transport rdma >/dev/null 2>&1 && { ok=1; break; }
		sleep 0.5
	done
	[[ -n $ok ]] || { echo "put to $a:9092 failed: $("$B/hatkv" put "any-$a" "f=$a" --addr "$a:9092" --transport rdma 2>&1)"; fail=1; }
	echo "=== get any-$a from $a:9092 over rdma: $("$B/hatkv" get "any-$a" --addr "$a:9092" --transport rdma 2>&1 | tr '\n' ' ')"
done
echo "=== server on 0.0.0.0:9092:"
grep -o 'lanes enabled.*' "$tmp/serveany.log" || { echo "no lanes logged"; fail=1; }
grep -E 'level=(WARN|ERROR)' "$tmp/serveany.log" || true
for want in 'local=10.0.0.1 device=rxe0' 'local=10.0.1.1 device=rxe1'; do
	grep -q "$want" "$tmp/serveany.log" || { echo "0.0.0.0: no lane with $want"; fail=1; }
done
echo "=== wrong override: hatkv put --rdma-device mlx5_9"
if "$B/hatkv" put k f=v --addr 10.0.0.1:9090 --transport rdma --rdma-device mlx5_9 2>&1; then
	echo "a wrong --rdma-device was accepted"
	fail=1
fi
exit $fail
