package testkit

import (
	"slices"
	"testing"
	"time"
)

// TestFaultsSameSeedSamePlan: a seed replays the same faults, in the same
// order, on the same connections, with the same pauses.
func TestFaultsSameSeedSamePlan(t *testing.T) {
	sim := NewSim()
	defer sim.Close()
	plan := func(seed int64) []plannedFault {
		f := NewFaults(t, sim, WithFaultSeed(seed))
		var out []plannedFault
		for range 200 {
			out = append(out, f.next(5))
		}
		return out
	}
	a, b, c := plan(7), plan(7), plan(8)
	if !slices.Equal(a, b) {
		t.Fatal("seed 7 gave two different schedules")
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
	kinds := map[FaultKind]bool{}
	for _, p := range a {
		kinds[p.kind] = true
		if p.conn < 0 || p.conn >= 5 || p.wait < 5*time.Millisecond || p.wait > 50*time.Millisecond {
			t.Fatalf("step out of range: %+v", p)
		}
	}
	if len(kinds) != len(FaultKinds) {
		t.Fatalf("200 steps drew only %v", kinds)
	}
}

func TestFaultsSeedFromEnv(t *testing.T) {
	t.Setenv(FaultSeedEnv, "42")
	sim := NewSim()
	defer sim.Close()
	if f := NewFaults(t, sim, WithFaultSeed(1)); f.Seed() != 42 {
		t.Fatalf("seed %d, want 42 from %s", f.Seed(), FaultSeedEnv)
	}
}
