#!/usr/bin/env bash
# suite.sh - the Go test suites on real kernel verbs: builds each package's
# test binary on the host, boots one Soft-RoCE guest (vm.sh), runs them all
# there with HATRPC_PROVIDER=ibv, and prints a table of tests passed and
# failed per package. Exit status: 0 only if every package passed.
#
#   test/rxe/suite.sh [--two-devices] [-run REGEXP] [PKG...]   (default: $RXE_PKGS below)
#
# --two-devices runs the binaries under twodev.sh: a second rxe device on a
# second netdev (rxe0: 10.0.0.1, fd00::1; rxe1: 10.0.1.1, fd00:1::1).
#
# Tests that apply to one provider only carry "SHMOnly" or "IBVOnly" in their
# names; the table counts them (run, passed or skipped as not applicable).
# No other test may skip.
#
# RXE_COUNT (default 1) runs each test that many times (go test -count):
# a flake seen once in CI, hunted on ibv.
#
# HATRPC_HANG_SCALE (default 6) multiplies the tests' hang guards in the
# guest (test/testenv.HangGuard); deadlines that assert timing do not scale.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

# Everything whose tests touch the fast path. The whole list runs in
# `make test-rdma`; CI runs the same script (see README, "Real verbs").
RXE_PKGS=${RXE_PKGS:-"pkg/rdma"}
run=""
wrap=()
if [[ ${1:-} == --two-devices ]]; then
	wrap=("$root/test/rxe/twodev.sh")
	shift
fi
if [[ ${1:-} == -run ]]; then
	run=$2
	shift 2
fi
(($#)) && RXE_PKGS="$*"

share=$(mktemp -d "${TMPDIR:-/tmp}/hatrpc-rxe-suite.XXXXXX")
trap 'rm -rf "$share"' EXIT
mkdir -p "$share/bin" "$share/logs"
pkgs=()
for p in $RXE_PKGS; do
	name=${p//\//_}
	# In the package's directory: a nested module's package (tpch/bench)
	# builds in its own module.
	(cd "$p" && go test -c -o "$share/bin/$name.test" .)
	[[ -f $share/bin/$name.test ]] && pkgs+=("$p")
done

{
	# Hang guards in the tests (testenv.HangGuard) scale by this in the
	# guest: TCG emulation on a host that may be busy with other work.
	echo "export HATRPC_HANG_SCALE=${HATRPC_HANG_SCALE:-6}"
	echo 'for p in "$@"; do'
	echo '  name=${p//\//_}'
	echo "  cd $(printf %q "$root")/\$p"
	echo "  $(printf %q "$share")/bin/\$name.test -test.v -test.timeout 40m -test.count ${RXE_COUNT:-1} ${run:+-test.run $(printf %q "$run")} >$(printf %q "$share")/logs/\$name.log 2>&1"
	echo "  echo \$? >$(printf %q "$share")/logs/\$name.rc"
	echo "  echo \"rxe: \$p done (exit \$(cat $(printf %q "$share")/logs/\$name.rc))\""
	echo 'done'
} >"$share/run.sh"

status=0
# The guest prints a line per package and each package has its own
# -test.timeout, so a silent console past that is a hung guest; the total
# limit is only a last resort (a loaded host makes the run longer, not
# silent).
"$root/test/rxe/vm.sh" run --share "$share" --timeout "${RXE_TIMEOUT:-10800}" --idle "${RXE_IDLE:-2700}" -- "${wrap[@]}" bash "$share/run.sh" "${pkgs[@]}" || status=$?

printf '\n%-24s %7s %7s %9s  %s\n' package passed failed specific result
fail=0
for p in "${pkgs[@]}"; do
	name=${p//\//_}
	log=$share/logs/$name.log
	rc=$(cat "$share/logs/$name.rc" 2>/dev/null || echo "no status")
	pass=$(grep -c '^--- PASS' "$log" 2>/dev/null || true)
	failed=$(grep -c '^--- FAIL' "$log" 2>/dev/null || true)
	spec=$(grep -cE '^--- (PASS|FAIL|SKIP): Test[A-Za-z0-9_]*(SHMOnly|IBVOnly)' "$log" 2>/dev/null || true)
	res=ok
	[[ $rc == 0 ]] || { res="FAIL ($rc)"; fail=1; }
	printf '%-24s %7s %7s %9s  %s\n' "$p" "$pass" "$failed" "$spec" "$res"
	# The log is kept first: under set -e a step below that fails must not
	# lose it (a package that exited non-zero with no FAIL line once left
	# nothing to read).
	if [[ -n ${RXE_LOGS:-} && -f $log ]]; then
		mkdir -p "$RXE_LOGS"
		cp "$log" "$RXE_LOGS/" # every package's log, passed or not
	fi
	if [[ $rc != 0 && -f $log ]]; then
		# No FAIL, panic or testify line (a crash, a timeout's dump cut
		# short, a failing TestMain): the log's tail says what happened.
		{ grep -E -A3 '^(--- FAIL|    --- FAIL|panic:|fatal error:|SIGABRT|SIGSEGV)|Error Trace:|Error:|Messages:' "$log" || tail -n 30 "$log"; } | head -60 | sed 's/^/    /' || true
	fi
done
((status == 0 && fail == 0)) || exit 1
