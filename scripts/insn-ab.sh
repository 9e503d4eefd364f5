#!/usr/bin/env bash
# Instructions a call, old build against new, counted by callgrind: the
# user-space instructions of a 64-caller echo (client and server in one
# process), which stay put on a loaded host where CPU time a call moves by
# more than a change is worth. Same input, same count: repeat runs agree
# within ~0.3 %.
#
#   scripts/insn-ab.sh OLD [NEW] [-- insn flags]
#
# OLD and NEW are git revisions (NEW defaults to the work tree as it is).
# Each build runs internal/bench/insn twice (300 and 900 calls a caller)
# and the difference is divided by the extra calls, so setup cancels.
# The measured builds are patched alike: the server's inline-call limits
# (quickCall, inlineBudget) are raised 1000x, since under callgrind every
# call looks slow and would be handed to another goroutine, which a
# native run does not do. GOGC=off keeps the collector's background
# sweeper, whose yields follow wall-clock timing, out of the count
# (allocations still count, in malloc).
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: scripts/insn-ab.sh OLD [NEW] [-- insn flags]}
shift
new=
if [[ $# -gt 0 && $1 != -- ]]; then new=$1; shift; fi
[[ ${1:-} == -- ]] && shift
flags=("-callers" "64" "$@")
command -v valgrind >/dev/null || { echo "insn-ab: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'for d in "$tmp"/src-*; do git worktree remove --force "$d" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

# shellcheck source=scripts/insn-build.sh
. scripts/insn-build.sh

count() { # name
	local n
	for n in 300 900; do
		GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind \
			--callgrind-out-file="$tmp/$1.$n.out" "$tmp/insn-$1" -calls "$n" "${flags[@]}" >/dev/null 2>&1
	done
	local callers=64 i
	for ((i = 0; i < ${#flags[@]}; i++)); do [[ ${flags[i]} == -callers ]] && callers=${flags[i + 1]}; done
	echo "== $1"
	python3 scripts/insn-per-call.py "$tmp/$1.300.out" "$tmp/$1.900.out" $((600 * callers)) "${TOP:-15}"
}

insn_build "$tmp" old "$old"
insn_build "$tmp" new "$new"
count old
count new
