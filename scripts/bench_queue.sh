#!/usr/bin/env bash
# bench_queue.sh [OUTDIR]: the queue against the peers on one standalone
# ZooKeeper (forceSync=yes), interleaved.
#
# Each repetition runs, on one server: zkbench queue (fifo, ack, consume,
# priority, batches of 100, 4 consumers on one shard, and 4 consumers on a
# queue of 4 shards, offered with OfferKey), Curator's QueueBench (simple:
# SimpleDistributedQueue; distributed: DistributedQueue) and kazoo's
# queuebench.py (Queue, LockingQueue). Each program offers every item, then
# takes them all; zkbench also times raw creates and deletes on the same
# server first, so its take and offer are compared with a delete and a
# create of the same run. A cost pass reads the server's packets_received
# (mntr) around one single-offer run of each (no warm-up) and divides by
# the items: requests per item, offer and take together. JSON lines land
# in OUTDIR (default: a new temp dir); a summary of medians and same-run
# ratios is printed at the end, each beside issue 36's target, with the
# machine's load average (1 min) at the end of each run.
#
#   REPS=3 ITEMS=2000 PORT=22192 PEERS=<repo>/../shared/peers
#
# bench_queue.sh --summary OUTDIR prints the summary of an earlier run.
set -euo pipefail

summarize() {
/usr/bin/python3 - "$1" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
def load(p):
    try:
        d = json.loads(open(p).read().strip().splitlines()[-1])
        return d if d.get("ok") else None
    except Exception:
        return None
reps = {}
for p in glob.glob(os.path.join(out, "*-rep*.json")):
    m = re.match(r"(.+)-rep(\d+)\.json", os.path.basename(p))
    reps.setdefault(int(m[2]), {})[m[1]] = load(p)
def p50(d, k):
    return d[k]["p50_us"] if d and d.get(k) else None
# name: (ratio, issue 36's target: at most (<=) or at least (>=) a figure)
targets = {
    "fifo take p50 / raw delete p50": "<= 1.2",
    "Consume per item p50 / raw delete p50": "<= 1.5",
    "OfferBatch(100) items/s / Offer items/s": ">= 10",
    "4 shards 4 consumers take/s / 1 consumer": ">= 2.5",
    "4 consumers take/s / 1 consumer take/s": ">= 0.9",
    "take/s vs Curator SimpleDistributedQueue": ">= 2",
}
rows = {
    "fifo take p50 / raw delete p50": lambda r: r["zk-fifo"]["take_p50_per_delete_p50"],
    "ack take+ack p50 / raw delete p50": lambda r: (p50(r["zk-ack"], "take_us") + p50(r["zk-ack"], "ack_us")) / p50(r["zk-ack"], "raw_delete_us"),
    "ack raw claim+ack p50 / raw delete p50 (floor)": lambda r: r["zk-ack"]["raw_claim_ack_p50_per_delete_p50"],
    "ack take+ack p50 / raw claim+ack p50": lambda r: r["zk-ack"]["take_ack_p50_per_raw_claim_ack_p50"],
    "Consume per item p50 / raw delete p50": lambda r: r["zk-consume"]["take_p50_per_delete_p50"],
    "Consume take/s / TakeItem+Ack take/s": lambda r: r["zk-consume"]["take_per_s"] / r["zk-ack"]["take_per_s"],
    "offer p50 / raw create p50": lambda r: r["zk-fifo"]["offer_p50_per_create_p50"],
    "priority take p50 / raw delete p50": lambda r: r["zk-priority"]["take_p50_per_delete_p50"],
    "OfferBatch(100) items/s / Offer items/s": lambda r: r["zk-batch100"]["offer_per_s"] / r["zk-fifo"]["offer_per_s"],
    "4 consumers take/s / 1 consumer take/s": lambda r: r["zk-4consumers"]["take_per_s"] / r["zk-fifo"]["take_per_s"],
    "4 shards 4 consumers take/s / 1 consumer": lambda r: r["zk-4shards"]["take_per_s"] / r["zk-fifo"]["take_per_s"],
    "take/s vs Curator SimpleDistributedQueue": lambda r: r["zk-fifo"]["take_per_s"] / r["curator-simple"]["take_per_s"],
    "take/s vs Curator DistributedQueue": lambda r: r["zk-fifo"]["take_per_s"] / r["curator-distributed"]["take_per_s"],
    "take/s vs kazoo Queue": lambda r: r["zk-fifo"]["take_per_s"] / r["kazoo-queue"]["take_per_s"],
    "ack take/s vs kazoo LockingQueue": lambda r: r["zk-ack"]["take_per_s"] / r["kazoo-locking"]["take_per_s"],
    "Consume take/s vs kazoo LockingQueue": lambda r: r["zk-consume"]["take_per_s"] / r["kazoo-locking"]["take_per_s"],
    "offer/s vs Curator SimpleDistributedQueue": lambda r: r["zk-fifo"]["offer_per_s"] / r["curator-simple"]["offer_per_s"],
}
print("per repetition (same server, interleaved):")
for rep in sorted(reps):
    r = reps[rep]
    print("  rep %d take/s: " % rep + "  ".join("%s %s" % (k, (r[k] or {}).get("take_per_s")) for k in sorted(r)))
    print("  rep %d take p50 us: " % rep + "  ".join("%s %s" % (k, p50(r[k], "take_us")) for k in sorted(r)))
    busy, loads = [], []
    for k in ("zk-fifo", "zk-4consumers", "zk-4shards"):
        try:
            busy.append("%s %s%%" % (k, open(os.path.join(out, "%s-rep%d.cpu" % (k, rep))).read().strip()))
        except OSError:
            pass
    for k in sorted(r):
        try:
            loads.append("%s %s" % (k, open(os.path.join(out, "%s-rep%d.load" % (k, rep))).read().split()[0]))
        except OSError:
            pass
    if busy:
        print("  rep %d machine CPU busy (every process): " % rep + "  ".join(busy))
    if loads:
        print("  rep %d load average (1 min) after each run: " % rep + "  ".join(loads))
print("same-run ratios, median over repetitions [each]:")
for name, f in rows.items():
    vals = []
    for rep in sorted(reps):
        try:
            vals.append(f(reps[rep]))
        except (KeyError, TypeError, ZeroDivisionError):
            pass
    if vals:
        med, t = statistics.median(vals), targets.get(name, "")
        verdict = ""
        if t:
            op, fig = t.split()
            verdict = "target %s %s: %s" % (op, fig, "met" if (med <= float(fig) if op == "<=" else med >= float(fig)) else "NOT met")
        print("  %-44s %6.2f  [%s]  %s" % (name, med, " ".join("%.2f" % v for v in vals), verdict))
print("requests per item, offer and take (server packets_received / items, no warm-up)")
for p in sorted(glob.glob(os.path.join(out, "cost-*.json"))):
    d = load(p)
    pk = open(p[:-5] + ".packets").read().split()
    if d:
        print("  %-24s %6.2f  (%d packets, %d items)" % (os.path.basename(p)[5:-5], (int(pk[1]) - int(pk[0])) / d["items"], int(pk[1]) - int(pk[0]), d["items"]))
PY
}

