#!/usr/bin/env bash
# bench_peers.sh [OUTDIR]: zkrecipes against the ZooKeeper peers on one
# standalone server (forceSync=yes, as the peers run it), interleaved.
#
# Each repetition runs, at each client count, zkbench lock, go-zookeeper's
# Lock (peers/go/zklock) and Curator 5.4's InterProcessMutex (peers/curator
# LockBench), in an order that rotates between repetitions, reading the
# server's mntr before and after each (how many log flushes and requests
# each acquisition cost the server); then zkbench
# rtt, zkbench election beside Curator's ElectionBench (LeaderLatch), and
# the lock package's Go benchmarks (uncontended acquire+release
# against raw create+children+delete, each on its own forceSync server).
# Every JSON line lands in OUTDIR (default: a new temp dir) and a summary of
# medians and same-run ratios is printed at the end.
#
#   REPS=3 CLIENTS="4 16" DURATION=10 WARMUP=2 PORT=22181 BENCHTIME=3s
#   REV=HEAD PEERS=<repo>/../shared/peers
#
# bench_peers.sh --summary OUTDIR prints the summary of an earlier run.
set -euo pipefail

# summarize DIR: medians and same-run ratios of the JSON lines in DIR.
summarize() {
/usr/bin/python3 - "$1" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
def load(p):
    try:
        return json.loads(open(p).read().strip().splitlines()[-1])
    except Exception:
        return None
runs = {}
for p in glob.glob(os.path.join(out, "lock-*.json")):
    m = re.match(r"lock-(.+)-c(\d+)-rep(\d+)\.json", os.path.basename(p))
    runs.setdefault(int(m[2]), {}).setdefault(int(m[3]), {})[m[1]] = load(p)
print("contended lock, acq/s per repetition (same server, interleaved)")
for c in sorted(runs):
    reps = runs[c]
    ratios = []
    for rep in sorted(reps):
        r = reps[rep]
        val = {k: (v or {}).get("acq_per_s") if (v or {}).get("ok") else None for k, v in r.items()}
        peers = [val.get(k) for k in ("go-zookeeper", "curator") if val.get(k)]
        ratio = val.get("zkrecipes") / max(peers) if val.get("zkrecipes") and peers else None
        if ratio:
            ratios.append(ratio)
        print("  c=%-2d rep %d: " % (c, rep) + "  ".join("%s %s" % (k, val.get(k)) for k in ("zkrecipes", "go-zookeeper", "curator"))
              + ("   zkrecipes / best peer = %.2f" % ratio if ratio else ""))
    meds = {k: statistics.median([reps[r][k]["acq_per_s"] for r in reps if reps[r].get(k) and reps[r][k].get("ok")] or [0])
            for k in ("zkrecipes", "go-zookeeper", "curator")}
    print("  c=%-2d median: %s" % (c, "  ".join("%s %.1f" % kv for kv in meds.items()))
          + ("   median of same-run ratios %.2f" % statistics.median(ratios) if ratios else ""))
for c in sorted(runs):
    h = [r["zkrecipes"]["handoff_us"]["p50_us"] for r in runs[c].values()
         if (r.get("zkrecipes") or {}).get("handoff_us")]
    if h:
        print("zkrecipes c=%d handoff (Release called -> next Acquire returns) p50 per repetition (us): %s  median %.1f"
              % (c, " ".join("%.1f" % v for v in h), statistics.median(h)))
rtts = [load(p) for p in sorted(glob.glob(os.path.join(out, "rtt-zkrecipes-rep*.json")))]
rtts = [r for r in rtts if r and r.get("ok")]
if rtts:
    print("zkbench rtt, median over repetitions of p50 (us): " + "  ".join(
        "%s %.1f" % (op, statistics.median([r[op + "_us"]["p50_us"] for r in rtts]))
        for op in ("exists", "get", "set", "create", "children", "delete", "delete_notify") if op + "_us" in rtts[0]))
def mntr(p):
    r = {}
    try:
        for line in open(p):
            kv = line.split()
            if len(kv) == 2:
                try:
                    r[kv[0]] = float(kv[1])
                except ValueError:
                    pass
    except OSError:
        pass
    return r
print("server cost per acquisition (mntr deltas over warm-up + measured run; medians over repetitions):")
for c in sorted(runs):
    for impl in ("zkrecipes", "go-zookeeper", "curator"):
        fl, rq = [], []
        for rep, r in sorted(runs[c].items()):
            v = r.get(impl)
            a = mntr(os.path.join(out, "lock-%s-c%d-rep%d.mntr0" % (impl, c, rep)))
            b = mntr(os.path.join(out, "lock-%s-c%d-rep%d.mntr1" % (impl, c, rep)))
            k = "zk_cnt_sync_processor_batch_size"
            if not (v and v.get("ok") and k in a and k in b):
                continue
            n = v["acq_per_s"] * (v["params"].get("duration_s", 0) + v["params"].get("warmup_s", 0))
            if n:
                fl.append((b[k] - a[k]) / n)
                rq.append((b["zk_cnt_prep_process_time"] - a["zk_cnt_prep_process_time"]) / n)
        if fl:
            print("  c=%-2d %-12s log flushes (fsyncs) %.2f  requests %.2f" % (c, impl, statistics.median(fl), statistics.median(rq)))
for impl in ("zkrecipes", "curator"):
    el = [load(p) for p in sorted(glob.glob(os.path.join(out, "election-%s-rep*.json" % impl)))]
    el = [r for r in el if r and r.get("ok")]
    if el:
        fo = [r["failover_ms"]["p50_ms"] for r in el]
        kill = [k["failover_ms"] for r in el for k in r.get("kill_rounds", [])]
        print("election %-9s graceful failover p50 per repetition (ms): %s  median %.3f;  kill failover (ms): %s" % (
            impl, " ".join("%.3f" % v for v in fo), statistics.median(fo), " ".join("%.0f" % v for v in kill)))
        for key, what in (("failover_over_delete_notify", "failover p50 / delete_notify p50"),):
            dn = [r[key] for r in el if r.get(key)]
            if dn:
                print("election %-9s %s of the same rounds, per repetition: %s  median %.3f" % (
                    impl, what, " ".join("%.3f" % v for v in dn), statistics.median(dn)))
ratios = []
for p in sorted(glob.glob(os.path.join(out, "gobench-rep*.txt"))):
    ns = dict(re.findall(r"^Benchmark(\w+?)-\d+\s+\d+\s+([\d.]+) ns/op", open(p).read(), re.M))
    if "Uncontended" in ns and "RawCreateChildrenDelete" in ns:
        u, r = float(ns["Uncontended"]), float(ns["RawCreateChildrenDelete"])
        ratios.append(u / r)
        print("go bench %s: uncontended %.0f us, raw create+children+delete %.0f us, ratio %.3f" % (os.path.basename(p), u / 1e3, r / 1e3, u / r))
if ratios:
    print("go bench: median ratio uncontended / raw = %.3f" % statistics.median(ratios))
print("results in " + out)
PY
}

