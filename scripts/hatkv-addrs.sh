#!/usr/bin/env bash
# hatkv-addrs.sh: YCSB on one hatkv server next to three (--addrs, keys by
# consistent hashing), the two alternating; four servers on this host.
#
# usage: scripts/hatkv-addrs.sh [rounds]   (env: W (workloadb), T (64),
#        DUR (5s), RECORDS (10000), TR transport (auto))
# Hold the shared benchmark lock: flock /tmp/hatrpc-heavy.lock scripts/hatkv-addrs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
W=${W:-workloadb} T=${T:-64} DUR=${DUR:-5s} RECORDS=${RECORDS:-10000} TR=${TR:-auto}
d=$(mktemp -d)
bin=$d/hatkv
go build -o "$bin" ./cmd/hatkv
pids=()
for p in 19300 19301 19302 19303; do
  "$bin" serve --db "$d/$p" --listen 127.0.0.1:$p --transport "$TR" >"$d/serve-$p.log" 2>&1 &
  pids+=($!)
done
trap 'kill -INT "${pids[@]}" 2>/dev/null; wait; rm -rf "$d"' EXIT
sleep 2
for rep in $(seq 1 "$rounds"); do
  for cfg in one three; do
    a=(--addr 127.0.0.1:19300)
    [ "$cfg" = three ] && a=(--addrs 127.0.0.1:19301,127.0.0.1:19302,127.0.0.1:19303)
    phase=run; [ "$rep" = 1 ] && phase=both
    echo "=== round $rep, $cfg server(s), phase $phase"
    "$bin" bench "${a[@]}" --transport "$TR" -P "$W" -p recordcount="$RECORDS" --phase "$phase" --threads "$T" \
      --duration "$DUR" --seed 11 --progress off | grep -E "server|Throughput|READ |UPDATE |keys per|key acc|^  127|== "
  done
done