if [[ ${1:-} == --summary ]]; then
  summarize "$2"
  exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS=${PEERS:-$root/../shared/peers}
REPS=${REPS:-3} ITEMS=${ITEMS:-2000} PORT=${PORT:-22192}
out=${1:-$(mktemp -d)}
mkdir -p "$out"
work=$(mktemp -d)
trap '"$PEERS/zk.sh" stop "$work/zk" >/dev/null 2>&1 || true' EXIT
(cd "$root" && go build -o "$work/zkbench" ./cmd/zkbench)
[[ -f $PEERS/curator/build/peers.jar ]] || "$PEERS/curator/build.sh" >&2
"$PEERS/zk.sh" start-standalone "$PORT" "$work/zk" >&2
A=127.0.0.1:$PORT
packets() { "$PEERS/zk.sh" 4lw "$PORT" mntr | awk '/zk_packets_received/{print $2}'; }
cpu() { awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t, $5+$6}' /proc/stat; }
# run NAME CMD...: the program's last line into OUTDIR/NAME.json, with the
# server's packets_received before and after in OUTDIR/NAME.packets and
# the machine's CPU busy share over the run (/proc/stat, every process,
# the other sessions' too) in OUTDIR/NAME.cpu, and the load average at
# its end in OUTDIR/NAME.load.
run() {
  local name=$1; shift
  local before c0 c1; before=$(packets); c0=$(cpu)
  "$@" 2>>"$out/stderr.log" | tail -1 >"$out/$name.json" || true
  c1=$(cpu)
  echo "$before $(packets)" >"$out/$name.packets"
  echo "$c0 $c1" | awk '{t=$3-$1; printf "%.0f\n", t ? 100*(t-($4-$2))/t : 0}' >"$out/$name.cpu"
  cut -d' ' -f1-3 /proc/loadavg >"$out/$name.load"
  echo "$name: $(cut -c1-200 "$out/$name.json")" >&2
}
py=/usr/bin/python3
zb="$work/zkbench"
n=$ITEMS
for rep in $(seq 1 "$REPS"); do
  run zk-fifo-rep$rep "$zb" queue -zk "$A" -kind fifo -items "$n"
  run curator-simple-rep$rep "$PEERS/curator/run.sh" QueueBench "$A" queue=simple items="$n"
  run kazoo-queue-rep$rep $py "$PEERS/kazoo/queuebench.py" "$A" queue=queue items="$n"
  run zk-ack-rep$rep "$zb" queue -zk "$A" -kind ack -items "$n"
  run zk-consume-rep$rep "$zb" queue -zk "$A" -kind consume -items "$n"
  run curator-distributed-rep$rep "$PEERS/curator/run.sh" QueueBench "$A" queue=distributed items="$n"
  run kazoo-locking-rep$rep $py "$PEERS/kazoo/queuebench.py" "$A" queue=locking items="$n"
  run zk-priority-rep$rep "$zb" queue -zk "$A" -kind priority -items "$n"
  run zk-batch100-rep$rep "$zb" queue -zk "$A" -kind fifo -items $((n * 10)) -batch 100
  run zk-4consumers-rep$rep "$zb" queue -zk "$A" -kind fifo -items "$n" -consumers 4
  run zk-4shards-rep$rep "$zb" queue -zk "$A" -kind fifo -items "$n" -consumers 4 -shards 4
done
run cost-zkrecipes-fifo "$zb" queue -zk "$A" -kind fifo -items "$n" -warmup-items 0 -raw 1
run cost-zkrecipes-ack "$zb" queue -zk "$A" -kind ack -items "$n" -warmup-items 0 -raw 1
run cost-curator-simple "$PEERS/curator/run.sh" QueueBench "$A" queue=simple items="$n" warmup_items=0
run cost-kazoo-queue $py "$PEERS/kazoo/queuebench.py" "$A" queue=queue items="$n" warmup_items=0
"$PEERS/zk.sh" 4lw "$PORT" mntr >"$out/mntr.txt"
echo "results in $out" >&2
summarize "$out"
