#!/usr/bin/env bash
# scale.sh - the fast-path lifecycle at process scale, measured on one
# `hatkv serve`: N separate `hatkv put` processes, then M `hatkv bench`
# clients kill -9'd mid-call, then the server left idle until its idle
# connection workers retire (poolIdle, 30 s). Before and after each step it
# prints what the server holds (issue 17's must-shows):
#
#   fds, memfds (shm segments) and the KiB allocated in them, RSS, threads,
#   goroutines (and of them idle pool workers), QPs and MRs (ibv: `rdma
#   resource show`), FLOCK peers / lanes / connections (its /metrics), and
#   the CPU ticks (user+sys) it used over 3 s.
#
#   test/rxe/scale.sh [--vm] [-n N] [-k M] [-j J] [--transport T]
#
#   --vm           build on the host, run in the Soft-RoCE guest (vm.sh;
#                  HATRPC_PROVIDER=ibv, transport rdma by default)
#   -n N           separate client processes, one `hatkv put` each (1000)
#   -k M           clients killed mid-call (100)
#   -j J           puts running at once (2)
#   --transport T  serve and call with T (default: shm here, rdma in --vm)
#   --idle S       seconds to wait for idle workers to retire (40: poolIdle
#                  30 s + the 5 s sweep)
#
# Take the heavy lock first: flock /tmp/hatrpc-heavy.lock test/rxe/scale.sh ...
# The exit status is non-zero if a put failed or a step did not settle; the
# table is for the operator to compare (tolerances in test/rxe/README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

vm="" n=1000 k=100 j=2 tr="" idle=40 bin=""
while (($#)); do
	case $1 in
	--vm) vm=1; shift ;;
	-n) n=$2; shift 2 ;;
	-k) k=$2; shift 2 ;;
	-j) j=$2; shift 2 ;;
	--transport) tr=$2; shift 2 ;;
	--idle) idle=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;; # internal: a prebuilt hatkv (the guest's run)
	*) echo "scale.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

if [[ -z $bin ]]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/hatrpc-scale.XXXXXX")
	(cd "$root" && go build -o "$work/hatkv" ./cmd/hatkv)
	if [[ -n $vm ]]; then
		# The guest is emulated: no build there; results land in $work.
		# 100 clients of ~40 MB each: more than the guest's default 3 GiB.
		exec "$here/vm.sh" run --share "$work" --timeout "${RXE_TIMEOUT:-2400}" --mem "${RXE_MEM:-8192}" -- \
			bash "$here/scale.sh" --bin "$work/hatkv" -n "$n" -k "$k" -j "$j" \
			--transport "${tr:-rdma}" --idle "$idle"
	fi
	bin=$work/hatkv
fi
tr=${tr:-shm}
work=$(dirname "$bin")
cd "$work"
port=$((20000 + RANDOM % 20000))
addr=127.0.0.1:$port dbg=127.0.0.1:$((port + 1))

# LMDB needs a file system that maps files (not the guest's 9p share).
db=$(mktemp -d /var/tmp/hatrpc-scale-db.XXXXXX)
"$bin" serve --db "$db/db" --listen "$addr" --debug-addr "$dbg" --transport "$tr" \
	--sync nosync --verify meta >"$work/serve.log" 2>&1 &
spid=$!
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
	rm -rf "$db"
}
trap cleanup EXIT
for _ in $(seq 100); do
	grep -q "listening on" "$work/serve.log" && break
	sleep 0.2
done
grep -q "listening on" "$work/serve.log" || { cat "$work/serve.log"; exit 1; }

