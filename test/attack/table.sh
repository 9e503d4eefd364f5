#!/usr/bin/env bash
# Issue 43's attack table, re-run: starts a fresh `hatkv serve --transport
# tcp` on a temporary directory (with --debug-addr for goroutine counts and
# its log in a file), loads the records, runs each probe case in turn
# (replyflood: D1 and the fb303 getCounters flood, Thrift over HTTP;
# amplify: D2-D7, D9, D11) while a legitimate client Gets, then D10
# against three servers with one down, and prints one markdown table.
# D6 and D7 run against a second server started with --token, D9 against
# a third with --transport shm (HATRPC_PROVIDER=shm).
#
# RSS is VmRSS, which counts the LMDB map's pages a Scan touched (file
# pages, outside the server's memory budget); RssAnon is what the budget
# covers. Peak is the larger of VmHWM (reset before each case) and a 0.1 s
# sample. The bound is the server's budget + 64 MiB: 320 MiB of growth.
#
#   flock /work/wt/bench.lock test/attack/table.sh            # every case
#   CASES='D2|D3' test/attack/table.sh                        # those whose name matches
#   DUR=2s AFTER=2s LOG_OUT=server.log test/attack/table.sh   # shorter; keep the server's log
set -euo pipefail
cd "$(dirname "$0")/../.."

