#!/usr/bin/env bash
# CPU time a call, old build against new, natively: each side of an echo
# in its own process as atb-tcp runs them (internal/bench/insn -serve and
# -addr), over a fixed number of calls, each process's task-clock taken by
# `perf stat`; alternated pairs, then medians and how many pairs the new
# build was lower in. Where calls/s on a noisy host cannot resolve a few
# percent, CPU over fixed work often can: it leaves out the time both
# sides wait.
#
#   scripts/cpu-ab.sh OLD [NEW] [-- insn flags]
#   PAIRS=12 SYS=raw-thrift-batch scripts/cpu-ab.sh main
#
# OLD and NEW are git revisions (NEW defaults to the work tree as it is);
# flags go to both sides' driver (default -callers 64 -size 512 -calls
# 6000, calls a caller). Run it under the benchmark lock with nothing else
# measuring: it needs the two CPUs to itself. About 15 s a pair.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: scripts/cpu-ab.sh OLD [NEW] [-- insn flags]}
shift
new=
if [[ $# -gt 0 && $1 != -- ]]; then new=$1; shift; fi
[[ ${1:-} == -- ]] && shift
flags=("-callers" "64" "-size" "512" "-calls" "6000" "$@")
sys=${SYS:-hatrpc}
pairs=${PAIRS:-8}
command -v perf >/dev/null || { echo "cpu-ab: needs perf (apt-get install linux-perf)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'for d in "$tmp"/src-*; do git worktree remove --force "$d" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

# shellcheck source=scripts/insn-build.sh
. scripts/insn-build.sh

# one NAME: prints "server_ms client_ms wall_ns" for one run of the build.
one() {
	local bin=$tmp/insn-$1 addr="" i
	rm -f "$tmp/fifo" "$tmp/addr"
	mkfifo "$tmp/fifo"
	perf stat -x, -e task-clock -o "$tmp/server.stat" "$bin" -sys "$sys" -serve 127.0.0.1:0 <"$tmp/fifo" >"$tmp/addr" 2>"$tmp/server.err" &
	local pid=$!
	exec 3>"$tmp/fifo"
	for ((i = 0; i < 300; i++)); do
		addr=$(head -1 "$tmp/addr" 2>/dev/null || true)
		[[ -n $addr ]] && break
		sleep 0.1
	done
	[[ -n $addr ]] || { echo "cpu-ab: $1: server did not start: $(cat "$tmp/server.err")" >&2; exit 1; }
	local start end
	start=$(date +%s%N)
	perf stat -x, -e task-clock -o "$tmp/client.stat" "$bin" -sys "$sys" -addr "$addr" "${flags[@]}" >/dev/null 2>"$tmp/client.err" ||
		{ cat "$tmp/client.err" >&2; exit 1; }
	end=$(date +%s%N)
	exec 3>&-
	wait "$pid"
	echo "$(awk -F, '/task-clock/ {print $1}' "$tmp/server.stat") $(awk -F, '/task-clock/ {print $1}' "$tmp/client.stat") $((end - start))"
}

insn_build "$tmp" old "$old" native
insn_build "$tmp" new "$new" native
callers=64 calls=6000
for ((i = 0; i < ${#flags[@]}; i++)); do
	[[ ${flags[i]} == -callers ]] && callers=${flags[i + 1]}
	[[ ${flags[i]} == -calls ]] && calls=${flags[i + 1]}
done
for ((p = 1; p <= pairs; p++)); do
	echo "old $(one old)"
	echo "new $(one new)"
done | python3 -c '
import statistics, sys
n = int(sys.argv[1])
runs = {"old": [], "new": []}
for line in sys.stdin:
    name, server, client, wall = line.split()
    us = lambda ms: float(ms) * 1000 / n
    runs[name].append((us(server), us(client), us(server) + us(client), n / (float(wall) / 1e9) / 1000))
    if name == "new":
        o, w = runs["old"][-1], runs["new"][-1]
        print("pair %2d  server %.2f -> %.2f  client %.2f -> %.2f  total %.2f -> %.2f us a call  (%.0fk -> %.0fk calls/s)" % (len(runs["new"]), o[0], w[0], o[1], w[1], o[2], w[2], o[3], w[3]))
for i, what in enumerate(["server", "client", "total"]):
    old = [r[i] for r in runs["old"]]
    new = [r[i] for r in runs["new"]]
    lower = sum(b < a for a, b in zip(old, new))
    print("%-6s median %.2f -> %.2f us a call, new lower in %d of %d pairs" % (what, statistics.median(old), statistics.median(new), lower, len(new)))
' $((callers * calls))
