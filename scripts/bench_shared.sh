#!/usr/bin/env bash
# bench_shared.sh [OUTDIR]: the shared locks (read/write lock, semaphore)
# and the exclusive lock's cost against the peers on one standalone
# ZooKeeper (forceSync=yes), interleaved.
#
# Each repetition runs zkbench rwlock beside Curator's RwLockBench and
# kazoo's rwlockbench.py (4 readers, 2 writers, 1 ms holds), and zkbench
# semaphore beside Curator's SemaphoreBench (InterProcessSemaphoreV2) and
# kazoo's semaphorebench.py (8 clients, 2 leases, 1 ms holds), with a
# warm-up. A cost pass (no warm-up, so every acquisition is counted) reads
# the server's packets_received (mntr) around each program, the lock's
# beside go-zookeeper's Lock and Curator's InterProcessMutex too, and
# divides by the acquisitions: requests per acquisition. JSON lines land in
# OUTDIR (default: a new temp dir); a summary of medians and same-run
# ratios is printed at the end.
#
#   REPS=2 DURATION=10 WARMUP=2 COST_DURATION=5 PORT=22191 PEERS=<repo>/../shared/peers
#
# bench_shared.sh --summary OUTDIR prints the summary of an earlier run.
set -euo pipefail

summarize() {
/usr/bin/python3 - "$1" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
def load(p):
    try:
        return json.loads(open(p).read().strip().splitlines()[-1])
    except Exception:
        return None
def rate(d):
    if not d or not d.get("ok"):
        return None
    if d.get("acq_per_s") is not None:
        return d["acq_per_s"]
    return (d.get("reads_per_s") or 0) + (d.get("writes_per_s") or 0)
def acqs(d):
    return d.get("acquisitions") or (d.get("read_acquisitions", 0) + d.get("write_acquisitions", 0))
for bench, peers in (("rwlock", ("curator", "kazoo")), ("semaphore", ("curator", "kazoo"))):
    reps = {}
    for p in glob.glob(os.path.join(out, bench + "-*-rep*.json")):
        m = re.match(re.escape(bench) + r"-(.+)-rep(\d+)\.json", os.path.basename(p))
        reps.setdefault(int(m[2]), {})[m[1]] = rate(load(p))
    print("%s ops/s per repetition (same server, interleaved)" % bench)
    ratios = {k: [] for k in peers}
    for rep in sorted(reps):
        r = reps[rep]
        line = "  rep %d: " % rep + "  ".join("%s %s" % (k, r.get(k)) for k in ("zkrecipes",) + peers)
        for k in peers:
            if r.get("zkrecipes") and r.get(k):
                ratios[k].append(r["zkrecipes"] / r[k])
                line += "   /%s %.2f" % (k, r["zkrecipes"] / r[k])
        print(line)
    for k in peers:
        if ratios[k]:
            print("  median zkrecipes / %s: %.2f" % (k, statistics.median(ratios[k])))
print("requests per acquisition (server packets_received / acquisitions, no warm-up)")
for p in sorted(glob.glob(os.path.join(out, "cost-*.json"))):
    d = load(p)
    pk = open(p[:-5] + ".packets").read().split()
    n = acqs(d) if d else 0
    if n:
        print("  %-24s %6.2f  (%d packets, %d acquisitions)" % (os.path.basename(p)[5:-5], (int(pk[1]) - int(pk[0])) / n, int(pk[1]) - int(pk[0]), n))
PY
}

if [[ ${1:-} == --summary ]]; then
  summarize "$2"
  exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS=${PEERS:-$root/../shared/peers}
