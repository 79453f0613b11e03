package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zkflags"
	"github.com/zkrecipes/zkrecipes/testkit"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestScenariosOnSim(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	p := newPrinter(&out)
	c := &cluster{sim: sim.New(), where: "the simulator"}
	if err := lockScenario(ctx, c, p, 4, 2, time.Millisecond); err != nil {
		t.Fatalf("lock: %v\n%s", err, out.String())
	}
	if err := electionScenario(ctx, c, p); err != nil {
		t.Fatalf("election: %v\n%s", err, out.String())
	}
	if err := rwlockScenario(ctx, c, p); err != nil {
		t.Fatalf("rwlock: %v\n%s", err, out.String())
	}
	if err := queueScenario(ctx, c, p, 5, time.Millisecond); err != nil {
		t.Fatalf("queue: %v\n%s", err, out.String())
	}
	if err := barrierScenario(ctx, c, p, time.Millisecond); err != nil {
		t.Fatalf("barrier: %v\n%s", err, out.String())
	}
	if err := twophaseScenario(ctx, c, p); err != nil {
		t.Fatalf("2pc: %v\n%s", err, out.String())
	}
	if err := secureScenario(ctx, c, p); err != nil {
		t.Fatalf("secure: %v\n%s", err, out.String())
	}
	if err := discoveryScenario(ctx, c, p); err != nil {
		t.Fatalf("discovery: %v\n%s", err, out.String())
	}
	// The item consumer-3 held comes again (in whatever state the taker's
	// machine is then: READY, or DETERMINE while it lists).
	if !regexp.MustCompile(`consumer-[12]  REDELIVERED +[A-Z]+ +seq=0000000000`).MatchString(out.String()) {
		t.Errorf("output lacks order-0's REDELIVERED:\n%s", out.String())
	}
	for _, want := range []string{
		"acquisitions per worker: worker-1 2, worker-2 2, worker-3 2, worker-4 2",
		"maximum concurrent holders (measured): 1",
		"ELECTED_COMPLETE",
		"(resigned) → ",
		"(crashed) → ",
		"holders: reader-1 reader-2 reader-3",
		"holders: writer-1 reader-1",
		"orders acked: 11 of 11; per consumer:",
		"consumer-3 0 (crashed holding order-0)",
		"consumer-3 crashes: its session expired",
		"items left in the queue: 0",
		"all 5 started after the fifth arrived",
		"worker-3 crashes inside: its session expired",
		"worker-3    LOST",
		"the 4 others left together; nodes left: 0",
		"order-1: warehouse committed, payment committed, shipping committed",
		"order-2: warehouse aborted: payment: card declined, payment aborted: payment: card declined",
		"order-3: warehouse aborted: coordinator session ended",
		"the coordinator crashes: its session expired",
		"bob deletes alice's node: refused: zk: not authenticated",
		"alice held the lock throughout: true",
		"the client sees [inst-1 inst-2 inst-3]; its picks (round robin): inst-1 inst-2 inst-3 inst-1",
		"inst-2: its session expired; the client saw it leave: [inst-1 inst-3]",
		"client      MEMBER_LEFT        READY     instance=inst-2",
		"the client saw: [inst-1 inst-2 inst-3], then [inst-1 inst-3], then [inst-1 inst-2 inst-3]",
		"inst-2      LOST",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSemaphoreScenarioOnSim(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	c := &cluster{sim: sim.New(), where: "the simulator"}
	if err := semaphoreScenario(ctx, c, newPrinter(&out), 2, time.Millisecond); err != nil {
		t.Fatalf("semaphore: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"leases taken per worker: worker-1 1 (lost with its session), worker-2 3, worker-3 3, worker-4 3, worker-5 3, worker-6 3, worker-7 3, worker-8 3",
		"maximum concurrent holders (measured): 3 while worker-1 held, 3 after its session ended",
		"worker-1: its session expired; its Lease.Lost() closed",
		"worker-1    LOST",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Every scenario on a real server: there a crash closes the connection
// (the server deletes the session's nodes at once) where the simulator
// expires the session, so the causes the scenarios check differ.
func TestScenariosOnARealServer(t *testing.T) {
	srv := testkit.StartServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	p := newPrinter(&out)
	c := newCluster(zkflags.Settings{Servers: []string{srv.Addr()}}, srv.Addr())
	for name, run := range map[string]func() error{
		"lock":      func() error { return lockScenario(ctx, c, p, 3, 2, time.Millisecond) },
		"election":  func() error { return electionScenario(ctx, c, p) },
		"semaphore": func() error { return semaphoreScenario(ctx, c, p, 2, time.Millisecond) },
		"rwlock":    func() error { return rwlockScenario(ctx, c, p) },
		"queue":     func() error { return queueScenario(ctx, c, p, 5, time.Millisecond) },
		"barrier":   func() error { return barrierScenario(ctx, c, p, time.Millisecond) },
		"2pc":       func() error { return twophaseScenario(ctx, c, p) },
		"secure":    func() error { return secureScenario(ctx, c, p) },
		"discovery": func() error { return discoveryScenario(ctx, c, p) },
	} {
		if err := run(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out.String())
		}
	}
	if want := "inst-2: the server expired its session; the client saw it leave: [inst-1 inst-3]"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

// -trace-json and -html: the scenario's events and spans as Chrome Trace
// Event JSON and as a page, one lane per worker.
func TestTraceJSONAndHTML(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	traceFile, htmlFile := filepath.Join(dir, "trace.json"), filepath.Join(dir, "timeline.html")
	var out, stderr bytes.Buffer
	if code := run(ctx, []string{"-scenario", "barrier", "-trace-json", traceFile, "-html", htmlFile}, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), out.String())
	}
	b, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Ph   string         `json:"ph"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	lanes := map[string]bool{}
	entered, spans := 0, 0
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" && !strings.Contains(e.Args["name"].(string), " spans") {
			lanes[e.Args["name"].(string)] = true
		}
		if e.Ph == "i" && e.Name == "ENTERED" {
			entered++
		}
		if e.Cat == "span" && e.Args["span.kind"] == "client" {
			spans++
		}
	}
	if len(lanes) != 5 || entered != 5 || spans == 0 {
		t.Errorf("lanes %v, ENTERED instants %d, ZooKeeper request spans %d; want 5 workers, 5, some", lanes, entered, spans)
	}
	page, err := os.ReadFile(htmlFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := actorLanes(string(page)), actorsOf(out.String()); !slices.Equal(got, want) {
		t.Errorf("page's lanes %v, want the demo's actors %v", got, want)
	}
	if !strings.Contains(string(page), ">worker-3 crashes</span>") {
		t.Errorf("page lacks the crash")
	}
}

// actorLanes are the lanes of a timeline page's recipe groups, sorted.
func actorLanes(page string) []string {
	if i := strings.Index(page, "<h2>spans of no recipe instance</h2>"); i >= 0 {
		page = page[:i]
	}
	var out []string
	for _, m := range regexp.MustCompile(`data-lane="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}

// actorsOf are the "who" of the demo's event lines, sorted.
func actorsOf(out string) []string {
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^ +[0-9.]+ms  ([^ =][^ ]*) +[A-Z_]+ `).FindAllStringSubmatch(out, -1) {
		seen[m[1]] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// -h says what the demo shows; a lock's events are in lock words; the
// waterfall ends the output.
func TestHelpLockWordsWaterfall(t *testing.T) {
	var out, stderr bytes.Buffer
	if code := run(t.Context(), []string{"-h"}, &out, &stderr); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, want := range []string{"a tour of zkrecipes", "election   participants elect a leader", "-html", "-otlp", "OTEL_EXPORTER_OTLP_"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, stderr.String())
		}
	}
	if code := run(t.Context(), []string{"-scenario", "nope"}, &out, &stderr); code != 2 {
		t.Errorf("unknown scenario: exit %d, want 2", code)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out.Reset()
	if code := run(ctx, []string{"-scenario", "lock", "-workers", "2", "-rounds", "1"}, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	s := out.String()
	if !regexp.MustCompile(`worker-\d +ACQUIRED +HELD +term=1`).MatchString(s) || !regexp.MustCompile(`worker-\d +RELEASED +STOP`).MatchString(s) {
		t.Errorf("no ACQUIRED/HELD or RELEASED line:\n%s", s)
	}
	if regexp.MustCompile(`(?m)^ +[0-9.]+ms  worker.*(ELECTED|LEADER)`).MatchString(s) {
		t.Errorf("a lock in election words:\n%s", s)
	}
	w := s[strings.Index(s, "span waterfall:"):]
	if !regexp.MustCompile(`(?m)^lock\.acquire /demo/lock: 2 calls, p50 `).MatchString(w) || !regexp.MustCompile(`(?m)^    (create|children|exists|multi|delete) /demo/lock +\S+ \|[ █]{40}\|$`).MatchString(w) {
		t.Errorf("waterfall:\n%s", w)
	}
}

// -otlp sends the spans to the collector the OTEL_EXPORTER_OTLP_*
// variables name.
func TestOTLP(t *testing.T) {
	got := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- fmt.Sprintf("%s %s %s %d", r.Method, r.URL.Path, r.Header.Get("Content-Type"), len(body)):
		default:
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, stderr bytes.Buffer
	if code := run(ctx, []string{"-scenario", "lock", "-workers", "2", "-rounds", "1", "-otlp", "-waterfall=false"}, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	select {
	case req := <-got:
		if !strings.HasPrefix(req, "POST /v1/traces application/x-protobuf ") || strings.HasSuffix(req, " 0") {
			t.Errorf("collector got %q", req)
		}
	default:
		t.Error("the collector got nothing")
	}
}
