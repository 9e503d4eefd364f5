#!/usr/bin/env bash
# Runs Apache Thrift's own cross-test programs against HatRPC's, both ways
# (test/crosstest/README.md, "Against Apache's own programs, by hand"):
# Apache's Go testclient/testserver (built from an apache/thrift checkout's
# test/go) and Python's test/py TestClient.py/TestServer.py against HatRPC's
# test/crosstest/cmd programs. Apache's assertions decide each cell: a cell
# passes when the client program exits 0.
#
# usage: scripts/apache-crosstest.sh OUT.tsv [new|old|all] [impl...]
#   impl: go17 (Go programs at 0.17.0), gom (Go programs at a newer tag,
#         with uuid), py17 (Python programs at 0.17.0)
#   new:  only the stacks added after binary/compact × buffered/framed and
#         THeader on a plain socket (json, multij, http, zlib, THeader in a
#         frame, unix sockets); old: the others
# environment: AP17GO, APMGO (directories holding testclient and testserver),
#   AP17PY (Apache's test/py with gen-py), KEYS (Apache's test/keys),
#   HATBIN (HatRPC's testclient and testserver, go build ./test/crosstest/cmd/...),
#   PY (a python3 that imports Debian's python3-thrift), PORT0.
# Apache's crossrunner passes --zlib next to --transport=zlib, and so does
# this script. Each cell's logs of a failure go to OUT.tsv.fail.
set -u
out=${1:?usage: $0 OUT.tsv [new|all] [impl...]}
which=${2:-new}
shift 2 2>/dev/null || shift $#
impls=("$@")
[[ ${#impls[@]} -gt 0 ]] || impls=(go17 gom py17)
AP17GO=${AP17GO:-/tmp/ap17/bin}
APMGO=${APMGO:-/tmp/apm/test/go/bin}
AP17PY=${AP17PY:-/tmp/ap17/test/py}
KEYS=${KEYS:-/tmp/ap17/test/keys}
HATBIN=${HATBIN:-/tmp/hapache}
PY=${PY:-/usr/bin/python3}
port=${PORT0:-19500}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$out"
: >"$out.fail"

is_new() { # proto trans sock
	[[ $1 == json || $1 == multij || $2 == http || $2 == zlib || $3 == domain ]] && return 0
	[[ ($1 == header || $1 == multih) && $2 == framed ]]
}

wait_ready() { # sock trans path port
	local i
	for i in $(seq 1 150); do
		if [[ $1 == domain && $2 != http ]]; then
			[[ -S $3 ]] && return 0
		else
			(echo >/dev/tcp/127.0.0.1/$4) 2>/dev/null && return 0
		fi
		sleep 0.1
	done
	return 1
}

run_cell() { # dir impl proto trans sock
	local dir=$1 impl=$2 p=$3 tr=$4 sock=$5 rc srvpid
	port=$((port + 1))
	local path=$tmp/ThriftTest.$port.sock
	local net=()
	case $sock in
	ip-ssl) net=(--ssl) ;;
	domain) net=(--domain-socket="$path") ;;
	esac
	local zl=()
	[[ $tr == zlib ]] && zl=(--zlib)
	local args=(--port="$port" --protocol="$p" --transport="$tr" "${zl[@]}" "${net[@]}")
	if [[ $dir == apache-client ]]; then
		# Python's C codecs are a client's choice; the server speaks the
		# plain protocol (Apache's "binary:accel" cells).
		local sp=$p
		case $p in accel) sp=binary ;; accelc) sp=compact ;; multia) sp=multi ;; multiac) sp=multic ;; esac
		"$HATBIN/testserver" --port="$port" --protocol="$sp" --transport="$tr" "${zl[@]}" "${net[@]}" --certPath="$KEYS" >"$tmp/srv.log" 2>&1 &
		srvpid=$!
	else
		case $impl in
		go17) "$AP17GO/testserver" "${args[@]}" --certPath="$KEYS" >"$tmp/srv.log" 2>&1 & ;;
		gom) "$APMGO/testserver" "${args[@]}" --certPath="$KEYS" >"$tmp/srv.log" 2>&1 & ;;
		py17) (cd "$AP17PY" && exec "$PY" TestServer.py --genpydir=gen-py "${args[@]}" TSimpleServer) >"$tmp/srv.log" 2>&1 & ;;
		esac
		srvpid=$!
	fi
	wait_ready "$sock" "$tr" "$path" "$port"
	if [[ $dir == apache-client ]]; then
		case $impl in
		go17) timeout 60 "$AP17GO/testclient" --host=localhost "${args[@]}" >"$tmp/cli.log" 2>&1 ;;
		gom) timeout 60 "$APMGO/testclient" --host=localhost "${args[@]}" >"$tmp/cli.log" 2>&1 ;;
		py17) (cd "$AP17PY" && exec timeout 60 "$PY" TestClient.py --host=localhost --genpydir=gen-py "${args[@]}") >"$tmp/cli.log" 2>&1 ;;
		esac
		rc=$?
	else
		local nouuid=(--no-uuid)
		[[ $impl == gom ]] && nouuid=()
		timeout 60 "$HATBIN/testclient" --host=localhost "${args[@]}" "${nouuid[@]}" >"$tmp/cli.log" 2>&1
		rc=$?
	fi
	kill "$srvpid" 2>/dev/null
	wait "$srvpid" 2>/dev/null
	rm -f "$path"
	local res=pass
	[[ $rc == 0 ]] || res="FAIL($rc)"
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$dir" "$impl" "$p" "$tr" "$sock" "$res" | tee -a "$out"
	if [[ $rc != 0 ]]; then
		{
			printf '=== %s %s %s %s %s\n--- client:\n' "$dir" "$impl" "$p" "$tr" "$sock"
			tail -5 "$tmp/cli.log"
			echo "--- server:"
			tail -5 "$tmp/srv.log"
		} >>"$out.fail"
	fi
}

for dir in apache-client apache-server; do
	for impl in "${impls[@]}"; do
		if [[ $impl == py17 ]]; then
			protos=(binary compact json header multi multic multij multih accel accelc multia multiac)
			socks=(ip ip-ssl domain)
		else
			# Apache's Go TSocket dials and listens on TCP only: its Go
			# matrix has no domain cells.
			protos=(binary compact json header)
			socks=(ip ip-ssl)
		fi
		for p in "${protos[@]}"; do
			# HatRPC's programs have no Python C codecs: those are Python-client cells.
			[[ $dir == apache-server && ($p == accel* || $p == multia*) ]] && continue
			for tr in buffered framed http zlib; do
				for sock in "${socks[@]}"; do
					[[ $which == new ]] && ! is_new "$p" "$tr" "$sock" && continue
					[[ $which == old ]] && is_new "$p" "$tr" "$sock" && continue
					run_cell "$dir" "$impl" "$p" "$tr" "$sock"
				done
			done
		done
	done
done