if [[ ${1:-} == --summary ]]; then summarize "$2"; exit; fi
repo=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PEERS:-$(cd "$repo/../shared/peers" && pwd)}
REPS=${REPS:-3}
CLIENTS=${CLIENTS:-4 16}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
PORT=${PORT:-22181}
BENCHTIME=${BENCHTIME:-3s}
out=${1:-$(mktemp -d -t zkrecipes-bench-XXXX)}
mkdir -p "$out"
work=$(mktemp -d -t zkrecipes-peers-XXXX)
cleanup() { "$PEERS/zk.sh" stop "$work/zk" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

log() { echo "[$(date +%T)] $*" | tee -a "$out/commands.txt" >&2; }

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "commit: $(git -C "$repo" rev-parse --short "${REV:-HEAD}")"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "kernel: $(uname -r)"
  echo "go: $(go version)"
  echo "java: $(java -version 2>&1 | head -1)"
  dpkg-query -W -f='pkg: ${Package} ${Version}\n' libzookeeper-java libcurator-recipes-java 2>/dev/null || true
} > "$out/machine.txt"

# Build everything first, into our own folder: zkrecipes from the commit
# REV (default HEAD; uncommitted changes are not measured), the Curator
# peers from a copy, so a build in the shared folder cannot pull the jar
# from under a run.
mkdir -p "$work/src"
git -C "$repo" archive "${REV:-HEAD}" | tar -x -C "$work/src"
(cd "$work/src" && go build -o "$work/zkbench" ./cmd/zkbench && go test -c -o "$work/lock.test" ./machines/lock)
(cd "$PEERS/go/zklock" && go build -o "$work/zklock" .)
cp -r "$PEERS/curator" "$work/curator"
rm -rf "$work/curator/build"
"$work/curator/build.sh" >&2

