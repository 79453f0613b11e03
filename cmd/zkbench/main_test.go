package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"one sample", ms(7), .99, 7 * time.Millisecond},
		{"p50 of four is the second", ms(1, 2, 3, 4), .50, 2 * time.Millisecond},
		{"p50 of five is the third", ms(1, 2, 3, 4, 5), .50, 3 * time.Millisecond},
		{"p90 of ten is the ninth", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), .90, 9 * time.Millisecond},
		{"p99 of ten is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), .99, 10 * time.Millisecond},
		{"p0 is the min", ms(1, 2, 3), 0, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	got, _ := json.Marshal(summary(d, micros))
	want := `{"n":100,"mean_us":50.5,"p50_us":50,"p90_us":90,"p99_us":99,"max_us":100}`
	if string(got) != want {
		t.Errorf("summary = %s, want %s", got, want)
	}
	got, _ = json.Marshal(summary(nil, millis))
	want = `{"n":0,"mean_ms":null,"p50_ms":null,"p90_ms":null,"p99_ms":null,"max_ms":null}`
	if string(got) != want {
		t.Errorf("empty summary = %s, want %s", got, want)
	}
}

// runBench runs zkbench with args and decodes its JSON line.
func runBench(t *testing.T, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("zkbench %s: exit %d, stderr: %s, stdout: %s", strings.Join(args, " "), code, stderr.String(), stdout.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		t.Fatalf("want one line, got %d: %s", n, stdout.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"bench", "impl", "impl_version", "connect", "params", "ok", "errors"} {
		if _, ok := out[k]; !ok {
			t.Errorf("field %q missing in %s", k, stdout.String())
		}
	}
	return out
}

func latency(t *testing.T, out map[string]any, key string) map[string]any {
	t.Helper()
	l, ok := out[key].(map[string]any)
	if !ok {
		t.Fatalf("%s missing: %v", key, out)
	}
	if n, _ := l["n"].(float64); n < 1 {
		t.Errorf("%s has no samples: %v", key, l)
	}
	return l
}

func TestLockBenchOnSim(t *testing.T) {
	out := runBench(t, "lock", "-zk", "sim", "-clients", "3", "-duration", "300ms", "-warmup", "50ms")
	for _, k := range []string{"acquire_us", "release_us", "cycle_us", "handoff_us"} {
		latency(t, out, k)
	}
	if out["max_holders"] != 1.0 || out["mutex_ok"] != true || out["ok"] != true {
		t.Errorf("max_holders %v, mutex_ok %v, ok %v", out["max_holders"], out["mutex_ok"], out["ok"])
	}
	if out["lock_nodes_left"] != 0.0 {
		t.Errorf("lock_nodes_left = %v", out["lock_nodes_left"])
	}
	if lo := out["per_client_min"].(float64); lo < 1 {
		t.Errorf("per_client_min = %v: a client was never served", lo)
	}
}

func TestRttBenchOnSim(t *testing.T) {
	out := runBench(t, "rtt", "-zk", "sim", "-n", "20", "-warmup", "5")
	for _, k := range []string{"exists_us", "get_us", "set_us", "create_us", "children_us", "delete_us", "delete_notify_us"} {
		latency(t, out, k)
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"nosuch"}, {"lock"}, {"lock", "-zk", "sim", "-clients", "0"}, {"rtt", "-zk", "sim", "extra"},
		{"rwlock", "-zk", "sim", "-readers", "0", "-writers", "0"},
		{"semaphore", "-zk", "sim", "-leases", "0"}, {"semaphore", "-zk", "sim", "-clients", "0"}, {"semaphore", "-zk", "sim", "-hold-us", "-1"},
		{"queue", "-zk", "sim", "-kind", "lifo"}, {"queue", "-zk", "sim", "-items", "0"}, {"queue", "-zk", "sim", "-consumers", "0"},
		{"queue", "-zk", "sim", "-kind", "priority", "-batch", "5"}, {"queue", "-zk", "sim", "-payload", "9"},
		{"barrier", "-zk", "sim", "-members", "1"}, {"barrier", "-zk", "sim", "-rounds", "0"},
		{"twophase", "-zk", "sim", "-participants", "0"}, {"twophase", "-zk", "sim", "-txs", "0"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code == 0 || stdout.Len() > 0 {
			t.Errorf("zkbench %q: exit %d, stdout %q; want a failure and no line", args, code, stdout.String())
		}
	}
}

func TestElectionBenchOnSim(t *testing.T) {
	out := runBench(t, "election", "-zk", "sim", "-participants", "4", "-rounds", "6", "-kill-rounds", "2")
	if out["ok"] != true || out["rounds"] != 6.0 {
		t.Errorf("ok %v, rounds %v, errors %v", out["ok"], out["rounds"], out["errors"])
	}
	if _, ok := out["first_leader_ms"].(float64); !ok {
		t.Errorf("first_leader_ms = %v", out["first_leader_ms"])
	}
	for _, k := range []string{"failover_ms", "delete_notify_ms"} {
		if n := latency(t, out, k)["n"]; n != 6.0 {
			t.Errorf("%s.n = %v, want 6", k, n)
		}
	}
	for _, k := range []string{"failover_over_delete_notify"} {
		if r, ok := out[k].(float64); !ok || r <= 0 {
			t.Errorf("%s = %v", k, out[k])
		}
	}
	kills, _ := out["kill_rounds"].([]any)
	if len(kills) != 2 {
		t.Fatalf("kill_rounds = %v, want 2", out["kill_rounds"])
	}
	for _, k := range kills {
		k := k.(map[string]any)
		if k["new_leader"] == "victim" || k["new_leader"] == nil || k["failover_ms"] == nil {
			t.Errorf("kill round %v", k)
		}
	}
}

func TestRWLockBenchOnSim(t *testing.T) {
	out := runBench(t, "rwlock", "-zk", "sim", "-readers", "3", "-writers", "2", "-hold-us", "200", "-duration", "300ms", "-warmup", "50ms")
	for _, k := range []string{"read_acquire_us", "write_acquire_us"} {
		latency(t, out, k)
	}
	if out["violations"] != 0.0 || out["rw_ok"] != true || out["ok"] != true || out["lock_nodes_left"] != 0.0 {
		t.Errorf("violations %v, rw_ok %v, ok %v, nodes left %v", out["violations"], out["rw_ok"], out["ok"], out["lock_nodes_left"])
	}
	if r, _ := out["max_concurrent_readers"].(float64); r < 2 {
		t.Errorf("max_concurrent_readers = %v: readers never overlapped", r)
	}
}

func TestSemaphoreBenchOnSim(t *testing.T) {
	out := runBench(t, "semaphore", "-zk", "sim", "-clients", "5", "-leases", "2", "-hold-us", "200", "-duration", "300ms", "-warmup", "50ms")
	for _, k := range []string{"acquire_us", "release_us", "cycle_us"} {
		latency(t, out, k)
	}
	if out["leases"] != 2.0 || out["mode"] != "contended" || out["violations"] != 0.0 || out["ok"] != true {
		t.Errorf("leases %v, mode %v, violations %v, ok %v", out["leases"], out["mode"], out["violations"], out["ok"])
	}
	if m := out["max_holders"].(float64); m < 1 || m > 2 {
		t.Errorf("max_holders = %v with 2 leases", m)
	}
	if _, ok := out["acq_per_s"].(float64); !ok {
		t.Errorf("acq_per_s = %v", out["acq_per_s"])
	}
	if out["lease_nodes_left"] != 0.0 {
		t.Errorf("lease_nodes_left = %v", out["lease_nodes_left"])
	}
	if lo := out["per_client_min"].(float64); lo < 1 {
		t.Errorf("per_client_min = %v: a client was never served", lo)
	}
	params := out["params"].(map[string]any)
	if params["hold_us"] != 200.0 || params["leases"] != 2.0 {
		t.Errorf("params = %v", params)
	}
}

func TestQueueBenchOnSim(t *testing.T) {
	for _, args := range [][]string{
		{"-kind", "fifo"},
		{"-kind", "fifo", "-batch", "7", "-producers", "2"},
		{"-kind", "ack", "-consumers", "3"},
		{"-kind", "priority", "-producers", "2"},
	} {
		out := runBench(t, append([]string{"queue", "-zk", "sim", "-items", "300", "-warmup-items", "20", "-raw", "50"}, args...)...)
		for _, k := range []string{"offer_us", "take_us", "raw_create_us", "raw_delete_us"} {
			latency(t, out, k)
		}
		if out["ok"] != true || out["received"] != 300.0 || out["duplicates"] != 0.0 || out["nodes_left"] != 0.0 {
			t.Errorf("%v: ok %v, received %v, duplicates %v, nodes left %v, errors %v", args, out["ok"], out["received"], out["duplicates"], out["nodes_left"], out["errors"])
		}
		// One consumer takes in queue order (priority: by priority).
		if args[len(args)-2] != "-consumers" && out["fifo"] != true {
			t.Errorf("%v: fifo %v, out of order %v", args, out["fifo"], out["out_of_order"])
		}
		if args[1] == "ack" {
			if n := latency(t, out, "ack_us")["n"]; n != 300.0 {
				t.Errorf("ack_us.n = %v, want 300", n)
			}
		}
		for _, k := range []string{"offer_per_s", "take_per_s", "offer_p50_per_create_p50", "take_p50_per_delete_p50"} {
			if v, _ := out[k].(float64); v <= 0 {
				t.Errorf("%v: %s = %v", args, k, out[k])
			}
		}
	}
}

func TestBarrierBenchOnSim(t *testing.T) {
	out := runBench(t, "barrier", "-zk", "sim", "-members", "4", "-rounds", "5")
	if out["ok"] != true || out["rounds"] != 5.0 || out["nodes_left"] != 0.0 {
		t.Errorf("ok %v, rounds %v, nodes left %v, errors %v", out["ok"], out["rounds"], out["nodes_left"], out["errors"])
	}
	for k, n := range map[string]float64{"enter_ms": 5, "leave_ms": 5, "total_ms": 5, "last_arrival_ms": 5, "create_notify_ms": 25} {
		if got := latency(t, out, k)["n"]; got != n {
			t.Errorf("%s.n = %v, want %v", k, got, n)
		}
	}
	if r, _ := out["last_arrival_p50_per_create_notify_p50"].(float64); r <= 0 {
		t.Errorf("last_arrival_p50_per_create_notify_p50 = %v", out["last_arrival_p50_per_create_notify_p50"])
	}
}

func TestTwophaseBenchOnSim(t *testing.T) {
	out := runBench(t, "twophase", "-zk", "sim", "-participants", "3", "-txs", "20")
	if out["ok"] != true || out["txs"] != 20.0 || out["aborted"] != 0.0 {
		t.Errorf("ok %v, txs %v, aborted %v, errors %v", out["ok"], out["txs"], out["aborted"], out["errors"])
	}
	for _, k := range []string{"commit_ms", "create_ms", "create_notify_ms"} {
		if n := latency(t, out, k)["n"]; n != 20.0 {
			t.Errorf("%s.n = %v, want 20", k, n)
		}
	}
	if r, _ := out["commit_p50_per_floor"].(float64); r <= 0 {
		t.Errorf("commit_p50_per_floor = %v", out["commit_p50_per_floor"])
	}
}

func TestScaleBenchOnSim(t *testing.T) {
	out := runBench(t, "scale", "-zk", "sim", "-handles", "300", "-paths", "10", "-conns", "3", "-idle", "500")
	if out["ok"] != true || out["goroutines_left_after_close"] != 0.0 {
		t.Errorf("ok %v, goroutines left %v, errors %v", out["ok"], out["goroutines_left_after_close"], out["errors"])
	}
	if out["goroutines_left_after_idle_pass"] != 0.0 {
		t.Errorf("goroutines left after the idle pass: %v", out["goroutines_left_after_idle_pass"])
	}
	// Each of 300 handles publishes at least OFFER, DETERMINE, ELECTED and
	// STOP, begun and completed, in its one acquire and release.
	if n, _ := out["events_published"].(float64); n < 300*8 {
		t.Errorf("events_published = %v, want at least %d", out["events_published"], 300*8)
	}
	if r, _ := out["events_per_s"].(float64); r <= 0 {
		t.Errorf("events_per_s = %v", out["events_per_s"])
	}
	for _, k := range []string{"idle_goroutines_per_handle", "idle_pass_goroutines_per_handle"} {
		if g, _ := out[k].(float64); g > 1 {
			t.Errorf("%s = %v: an idle handle costs more than one goroutine", k, g)
		}
	}
	for _, k := range []string{"idle_heap_bytes_per_handle", "idle_pass_heap_bytes_per_handle"} {
		if h, _ := out[k].(float64); h <= 0 || h > 16<<10 {
			t.Errorf("%s = %v, want (0, 16 KiB]", k, h)
		}
	}
}
