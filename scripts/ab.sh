#!/usr/bin/env bash
# ab.sh BASE [OUTDIR]: a same-run A/B of zkbench between commit BASE and the
# work tree, on one standalone server (forceSync=yes), alternating A and B
# ROUNDS times, for each bench of BENCHES: "lock" (4 and 16 clients),
# "election" (graceful failover), "twophase" (5 participants, 200
# transactions), "queue" (TakeItem+Ack, 2000 items). Prints each run's
# figures and the medians.
#
#   BENCHES="lock election" ROUNDS=4 DURATION=5 WARMUP=1 PORT=24800
#   PEERS=<repo>/../shared/peers
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
base=${1:?usage: ab.sh BASE [OUTDIR]}
out=${2:-$(mktemp -d)}
rounds=${ROUNDS:-4} dur=${DURATION:-5} warm=${WARMUP:-1} port=${PORT:-24800}
benches=${BENCHES:-lock election}
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
    for b in $benches; do
      case $b in
      lock)
        for c in 4 16; do
          "$out/zkbench-$v" lock -zk "$addr" -clients "$c" -duration "${dur}s" -warmup "${warm}s" >"$out/lock-$v-c$c-r$r.json"
        done ;;
      election) "$out/zkbench-$v" election -zk "$addr" -participants 5 -rounds 20 -kill-rounds 0 >"$out/election-$v-r$r.json" ;;
      twophase) "$out/zkbench-$v" twophase -zk "$addr" -participants 5 -txs 200 >"$out/twophase-$v-r$r.json" ;;
      queue) "$out/zkbench-$v" queue -zk "$addr" -kind ack -items 2000 >"$out/queue-$v-r$r.json" ;;
      *) echo "ab.sh: unknown bench $b" >&2; exit 2 ;;
      esac
    done
  done
done
/usr/bin/python3 - "$out" "$rounds" "$benches" <<'PY'
import json, statistics, sys
out, rounds, benches = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def load(p): return json.loads(open(p).read().strip().splitlines()[-1])
for c in (4, 16) if "lock" in benches else ():
    rs = []
    for r in range(1, rounds + 1):
        a, b = (load(f"{out}/lock-{v}-c{c}-r{r}.json")["acq_per_s"] for v in "AB")
        rs.append(b / a); print(f"lock c={c} round {r}: A {a:.0f} B {b:.0f} acq/s  B/A {b/a:.2f}")
    print(f"lock c={c}: median B/A {statistics.median(rs):.2f}")
if "election" in benches:
    rs = []
    for r in range(1, rounds + 1):
        e = {v: load(f"{out}/election-{v}-r{r}.json") for v in "AB"}
        a, b = (e[v]["failover_over_delete_notify"] for v in "AB")
        rs.append(b / a)
        print(f"election round {r}: failover p50 A {e['A']['failover_ms']['p50_ms']:.3f} B {e['B']['failover_ms']['p50_ms']:.3f} ms;"
              f" failover / delete->event A {a:.2f} B {b:.2f}")
    print(f"election failover / delete->event: median B/A {statistics.median(rs):.2f} (below 1 is faster)")
if "queue" in benches:
    rs = []
    for r in range(1, rounds + 1):
        q = {v: load(f"{out}/queue-{v}-r{r}.json") for v in "AB"}
        a, b = (q[v]["take_ack_p50_per_raw_claim_ack_p50"] for v in "AB")
        rs.append(b / a)
        print(f"queue round {r}: take/s A {q['A']['take_per_s']:.0f} B {q['B']['take_per_s']:.0f};"
              f" take+ack p50 / raw claim+ack p50 A {a:.2f} B {b:.2f}")
    print(f"queue take+ack / raw: median B/A {statistics.median(rs):.2f} (below 1 is faster)")
if "twophase" in benches:
    for v in "AB":
        xs = [load(f"{out}/twophase-{v}-r{r}.json") for r in range(1, rounds + 1)]
        for r, x in enumerate(xs, 1):
            print(f"twophase {v} round {r}: commit p50 {x['commit_ms']['p50_ms']:.2f} ms, p99 {x['commit_ms']['p99_ms']:.2f} ms,"
                  f" p50 / floor {x['commit_p50_per_floor']:.2f}")
        later = xs[1:] or xs  # round 1 warms the server up
        print(f"twophase {v}: median over rounds 2.. commit p50 {statistics.median(x['commit_ms']['p50_ms'] for x in later):.2f} ms,"
              f" p50 / floor {statistics.median(x['commit_p50_per_floor'] for x in later):.2f}")
PY
