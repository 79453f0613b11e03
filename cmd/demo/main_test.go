package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

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
	c := &cluster{servers: []string{srv.Addr()}, where: "ZooKeeper " + srv.Addr()}
	for name, run := range map[string]func() error{
		"lock":      func() error { return lockScenario(ctx, c, p, 3, 2, time.Millisecond) },
		"election":  func() error { return electionScenario(ctx, c, p) },
		"semaphore": func() error { return semaphoreScenario(ctx, c, p, 2, time.Millisecond) },
		"rwlock":    func() error { return rwlockScenario(ctx, c, p) },
		"queue":     func() error { return queueScenario(ctx, c, p, 5, time.Millisecond) },
		"barrier":   func() error { return barrierScenario(ctx, c, p, time.Millisecond) },
		"2pc":       func() error { return twophaseScenario(ctx, c, p) },
	} {
		if err := run(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out.String())
		}
	}
}

// -trace-json: the scenario's events as Chrome Trace Event JSON, one lane
// per worker.
func TestTraceJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, trace bytes.Buffer
	p := newPrinter(&out)
	p.collect = true
	if err := barrierScenario(ctx, &cluster{sim: sim.New(), where: "the simulator"}, p, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := p.trace(&trace); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(trace.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	lanes := map[string]bool{}
	entered := 0
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			lanes[e.Args["name"].(string)] = true
		}
		if e.Ph == "i" && e.Name == "ENTERED" {
			entered++
		}
	}
	if len(lanes) != 5 || entered != 5 {
		t.Errorf("lanes %v, ENTERED instants %d; want 5 workers, 5", lanes, entered)
	}
}
