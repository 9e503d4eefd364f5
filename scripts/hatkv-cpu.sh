#!/usr/bin/env bash
# hatkv-cpu.sh: YCSB throughput and CPU per operation, split into user and
# kernel (sys) time for the client and the server process, over TCP and
# over shm, the transports alternating.
#
# Why the split: on one host loopback TCP costs kernel time only (the
# syscalls and the softirq that carries the bytes), while everything else
# (LMDB, record encoding, the Go scheduler, YCSB itself) is user time that
# every transport pays. So TCP's total over its user time bounds what any
# transport, even a free one, could gain over TCP here (docs/performance/history.md,
# "How far shm can get ahead of TCP on one host").
#
# usage: scripts/hatkv-cpu.sh [rounds]   (env: W workload, T threads,
#        DUR seconds, RECORDS, XP extra -p flags, DB dir, TRANSPORTS)
# It builds hatkv, loads DB if it is empty, then prints one line per run.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
W=${W:-workloadb} T=${T:-64} DUR=${DUR:-5} RECORDS=${RECORDS:-10000}
XP=${XP:-} DB=${DB:-$(mktemp -d)/db} TRANSPORTS=${TRANSPORTS:-tcp shm}
ADDR=127.0.0.1:${PORT:-9297}
bin=$(mktemp -d)/hatkv
go build -o "$bin" ./cmd/hatkv

spid=
stop() { [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; spid=; }
trap stop EXIT
serve() {
	"$bin" serve --db "$DB" --listen "$ADDR" >/dev/null 2>&1 &
	spid=$!
	for _ in $(seq 50); do
		"$bin" stats --addr "$ADDR" >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "hatkv serve did not come up" >&2
	exit 1
}
# ticks USER SYS of a process (clock ticks, /proc/PID/stat fields 14, 15)
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }

if [ ! -e "$DB/data.mdb" ]; then
	mkdir -p "$DB"
	serve
	# shellcheck disable=SC2086
	"$bin" bench --addr "$ADDR" -P "$W" --phase load --threads 8 --transport tcp \
		-p recordcount="$RECORDS" $XP --progress off >/dev/null
	stop
fi

hz=$(getconf CLK_TCK)
for _ in $(seq "$rounds"); do
	for tr in $TRANSPORTS; do
		serve
		read -r su0 ss0 < <(ticks "$spid")
		# shellcheck disable=SC2086
		out=$(/usr/bin/time -f "CPU %U %S" "$bin" bench --addr "$ADDR" -P "$W" --phase run \
			--threads "$T" --duration "${DUR}s" --transport "$tr" \
			-p recordcount="$RECORDS" $XP --progress off 2>&1)
		read -r su1 ss1 < <(ticks "$spid")
		stop
		ops=$(awk '/\[OVERALL\] Throughput/{print $NF}' <<<"$out")
		read -r cu cs < <(awk '/^CPU /{print $2, $3}' <<<"$out")
		awk -v w="$W" -v t="$T" -v tr="$tr" -v ops="$ops" -v d="$DUR" -v hz="$hz" \
			-v cu="$cu" -v cs="$cs" -v su=$((su1 - su0)) -v ss=$((ss1 - ss0)) 'BEGIN {
			n = ops * d; su /= hz; ss /= hz
			f = 1e6 / n
			printf "%s t=%d %-4s %8.0f ops/s | client user %5.1f sys %5.1f | server user %5.1f sys %5.1f | total %5.1f µs/op (user %5.1f, sys %5.1f) | %.2f cores\n",
				w, t, tr, ops, cu*f, cs*f, su*f, ss*f, (cu+cs+su+ss)*f, (cu+su)*f, (cs+ss)*f, (cu+cs+su+ss)/d
		}'
	done
done