"$PEERS/zk.sh" start-standalone "$PORT" "$work/zk" > /dev/null
CS=127.0.0.1:$PORT

# run NAME CMD...: the command's JSON line goes to OUTDIR/NAME.json
run() {
  local name=$1; shift
  log "$name: $*"
  if ! timeout 300 "$@" > "$out/$name.json" 2> "$out/$name.err"; then
    log "  !! $name failed (see $out/$name.err)"
  fi
  [[ -s $out/$name.err ]] || rm -f "$out/$name.err"
}

lock_cmd() { # IMPL CLIENTS
  case $1 in
    zkrecipes) echo "$work/zkbench lock -zk $CS -clients $2 -duration ${DURATION}s -warmup ${WARMUP}s" ;;
    go-zookeeper) echo "$work/zklock $CS clients=$2 duration_s=$DURATION warmup_s=$WARMUP" ;;
    curator) echo "$work/curator/run.sh LockBench $CS clients=$2 duration_s=$DURATION warmup_s=$WARMUP" ;;
  esac
}

# Warm the server's JVM with every client (discarded).
for impl in zkrecipes go-zookeeper curator; do
  # shellcheck disable=SC2046
  timeout 120 $(DURATION=2 WARMUP=1 lock_cmd "$impl" 4) > /dev/null 2>&1 || true
done

impls=(zkrecipes go-zookeeper curator)
for rep in $(seq 1 "$REPS"); do
  for c in $CLIENTS; do
    for k in 0 1 2; do
      impl=${impls[$(( (k + rep - 1) % 3 ))]}
      "$PEERS/zk.sh" 4lw "$PORT" mntr > "$out/lock-$impl-c$c-rep$rep.mntr0" 2>/dev/null || true
      # shellcheck disable=SC2046
      run "lock-$impl-c$c-rep$rep" $(lock_cmd "$impl" "$c")
      "$PEERS/zk.sh" 4lw "$PORT" mntr > "$out/lock-$impl-c$c-rep$rep.mntr1" 2>/dev/null || true
    done
  done
  run "rtt-zkrecipes-rep$rep" "$work/zkbench" rtt -zk "$CS" -n 1000
  run "election-zkrecipes-rep$rep" "$work/zkbench" election -zk "$CS" -participants 5 -rounds 20 -kill-rounds 1 -victim-session 4s
  run "election-curator-rep$rep" "$work/curator/run.sh" ElectionBench "$CS" participants=5 rounds=20 kill_rounds=1 victim_session_ms=4000
  log "go benchmarks rep $rep"
  (cd "$work/src/machines/lock" && "$work/lock.test" -test.run '^$' \
    -test.bench 'Uncontended|RawCreateChildrenDelete' -test.benchtime "$BENCHTIME") \
    > "$out/gobench-rep$rep.txt" 2>&1 || log "  !! go benchmarks failed (see $out/gobench-rep$rep.txt)"
done

summarize "$out"
