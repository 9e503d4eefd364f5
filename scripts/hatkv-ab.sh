#!/usr/bin/env bash
# hatkv-ab.sh: two hatkv builds side by side, alternating, each run on a
# fresh store: YCSB throughput, READ p50/p99 and the server's CPU per
# operation (user and sys, from /proc/PID/stat over the run phase).
#
# usage: scripts/hatkv-ab.sh OLD_BIN NEW_BIN [rounds]
#        (env: W workload (workloadc), T threads (64), DUR (5s),
#         RECORDS (10000), TR transport (tcp | auto | shm))
# Build OLD_BIN from the commit to compare with, e.g.
#   git archive e3c5b8d | tar -x -C /tmp/old && (cd /tmp/old && go build -o /tmp/hatkv-old ./cmd/hatkv)
# Hold the shared benchmark lock: flock /tmp/hatrpc-heavy.lock scripts/hatkv-ab.sh ...
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
W=${W:-workloadc} T=${T:-64} DUR=${DUR:-5s} RECORDS=${RECORDS:-10000} TR=${TR:-tcp}
ADDR=127.0.0.1:${PORT:-19400}
tck=$(getconf CLK_TCK)
for rep in $(seq 1 "$rounds"); do
  for b in old new; do
    bin=$old; [ "$b" = new ] && bin=$new
    d=$(mktemp -d)
    "$bin" serve --db "$d/db" --listen "$ADDR" --transport "$TR" >"$d/serve.log" 2>&1 &
    spid=$!
    for _ in $(seq 100); do grep -q "listening on" "$d/serve.log" && break; sleep 0.1; done
    "$bin" bench --addr "$ADDR" --transport "$TR" -P "$W" -p recordcount="$RECORDS" --phase load --threads 16 --progress off >/dev/null
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$spid/stat")
    "$bin" bench --addr "$ADDR" --transport "$TR" -P "$W" -p recordcount="$RECORDS" --phase run --threads "$T" \
      --duration "$DUR" --seed 5 --progress off --json "$d/run.json" >/dev/null
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$spid/stat")
    kill -INT "$spid"; wait "$spid" || true
    python3 - "$b" "$rep" "$TR" "$d/run.json" "$u0" "$u1" "$s0" "$s1" "$tck" <<'PY'
import json, sys
b, rep, tr, path, u0, u1, s0, s1, tck = sys.argv[1:]
r = json.load(open(path))[-1]["report"]
ops = r["operations"]
usr, sy = (int(u1) - int(u0)) / int(tck), (int(s1) - int(s0)) / int(tck)
rd = next(o for o in r["ops"] if o["operation"] == "READ")
print(f"{tr} round {rep} {b}: {r['throughput_ops_sec']:.0f} ops/s, READ p50 {rd['p50_us']:.0f} us p99 {rd['p99_us']:.0f} us, "
      f"server CPU {(usr + sy) / ops * 1e6:.1f} us/op (user {usr / ops * 1e6:.1f}, sys {sy / ops * 1e6:.1f})")
PY
    rm -rf "$d"
  done
done