metric() { curl -s "http://$dbg/metrics" | awk -v m="$1" '$1 == m {print $2; exit}'; }
settled() {
	local i
	for i in $(seq 300); do
		[[ $(metric hatrpc_server_flock_peers) == 0 && $(metric hatrpc_server_lanes) == 0 &&
			$(metric hatrpc_server_connections) == 0 ]] && return 0
		sleep 0.1
	done
	echo "scale: the server still holds peers/lanes/connections after 30 s" >&2
	return 1
}
# verbs objects of the server (ibv; "-" where the rdma tool cannot tell)
verbs() { rdma resource show "$1" 2>/dev/null | grep -c "pid $spid " || true; }
ticks() { awk '{print $14 + $15}' "/proc/$spid/stat"; }
snap() {
	local fds=0 memfds=0 shmkb=0 f t g idlew rss thr qps mrs t0
	for f in /proc/$spid/fd/*; do
		t=$(readlink "$f" 2>/dev/null) || continue
		fds=$((fds + 1))
		if [[ $t == /memfd:hatrpc-shm* ]]; then
			memfds=$((memfds + 1))
			shmkb=$((shmkb + $(stat -L -c '%b * %B / 1024' "$f" 2>/dev/null || echo 0)))
		fi
	done
	rss=$(awk '/^VmRSS/{print $2}' "/proc/$spid/status")
	thr=$(awk '/^Threads/{print $2}' "/proc/$spid/status")
	g=$(curl -s "http://$dbg/debug/pprof/goroutine?debug=1" | awk 'NR==1{print $NF}')
	idlew=$(curl -s "http://$dbg/debug/pprof/goroutine?debug=2" |
		awk 'BEGIN{RS=""} /server\.\(\*pool\)\.loop/ && /\[chan receive/ {n++} END{print n+0}')
	if rdma resource show qp >/dev/null 2>&1; then qps=$(verbs qp) mrs=$(verbs mr); else qps=- mrs=-; fi
	t0=$(ticks)
	sleep 3
	t0=$(($(ticks) - t0)) # before the /metrics scrapes below
	printf '%-22s %5s %6s %8s %8s %5s %6s/%-4s %5s %5s %5s/%s/%s %7s\n' "$1" "$fds" "$memfds" "$shmkb" "$rss" "$thr" \
		"$g" "$idlew" "$qps" "$mrs" "$(metric hatrpc_server_flock_peers)" "$(metric hatrpc_server_lanes)" \
		"$(metric hatrpc_server_connections)" "$t0"
}

status=0
# The records the killed clients read; the first client also opens the
# server's device, so the baseline holds what any server with lanes holds.
"$bin" bench --addr "$addr" -P workloadb -p recordcount=100 --phase load --transport "$tr" \
	--progress off >/dev/null
"$bin" put warm f=v --addr "$addr" --transport "$tr" >/dev/null
settled
echo "scale: $(sed -n 's/.*transport \(.*\), plain.*/\1/p' "$work/serve.log" | head -1); provider ${HATRPC_PROVIDER:-auto}; n=$n k=$k"
printf '%-22s %5s %6s %8s %8s %5s %11s %5s %5s %11s %7s\n' step fds memfds shmKiB rssKiB thr "gor/idle" QPs MRs "peer/ln/cn" ticks3s
snap baseline

start=$(date +%s)
fail=0
for ((i = 0; i < n; i += j)); do
	for ((x = i; x < i + j && x < n; x++)); do
		"$bin" put "k$x" f=v --addr "$addr" --transport "$tr" >/dev/null 2>>"$work/put.err" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || fail=$((fail + 1)); done
	pids=()
	((i % 100 >= 100 - j)) && echo "scale: $((i + j)) puts after $(($(date +%s) - start)) s, $fail failed"
done
echo "scale: $n put processes in $(($(date +%s) - start)) s, $fail failed"
((fail == 0)) || { status=1; head -5 "$work/put.err" >&2; }
settled || status=1
snap "after $n puts"

for ((i = 0; i < k; i++)); do
	# stdin held open by nothing: bench does not read it
	"$bin" bench --addr "$addr" -P workloadb -p recordcount=100 --phase run --duration 10m \
		--threads 1 --progress off --transport "$tr" >/dev/null 2>&1 &
	pids+=($!)
done
for _ in $(seq 3000); do # emulated guests start 100 processes slowly
	[[ $(metric hatrpc_server_flock_peers) == "$k" ]] && break
	sleep 0.1
done
echo "scale: $(metric hatrpc_server_flock_peers) of $k clients attached, calling; kill -9"
sleep 0.5
exec 3>&2 2>/dev/null # bash's "Killed" notices
kill -9 "${pids[@]}" || true
wait "${pids[@]}" || true
exec 2>&3 3>&-
pids=()
settled || status=1
snap "after $k killed"
sleep "$idle"
snap "+${idle}s idle"
"$bin" put after f=v --addr "$addr" --transport "$tr" >/dev/null || status=1
exit $status
