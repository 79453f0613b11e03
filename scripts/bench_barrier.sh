#!/usr/bin/env bash
# bench_barrier.sh [OUTDIR]: the double barrier against the peers on one
# standalone ZooKeeper (forceSync=yes), interleaved: each repetition runs
# zkbench barrier, Curator's BarrierBench (DistributedDoubleBarrier) and
# kazoo's barrierbench.py (DoubleBarrier), 5 members, 20 rounds, a fresh
# path per round. JSON lines land in OUTDIR (default: a new temp dir); a
# summary of medians and same-run ratios is printed at the end.
#
#   REPS=3 MEMBERS=5 ROUNDS=20 PORT=22194 PEERS=<repo>/../shared/peers
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS=${PEERS:-$root/../shared/peers}
REPS=${REPS:-3} MEMBERS=${MEMBERS:-5} ROUNDS=${ROUNDS:-20} PORT=${PORT:-22194}
out=${1:-$(mktemp -d)}
mkdir -p "$out"
work=$(mktemp -d)
trap '"$PEERS/zk.sh" stop "$work/zk" >/dev/null 2>&1 || true' EXIT
(cd "$root" && go build -o "$work/zkbench" ./cmd/zkbench)
[[ -f $PEERS/curator/build/peers.jar ]] || "$PEERS/curator/build.sh" >&2
"$PEERS/zk.sh" start-standalone "$PORT" "$work/zk" >&2
A=127.0.0.1:$PORT
for rep in $(seq 1 "$REPS"); do
  "$work/zkbench" barrier -zk "$A" -members "$MEMBERS" -rounds "$ROUNDS" 2>>"$out/stderr.log" | tail -1 >"$out/zkrecipes-rep$rep.json" || true
  "$PEERS/curator/run.sh" BarrierBench "$A" members="$MEMBERS" rounds="$ROUNDS" 2>>"$out/stderr.log" | tail -1 >"$out/curator-rep$rep.json" || true
  /usr/bin/python3 "$PEERS/kazoo/barrierbench.py" "$A" members="$MEMBERS" rounds="$ROUNDS" 2>>"$out/stderr.log" | tail -1 >"$out/kazoo-rep$rep.json" || true
done
"$PEERS/zk.sh" 4lw "$PORT" mntr >"$out/mntr.txt"
echo "results in $out" >&2
/usr/bin/python3 - "$out" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
def load(name):
    try:
        d = json.loads(open("%s/%s.json" % (out, name)).read())
        return d if d.get("ok") else None
    except Exception:
        return None
ratios = {"curator": [], "kazoo": []}
last = []
for r in range(1, reps + 1):
    z, c, k = load("zkrecipes-rep%d" % r), load("curator-rep%d" % r), load("kazoo-rep%d" % r)
    line = "rep %d enter_ms p50:" % r
    for name, d in (("zkrecipes", z), ("curator", c), ("kazoo", k)):
        line += "  %s %s" % (name, d and d["enter_ms"]["p50_ms"])
    if z:
        line += "  | last arrival %s ms, create+notify %s ms" % (z["last_arrival_ms"]["p50_ms"], z["create_notify_ms"]["p50_ms"])
        last.append(z["last_arrival_p50_per_create_notify_p50"])
        for name, d in (("curator", c), ("kazoo", k)):
            if d:
                ratios[name].append(d["enter_ms"]["p50_ms"] / z["enter_ms"]["p50_ms"])
    print(line)
for name, v in ratios.items():
    if v:
        print("enter p50, %s / zkrecipes: median %.2f [%s]" % (name, statistics.median(v), " ".join("%.2f" % x for x in v)))
if last:
    print("last arrival p50 / (create + notification) p50: median %.2f [%s]" % (statistics.median(last), " ".join("%.2f" % x for x in last)))
PY
