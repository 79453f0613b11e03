#!/usr/bin/env bash
# bench_cache.sh [OUTDIR]: the tree cache against the peers' TreeCaches on
# one standalone ZooKeeper (forceSync=yes), interleaved.
#
# Each repetition runs, on one server: zkbench cache (with group.Watch of
# as many members as nodes, for its memory), Curator's TreeCacheBench
# (TreeCache, max_depth=3) and kazoo's treecachebench.py (TreeCache, no
# max depth). Each builds the same tree of NODES nodes (depth 3, 100-byte
# data), loads it once unmeasured, then times a load (load_ms), 200 sets
# of random leaves to the cache's NODE_UPDATED (change_us) and as many raw
# sets to a plain watch event (raw_change_us), and counts the server's
# packets_received over the load (requests_per_node). JSON lines land in
# OUTDIR (default: a new temp dir), with the machine's CPU busy share
# (every process, other sessions' too) and the server's CPU seconds over
# each run; a summary of medians and same-run ratios is printed at the
# end.
#
#   REPS=3 NODES=10000 PORT=22194 PEERS=<repo>/../shared/peers
#
# bench_cache.sh --summary OUTDIR prints the summary of an earlier run.
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
def side(p):
    try:
        return open(p).read().strip()
    except OSError:
        return "?"
reps = {}
for p in glob.glob(os.path.join(out, "*-rep*.json")):
    m = re.match(r"(.+)-rep(\d+)\.json", os.path.basename(p))
    reps.setdefault(int(m[2]), {})[m[1]] = load(p)
def p50(d, k):
    return d[k]["p50_us"]
names = ("zkrecipes", "curator", "kazoo")
print("per repetition (same server, interleaved; cpu: machine busy %, server CPU s over the whole run):")
for rep in sorted(reps):
    r = reps[rep]
    for k in names:
        d = r.get(k)
        if not d:
            print("  rep %d %-9s failed (see %s-rep%d.json)" % (rep, k, k, rep))
            continue
        print("  rep %d %-9s load %7.1f ms  change p50 %7.1f us  raw p50 %7.1f us  req/node %s  cpu %s%% %ss" % (
            rep, k, d["load_ms"], p50(d, "change_us"), p50(d, "raw_change_us"), d["requests_per_node"],
            side(os.path.join(out, "%s-rep%d.cpu" % (k, rep))), side(os.path.join(out, "%s-rep%d.srvcpu" % (k, rep)))))
def faster_peer(r):
    return min(r["curator"]["load_ms"], r["kazoo"]["load_ms"])
rows = {
    "load: faster peer's load_ms / ours (target >= 1.5)": lambda r: faster_peer(r) / r["zkrecipes"]["load_ms"],
    "load: Curator's load_ms / ours": lambda r: r["curator"]["load_ms"] / r["zkrecipes"]["load_ms"],
    "load: kazoo's load_ms / ours": lambda r: r["kazoo"]["load_ms"] / r["zkrecipes"]["load_ms"],
    "load: ours / the same reads by hand (raw_load_ms)": lambda r: r["zkrecipes"]["load_ms"] / r["zkrecipes"]["raw_load_ms"],
    "change p50 / raw change p50, ours (target <= 1.1)": lambda r: p50(r["zkrecipes"], "change_us") / p50(r["zkrecipes"], "raw_change_us"),
    "change p50 / raw change p50, Curator": lambda r: p50(r["curator"], "change_us") / p50(r["curator"], "raw_change_us"),
    "change p50 / raw change p50, kazoo": lambda r: p50(r["kazoo"], "change_us") / p50(r["kazoo"], "raw_change_us"),
    "change p50 / raw change+get p50, ours (the floor)": lambda r: p50(r["zkrecipes"], "change_us") / p50(r["zkrecipes"], "raw_change_get_us"),
    "change p50: Curator's / ours": lambda r: p50(r["curator"], "change_us") / p50(r["zkrecipes"], "change_us"),
}
print("same-run ratios, median over repetitions [each]:")
for name, f in rows.items():
    vals = []
    for rep in sorted(reps):
        try:
            vals.append(f(reps[rep]))
        except (KeyError, TypeError, ZeroDivisionError):
            pass
    if vals:
        print("  %-52s %6.2f  [%s]" % (name, statistics.median(vals), " ".join("%.2f" % v for v in vals)))
