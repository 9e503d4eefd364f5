#!/usr/bin/env bash
# What the host did inside each slow call of an atb latency run: atb
# stamps every call over 5 µs on CLOCK_MONOTONIC (-stamps) while `perf
# record -a -k mono` traces the whole host (scheduler switches with call
# chains, wake-ups, timer interrupts, IPIs, softirqs, page faults), then
# `atb -role tail` lines them up: per system, the slow calls by what ran
# or fired on the CPUs while they waited, in three bands of length, each
# per millisecond of calls. "nothing the guest saw" is time no event of
# the guest's accounts for (on a VM, the hypervisor's).
#
#   sudo scripts/tail-trace.sh                 # the defaults below
#   sudo scripts/tail-trace.sh -systems hatrpc-lanes,floor-shm+800ns -reps 5 -calls 20000
#
# Needs perf (linux-perf) and root, or perf_event_paranoid <= -1; the
# tracepoints are x86's. The arguments go to atb (latency only: give no
# -tput-sizes). Take it under flock /work/wt/bench.lock like any run.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "tail-trace: needs perf (apt-get install linux-perf)" >&2; exit 1; }
[[ $# -gt 0 ]] || set -- -systems hatrpc-lanes,shm-direct_write_imm,floor-shm,floor-shm+800ns -lat-sizes 64 -reps 3 -calls 100000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/atb" ./cmd/atb
export HATRPC_PROVIDER=${HATRPC_PROVIDER:-shm}
events=(-e 'sched:sched_switch/call-graph=fp/' -e sched:sched_wakeup
	-e irq_vectors:local_timer_entry -e irq_vectors:call_function_entry
	-e irq_vectors:call_function_single_entry -e irq_vectors:reschedule_entry
	-e irq:softirq_entry -e exceptions:page_fault_user -e exceptions:page_fault_kernel)
perf record -q -a -k mono "${events[@]}" -o "$tmp/perf.data" -- \
	"$tmp/atb" -out "$tmp/out" -tput-sizes "" -stamps "$tmp/stamps" "$@" 2>"$tmp/atb.log" ||
	{ cat "$tmp/atb.log" >&2; exit 1; }
grep -E '^latency' "$tmp/atb.log" || true
perf script -i "$tmp/perf.data" --ns -F comm,pid,tid,cpu,time,event,trace,ip,sym >"$tmp/perf.txt" 2>/dev/null
"$tmp/atb" -role tail -stamps "$tmp/stamps" -perf-script "$tmp/perf.txt"