REPS=${REPS:-2} DURATION=${DURATION:-10} WARMUP=${WARMUP:-2} COST_DURATION=${COST_DURATION:-5} PORT=${PORT:-22191}
out=${1:-$(mktemp -d)}
mkdir -p "$out"
work=$(mktemp -d)
trap '"$PEERS/zk.sh" stop "$work/zk" >/dev/null 2>&1 || true' EXIT
(cd "$root" && go build -o "$work/zkbench" ./cmd/zkbench)
(cd "$PEERS/go/zklock" && go build -o "$work/zklock" .)
[[ -f $PEERS/curator/build/peers.jar ]] || "$PEERS/curator/build.sh" >&2
"$PEERS/zk.sh" start-standalone "$PORT" "$work/zk" >&2
A=127.0.0.1:$PORT
packets() { "$PEERS/zk.sh" 4lw "$PORT" mntr | awk '/zk_packets_received/{print $2}'; }
# run NAME CMD...: the program's last line into OUTDIR/NAME.json, with the
# server's packets_received before and after in OUTDIR/NAME.packets.
run() {
  local name=$1; shift
  local before; before=$(packets)
  "$@" 2>>"$out/stderr.log" | tail -1 >"$out/$name.json" || true
  echo "$before $(packets)" >"$out/$name.packets"
  echo "$name: $(cut -c1-160 "$out/$name.json")" >&2
}
py=/usr/bin/python3
for rep in $(seq 1 "$REPS"); do
  d=$DURATION w=$WARMUP
  run rwlock-zkrecipes-rep$rep "$work/zkbench" rwlock -zk "$A" -readers 4 -writers 2 -hold-us 1000 -duration "${d}s" -warmup "${w}s"
  run rwlock-curator-rep$rep "$PEERS/curator/run.sh" RwLockBench "$A" readers=4 writers=2 hold_us=1000 duration_s="$d" warmup_s="$w"
  run rwlock-kazoo-rep$rep $py "$PEERS/kazoo/rwlockbench.py" "$A" readers=4 writers=2 hold_us=1000 duration_s="$d" warmup_s="$w" patch649=1
  run semaphore-zkrecipes-rep$rep "$work/zkbench" semaphore -zk "$A" -clients 8 -leases 2 -hold-us 1000 -duration "${d}s" -warmup "${w}s"
  run semaphore-curator-rep$rep "$PEERS/curator/run.sh" SemaphoreBench "$A" clients=8 leases=2 hold_us=1000 duration_s="$d" warmup_s="$w"
  run semaphore-kazoo-rep$rep $py "$PEERS/kazoo/semaphorebench.py" "$A" clients=8 leases=2 hold_us=1000 duration_s="$d" warmup_s="$w"
done
c=$COST_DURATION
run cost-lock-zkrecipes "$work/zkbench" lock -zk "$A" -clients 4 -duration "${c}s" -warmup 0s
run cost-lock-go-zookeeper "$work/zklock" "$A" clients=4 duration_s="$c" warmup_s=0
run cost-lock-curator "$PEERS/curator/run.sh" LockBench "$A" clients=4 duration_s="$c" warmup_s=0
run cost-rwlock-zkrecipes "$work/zkbench" rwlock -zk "$A" -readers 4 -writers 2 -hold-us 1000 -duration "${c}s" -warmup 0s
run cost-rwlock-curator "$PEERS/curator/run.sh" RwLockBench "$A" readers=4 writers=2 hold_us=1000 duration_s="$c" warmup_s=0
run cost-rwlock-kazoo $py "$PEERS/kazoo/rwlockbench.py" "$A" readers=4 writers=2 hold_us=1000 duration_s="$c" warmup_s=0 patch649=1
run cost-semaphore-zkrecipes "$work/zkbench" semaphore -zk "$A" -clients 8 -leases 2 -hold-us 1000 -duration "${c}s" -warmup 0s
run cost-semaphore-curator "$PEERS/curator/run.sh" SemaphoreBench "$A" clients=8 leases=2 hold_us=1000 duration_s="$c" warmup_s=0
run cost-semaphore-kazoo $py "$PEERS/kazoo/semaphorebench.py" "$A" clients=8 leases=2 hold_us=1000 duration_s="$c" warmup_s=0
"$PEERS/zk.sh" 4lw "$PORT" mntr >"$out/mntr.txt"
echo "results in $out" >&2
summarize "$out"