print("medians over repetitions:")
def med(k, f):
    vals = []
    for rep in sorted(reps):
        try:
            vals.append(f(reps[rep][k]))
        except (KeyError, TypeError):
            pass
    return statistics.median(vals) if vals else None
for k in names:
    print("  %-9s load_ms %s  change p50 %s us  raw change p50 %s us  requests_per_node %s" % (
        k, med(k, lambda d: d["load_ms"]), med(k, lambda d: p50(d, "change_us")),
        med(k, lambda d: p50(d, "raw_change_us")), med(k, lambda d: d["requests_per_node"])))
print("  zkrecipes raw_load_ms %s  raw change+get p50 %s us" % (
    med("zkrecipes", lambda d: d["raw_load_ms"]), med("zkrecipes", lambda d: p50(d, "raw_change_get_us"))))
print("memory (zkrecipes, after a GC, loaded minus before):")
for what, pre in (("tree cache, per node", ""), ("group.Watch, per member", "group_")):
    unit = "member" if pre else "node"
    print("  %-24s heap %s B  goroutine stacks %s B  goroutines %s" % (what,
        med("zkrecipes", lambda d: d[pre + "heap_bytes_per_" + unit]),
        med("zkrecipes", lambda d: d[pre + "stack_bytes_per_" + unit]),
        med("zkrecipes", lambda d: d[pre + "goroutines_per_" + unit])))
try:
    print("load average at the start: " + open(os.path.join(out, "loadavg")).read().strip())
except OSError:
    pass
PY
}

if [[ ${1:-} == --summary ]]; then
  summarize "$2"
  exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS=${PEERS:-$root/../shared/peers}
REPS=${REPS:-3} NODES=${NODES:-10000} PORT=${PORT:-22194}
out=${1:-$(mktemp -d)}
mkdir -p "$out"
work=$(mktemp -d)
trap '"$PEERS/zk.sh" stop "$work/zk" >/dev/null 2>&1 || true' EXIT
py=/usr/bin/python3 # Debian's kazoo (python3-kazoo): a pyenv python3 first on PATH cannot see it
$py -c 'import kazoo' 2>/dev/null || { echo "bench_cache.sh: $py has no kazoo: apt-get install python3-kazoo" >&2; exit 1; }
(cd "$root" && go build -o "$work/zkbench" ./cmd/zkbench)
[[ -f $PEERS/curator/build/peers.jar ]] || "$PEERS/curator/build.sh" >&2
"$PEERS/zk.sh" start-standalone "$PORT" "$work/zk" >&2
A=127.0.0.1:$PORT
srvpid=$(<"$work/zk/node1/pid")
cut -d' ' -f1-3 /proc/loadavg >"$out/loadavg"
cpu() { awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t, $5+$6}' /proc/stat; }
srvcpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)/hz}' "/proc/$srvpid/stat"; }
# run NAME CMD...: the program's last line into OUTDIR/NAME.json, the
# machine's CPU busy share over the run (/proc/stat, every process) in
# OUTDIR/NAME.cpu and the server's CPU seconds in OUTDIR/NAME.srvcpu.
run() {
  local name=$1; shift
  local c0 s0 c1 s1; c0=$(cpu); s0=$(srvcpu)
  "$@" 2>>"$out/stderr.log" | tail -1 >"$out/$name.json" || true
  c1=$(cpu); s1=$(srvcpu)
  echo "$c0 $c1" | awk '{t=$3-$1; printf "%.0f\n", t ? 100*(t-($4-$2))/t : 0}' >"$out/$name.cpu"
  echo "$s0 $s1" | awk '{printf "%.1f\n", $2-$1}' >"$out/$name.srvcpu"
  echo "$name: $(cut -c1-200 "$out/$name.json")" >&2
}
for rep in $(seq 1 "$REPS"); do
  run zkrecipes-rep$rep "$work/zkbench" cache -zk "$A" -nodes "$NODES" -members "$NODES"
  run curator-rep$rep "$PEERS/curator/run.sh" TreeCacheBench "$A" nodes="$NODES"
  run kazoo-rep$rep $py "$PEERS/kazoo/treecachebench.py" "$A" nodes="$NODES"
done
"$PEERS/zk.sh" 4lw "$PORT" mntr >"$out/mntr.txt"
echo "results in $out" >&2
summarize "$out"
