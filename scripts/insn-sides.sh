#!/usr/bin/env bash
# Code a call, side by side: each side of an atb system's 64-caller echo
# counted alone under callgrind with its cache simulation, the other side
# running natively in its own process, as in atb-tcp. Per side: user-space
# instructions a call, simulated level-1 instruction-cache misses a call
# (32 KiB, 8-way, as this host's), and the code a call touches (64-byte
# lines run at least once a call, scripts/insn-lines.py). A side whose
# code a call, with the runtime's, outgrows the cache misses on most of
# it every call; one that fits hardly misses.
#
#   scripts/insn-sides.sh [SYSTEM...] [-- insn flags]
#   TOP=30 scripts/insn-sides.sh hatrpc   # and the 30 functions with the most of that code
#
# SYSTEMs default to hatrpc and raw-thrift-batch. The work tree is built
# as scripts/insn-ab.sh builds it (inline-call limits raised, GOGC=off).
# About a minute a side and system.
set -euo pipefail
cd "$(dirname "$0")/.."
systems=()
while [[ $# -gt 0 && $1 != -- ]]; do systems+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
[[ ${#systems[@]} -gt 0 ]] || systems=(hatrpc raw-thrift-batch)
flags=("-callers" "64" "$@")
command -v valgrind >/dev/null || { echo "insn-sides: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=scripts/insn-build.sh
. scripts/insn-build.sh
insn_build "$tmp" work

export GOGC=off GODEBUG=asyncpreemptoff=1
vg() { # out cmd...
	local out=$1
	shift
	valgrind --tool=callgrind --cache-sim=yes --dump-instr=yes --callgrind-out-file="$out" "$@"
}

# one SYS SIDE N: the server on a free port until its standard input
# ends (a signal would trip callgrind), one side under callgrind.
one() {
	local sys=$1 side=$2 n=$3 out=$tmp/$1.$2.$3.out addr i
	rm -f "$tmp/fifo" "$tmp/addr"
	mkfifo "$tmp/fifo"
	if [[ $side == server ]]; then
		vg "$out" "$tmp/insn-work" -sys "$sys" -serve 127.0.0.1:0 <"$tmp/fifo" >"$tmp/addr" 2>"$tmp/server.err" &
	else
		"$tmp/insn-work" -sys "$sys" -serve 127.0.0.1:0 <"$tmp/fifo" >"$tmp/addr" 2>"$tmp/server.err" &
	fi
	local pid=$!
	exec 3>"$tmp/fifo"
	for ((i = 0; i < 300; i++)); do
		addr=$(head -1 "$tmp/addr" 2>/dev/null || true)
		[[ -n $addr ]] && break
		sleep 0.2
	done
	[[ -n $addr ]] || { echo "insn-sides: $sys server did not start: $(cat "$tmp/server.err")" >&2; exit 1; }
	if [[ $side == server ]]; then
		"$tmp/insn-work" -sys "$sys" -addr "$addr" -calls "$n" "${flags[@]}"
	else
		vg "$out" "$tmp/insn-work" -sys "$sys" -addr "$addr" -calls "$n" "${flags[@]}" 2>"$tmp/client.err" ||
			{ cat "$tmp/client.err" >&2; exit 1; }
	fi
	exec 3>&-
	wait "$pid"
}

callers=64
for ((i = 0; i < ${#flags[@]}; i++)); do [[ ${flags[i]} == -callers ]] && callers=${flags[i + 1]}; done
for sys in "${systems[@]}"; do
	for side in server client; do
		one "$sys" "$side" 300
		one "$sys" "$side" 900
		printf '%-18s %-6s ' "$sys" "$side"
		python3 scripts/insn-lines.py "$tmp/$sys.$side.300.out" "$tmp/$sys.$side.900.out" $((600 * callers)) ${TOP:+"$TOP"}
	done
done
