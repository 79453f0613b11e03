#!/usr/bin/env bash
# ab_twophase.sh BASE [OUTDIR]: a same-run A/B of `zkbench twophase`
# between commit BASE (A) and the work tree (B), on one standalone server
# (forceSync=yes), alternating A and B ROUNDS times. Prints each round's
# commit p50 and p50 / floor, and the medians over rounds 2.. (round 1 is
# the server's warm-up).
#
#   ROUNDS=6 PORT=24900 PEERS=<repo>/../shared/peers
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
base=${1:?usage: ab_twophase.sh BASE [OUTDIR]}
out=${2:-$(mktemp -d)}
rounds=${ROUNDS:-6} port=${PORT:-24900}
peers=${PEERS:-$(cd .. && pwd)/shared/peers}
mkdir -p "$out"
src=$(mktemp -d)
git worktree add -q --detach "$src" "$base"
trap 'git worktree remove --force "$src"; "$peers/zk.sh" stop "$out/zk" >/dev/null 2>&1 || true' EXIT
(cd "$src" && go build -o "$out/zkbench-A" ./cmd/zkbench)
go build -o "$out/zkbench-B" ./cmd/zkbench
addr=$("$peers/zk.sh" start-standalone "$port" "$out/zk")
for r in $(seq "$rounds"); do
  for v in A B; do
    "$out/zkbench-$v" twophase -zk "$addr" -participants 5 -txs 200 >"$out/twophase-$v-r$r.json"
  done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(p): return json.loads(open(p).read().strip().splitlines()[-1])
for v in "AB":
    rs = [load(f"{out}/twophase-{v}-r{r}.json") for r in range(1, rounds + 1)]
    for r, x in enumerate(rs, 1):
        print(f"{v} round {r}: commit p50 {x['commit_ms']['p50_ms']:.2f} ms, p99 {x['commit_ms']['p99_ms']:.2f} ms, p50 / floor {x['commit_p50_per_floor']:.2f}")
    later = rs[1:] or rs
    print(f"{v}: median commit p50 {statistics.median(x['commit_ms']['p50_ms'] for x in later):.2f} ms,"
          f" median p50 / floor {statistics.median(x['commit_p50_per_floor'] for x in later):.2f}")
PY
