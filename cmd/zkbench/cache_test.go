package main

import (
	"bytes"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestTreeLayoutIsThePeers(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want [3]int
	}{
		{10000, [3]int{22, 484, 9494}},
		{1000, [3]int{10, 100, 890}},
		{30, [3]int{3, 9, 18}},
		{2, [3]int{1, 1, 0}},
		{1, [3]int{1, 0, 0}},
	} {
		l := treeLayout("/r", tt.n)
		if got := [3]int{len(l[0]), len(l[1]), len(l[2])}; got != tt.want {
			t.Errorf("treeLayout(%d) shape %v, want %v", tt.n, got, tt.want)
		}
	}
	l := treeLayout("/r", 30)
	if l[0][2] != "/r/a2" || l[1][4] != "/r/a1/b4" || l[2][10] != "/r/a1/b1/c10" {
		t.Errorf("treeLayout(30): %q %q %q", l[0][2], l[1][4], l[2][10])
	}
}

// checkCacheLine checks what every cache line says, whatever the target.
func checkCacheLine(t *testing.T, out map[string]any, nodes, changes, members int) {
	t.Helper()
	if out["ok"] != true || out["cached_nodes"] != float64(nodes+1) || out["nodes"] != float64(nodes) {
		t.Errorf("ok %v, nodes %v, cached_nodes %v, errors %v", out["ok"], out["nodes"], out["cached_nodes"], out["errors"])
	}
	for _, k := range []string{"change_us", "raw_change_us", "raw_change_get_us"} {
		if n := latency(t, out, k)["n"]; n != float64(changes) {
			t.Errorf("%s.n = %v, want %d", k, n, changes)
		}
	}
	for _, k := range []string{"load_ms", "raw_load_ms", "prepare_ms", "change_p50_per_raw_change_p50", "heap_bytes_per_node", "stack_bytes_per_node", "goroutines_per_node"} {
		if v, _ := out[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, out[k])
		}
	}
	// A cached node costs at least its 100 bytes of data.
	if h, _ := out["heap_bytes_per_node"].(float64); h < 100 {
		t.Errorf("heap_bytes_per_node = %v, want at least the data", out["heap_bytes_per_node"])
	}
	if members > 0 {
		if out["group_members"] != float64(members) {
			t.Errorf("group_members = %v, want %d", out["group_members"], members)
		}
		if h, _ := out["group_heap_bytes_per_member"].(float64); h < 100 {
			t.Errorf("group_heap_bytes_per_member = %v, want at least the data", out["group_heap_bytes_per_member"])
		}
	}
}

func TestCacheBenchOnSim(t *testing.T) {
	out := runBench(t, "cache", "-zk", "sim", "-nodes", "300", "-changes", "20", "-members", "50")
	checkCacheLine(t, out, 300, 20, 50)
	if out["load_requests"] != nil {
		t.Errorf("load_requests = %v on the simulator, want null", out["load_requests"])
	}
}

// On a real server the load's requests come from mntr: with
// WithMaxDepth(3) the leaves are read without a listing, so a bit more
// than one request per node; with no limit, about two.
func TestCacheBenchOnARealServer(t *testing.T) {
	srv := testkit.StartServer(t)
	for _, tt := range []struct {
		depth    string
		min, max float64
	}{{"3", 1, 1.5}, {"-1", 1.8, 2.5}} {
		out := runBench(t, "cache", "-zk", srv.Addr(), "-nodes", "1000", "-changes", "20", "-max-depth", tt.depth, "-members", "100")
		checkCacheLine(t, out, 1000, 20, 100)
		if r, _ := out["requests_per_node"].(float64); r < tt.min || r > tt.max {
			t.Errorf("-max-depth %s: requests_per_node = %v (load_requests %v), want in [%v, %v]", tt.depth, out["requests_per_node"], out["load_requests"], tt.min, tt.max)
		}
		if s, _ := out["shape"].([]any); len(s) != 3 || s[0] != 10.0 || s[1] != 100.0 || s[2] != 890.0 {
			t.Errorf("shape = %v, want [10 100 890]", out["shape"])
		}
	}
}

func TestCacheBenchBadArguments(t *testing.T) {
	for _, args := range [][]string{{"-nodes", "0"}, {"-batch", "0"}, {"-changes", "-1"}, {"-members", "-1"}, {"-data-bytes", "-1"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), append([]string{"cache", "-zk", "sim"}, args...), &stdout, &stderr); code == 0 || stdout.Len() > 0 {
			t.Errorf("zkbench cache %q: exit %d, stdout %q; want a failure and no line", args, code, stdout.String())
		}
	}
}