port=${PORT:-19190}
debug=$((port + 1))
addr=127.0.0.1:$port
work=$(mktemp -d /tmp/attack-table.XXXXXX)
bin=$work/bin
log=$work/server.log
pids=()
cleanup() {
	[[ -n ${LOG_OUT:-} ]] && cp "$log" "$LOG_OUT"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$bin/" ./cmd/hatkv ./test/attack/replyflood ./test/attack/amplify

# serve DB LISTEN [DEBUG [TRANSPORT]] starts a server and waits until it answers.
serve() {
	local db=$1 listen=$2 dbg=${3:-} transport=${4:-tcp}
	"$bin/hatkv" serve --db "$db" --listen "$listen" ${dbg:+--debug-addr "$dbg"} \
		--transport "$transport" --sync nosync --map-size 4GiB >>"$log" 2>&1 &
	pids+=($!)
	server=$!
	for _ in $(seq 100); do
		"$bin/hatkv" stats --addr "$listen" --transport tcp >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "table.sh: the server on $listen did not come up; its log:" >&2
	cat "$log" >&2
	exit 1
}

serve "$work/db" "$addr" "127.0.0.1:$debug"
pid=$server
"$bin/replyflood" -addr "$addr" -load >/dev/null
"$bin/amplify" -addr "$addr" -mode load >/dev/null
# A second server requires a token, for D6 and D7 (its handshake).
token=attack-table-token
taddr=127.0.0.1:$((port + 5))
tdebug=127.0.0.1:$((port + 6))
HATKV_TOKEN=$token serve "$work/dbt" "$taddr" "$tdebug"
tpid=$server
"$bin/amplify" -addr "$taddr" -token "$token" -mode load-user >/dev/null
# A third serves shm lanes, for D9 (a dedicated lane's batch).
saddr=127.0.0.1:$((port + 7))
sdebug=127.0.0.1:$((port + 8))
export HATRPC_PROVIDER=shm
serve "$work/dbs" "$saddr" "$sdebug" shm
spid=$server
"$bin/replyflood" -addr "$saddr" -load >/dev/null

opt=(-dur "${DUR:-10s}" -after "${AFTER:-10s}")
rf=("$bin/replyflood" -addr "$addr" -debug "127.0.0.1:$debug" -pid "$pid" "${opt[@]}")
am=("$bin/amplify" -addr "$addr" -debug "127.0.0.1:$debug" -pid "$pid" "${opt[@]}")
ams=("$bin/amplify" -addr "$saddr" -debug "$sdebug" -pid "$spid" "${opt[@]}")
amt=("$bin/amplify" -addr "$taddr" -debug "$tdebug" -pid "$tpid" -token "$token" "${opt[@]}")
# name | server | input | command
cases=(
	"D1 scan|$pid|200 Scan(10,000) of 10 × 100 B pipelined on 1 connection, never read|${rf[*]} -mode scan"
	"D1 counters|$pid|fb303 getCounters pipelined on 8 connections for 10 s, never read|${rf[*]} -mode counters"
	"D1 http|$pid|1 Scan(10,000) POSTed (Thrift over HTTP) on each of 64 connections, never read|${rf[*]} -mode http"
	"D1 http warm-1|$pid|as above after one Scan(1) (the server expects small replies)|${rf[*]} -mode http -warm -warm-count 1"
	"D2 one|$pid|1 Scan(zbig, 10,000) of 10 × 1000 B: a ~100 MB reply, over the 64 MiB limit, never read|${am[*]} -mode bigscan -calls 1"
	"D2 100|$pid|100 such Scans pipelined on 1 connection, never read|${am[*]} -mode bigscan -calls 100"
	"D3|$pid|200 THeader frames of 256 KiB, each 131,062 empty info pairs, on 1 connection|${am[*]} -mode theader -calls 200"
	"D4 32MiB|$pid|HatRPC Put expired on arrival (timeout 1 ns) with a 32 MiB header block of empty pairs, 4 connections in parallel|${am[*]} -mode hdrblock -block 32MiB -calls 1 -conns 4"
	"D4 60KiB|$pid|200 such Puts with 60 KiB blocks of empty pairs on 1 connection|${am[*]} -mode hdrblock -block 60KiB -calls 200"
	"D4 60KiB distinct|$pid|200 such Puts with 60 KiB blocks of 1,024 distinct pairs (within the count bound) on 1 connection|${am[*]} -mode hdrblock -block 60KiB -calls 200 -pairs distinct"
	"D5|$pid|oneway fb303 shutdown + reinitialize on 8 connections for 10 s|${am[*]} -mode oneway"
	"D6|$tpid|(--token server) 1,280 silent connections from 64 loopback addresses for 10 s; the legitimate client (127.0.0.1) dials anew for each Get|${amt[*]} -mode silent -conns 1280 -sources 64 -redial"
	"D7|$tpid|(--token server) wrong tokens from 127.0.0.1, one connection each, for 10 s|${amt[*]} -mode guess"
	"D9|$spid|(--transport shm server) 200 Scan(10,000) of 10 × 100 B at once on a dedicated shm lane, batched by the client's hints (64 a batch at most, the client's bound), each call with a 60 s deadline|${ams[*]} -mode lanebatch -calls 200"
)

status() { awk -v k="$2:" '$1 == k {print int($2 / 1024)}' "/proc/$1/status"; }
logsize() { stat -c %s "$log"; }

echo "| case | input | RSS MB base / peak (+growth) / 10 s after | RssAnon MB base / peak / after | goroutines base / peak / after | legitimate Gets / errors / p99 (max) | server log bytes added | bound (anon growth ≤ 320 MB, after ≤ base + 64 MB, 0 errors) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for c in "${cases[@]}"; do
	IFS='|' read -r name p input cmd <<<"$c"
	[[ -n ${CASES:-} && ! $name =~ ${CASES} ]] && continue
	log0=$(logsize)
	anon0=$(status "$p" RssAnon)
	echo 5 >"/proc/$p/clear_refs" 2>/dev/null || true
	samples=$work/samples
	(while kill -0 "$p" 2>/dev/null; do
		awk '$1 == "VmRSS:" {r = $2} $1 == "RssAnon:" {a = $2} END {print int(r / 1024), int(a / 1024)}' "/proc/$p/status"
		sleep 0.1
	done) >"$samples" &
	sampler=$!
	out=$($cmd 2>&1) || { echo "table.sh: $name failed: $out" >&2; kill "$sampler"; exit 1; }
	[[ -n ${RAW_OUT:-} ]] && mkdir -p "$RAW_OUT" && printf '%s\n' "$out" >"$RAW_OUT/${name// /_}.txt"
	kill "$sampler"
	wait "$sampler" 2>/dev/null || true
	anon1=$(status "$p" RssAnon)
	hwm=$(status "$p" VmHWM)
	read -r peak anonpeak < <(awk '{if ($1 > r) r = $1; if ($2 > a) a = $2} END {print r + 0, a + 0}' "$samples")
	read -r base rpeak after < <(sed -nE 's/^RSS MB: base ([0-9-]+), peak ([0-9-]+) .* after close ([0-9-]+)$/\1 \2 \3/p' <<<"$out")
	peak=$((peak > hwm ? peak : hwm))
	peak=$((peak > rpeak ? peak : rpeak))
	gor=$(sed -nE 's/^goroutines: base ([0-9-]+), peak ([0-9-]+), after ([0-9-]+)$/\1 \/ \2 \/ \3/p' <<<"$out")
	legit=$(sed -nE 's/^legitimate Gets ([0-9]+), errors ([0-9]+), p99 (.*)$/\1 \/ \2 \/ \3/p' <<<"$out")
	lmax=$(sed -nE 's/^legitimate max (.*)$/\1/p' <<<"$out")
	note=$(sed -nE 's/^note: (.*)$/\1/p' <<<"$out")
	verdict="ok"
	if ((anonpeak - anon0 > 320)); then verdict="OVER: anon +$((anonpeak - anon0)) MB"; fi
	if ((peak - base > 320)); then verdict="$verdict (RSS +$((peak - base)) MB with LMDB's file pages)"; fi
	if ((anon1 - anon0 > 64)); then verdict="$verdict; not back: anon $anon1 vs $anon0"; fi
	if [[ ! $legit =~ " / 0 / " ]]; then verdict="$verdict; client errors"; fi
	echo "| $name | $input${note:+ → $note} | $base / $peak (+$((peak - base))) / $after | $anon0 / $anonpeak / $anon1 | $gor | $legit${lmax:+ ($lmax)} | $(($(logsize) - log0)) | $verdict |"
done

# D2 as a client sees it: hatkv's own scan of the oversized range.
if [[ -z ${CASES:-} || D2 =~ ${CASES} ]]; then
	echo
	rc=0
	"$bin/hatkv" scan zbig --count 10000 --addr "$addr" --transport tcp >"$work/d2.out" 2>"$work/d2.err" || rc=$?
	echo "D2, hatkv scan zbig --count 10000: exit $rc, $(wc -l <"$work/d2.out") lines out (the Scan stops at 32 MiB of records), stderr: $(head -c 600 "$work/d2.err")"
fi

# D11: one Get whose frame timeout is 2^63-1 ns.
if [[ -z ${CASES:-} || D11 =~ ${CASES} ]]; then
	echo
	echo "D11: $("$bin/amplify" -addr "$addr" -mode maxtimeout 2>&1)"
fi

# D10: hatkv --addrs over three servers, one down from the start.
if [[ -z ${CASES:-} || D10 =~ ${CASES} ]]; then
	serve "$work/db2" 127.0.0.1:$((port + 2))
	serve "$work/db3" 127.0.0.1:$((port + 3))
	down=127.0.0.1:$((port + 4))
	addrs=127.0.0.1:$((port + 2)),$down,127.0.0.1:$((port + 3))
	ok=0 failed=0 named=0 first="" other=""
	for i in $(seq 0 29); do
		for op in put get; do
			args=(d10key$i)
			[[ $op == put ]] && args+=(f=v$i)
			if msg=$("$bin/hatkv" "$op" --addrs "$addrs" --transport tcp "${args[@]}" 2>&1 >/dev/null); then
				ok=$((ok + 1))
			else
				failed=$((failed + 1))
				[[ -z $first ]] && first=$msg
				if [[ $msg == *"$down"* ]]; then named=$((named + 1)); else other=$msg; fi
			fi
		done
	done
	echo
	echo "D10: hatkv put/get --addrs $addrs (the second down), 30 keys: $ok succeeded, $failed failed, $named of the failures naming $down${other:+; another failure: $other}"
	echo "D10 first failure: $first"
fi
