package barrier_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Rounds on one path, each with a fault on a random member: its session
// expires while it waits in Enter (it enters again), its session expires
// inside (its Leave says so; the others leave without it), or its
// connection is cut while it waits (and comes back once the others are
// in), or, on the simulator, one of its writes is applied only after its
// next read. In every round no one passes Enter before all 4 called it, nor Leave
// before all called it; no node is left at the end.
func TestDoubleBarrierRoundsWithFaults(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path, n, rounds = "/barrier/faults", 4, 24
		g := newGroup(t, tg, path, n)
		rng := rand.New(rand.NewPCG(7, 11))
		counts := map[string]int{}
		for r := range rounds {
			victim := rng.IntN(n)
			kind := []string{"expire-waiting", "expire-inside", "cut", "late-write"}[rng.IntN(4)]
			if _, onSim := testkit.SimOf(tg); !onSim && kind == "late-write" {
				kind = "cut"
			}
			counts[kind]++
			if err := faultyRound(ctx, t, tg, g, victim, kind, counts); err != nil {
				t.Fatalf("round %d (%s on member %d): %v", r, kind, victim, err)
			}
		}
		if kids := children(t, g.conns[0], path); len(kids) != 0 {
			t.Fatalf("nodes left after %d rounds: %v", rounds, kids)
		}
		t.Logf("%d rounds: %v", rounds, counts)
	})
}

func faultyRound(ctx context.Context, t *testing.T, tg testkit.Target, g *group, victim int, kind string, counts map[string]int) error {
	g.arrived.Store(0)
	g.departed.Store(0)
	n := len(g.members)
	errs := make([]error, n)
	var wg sync.WaitGroup
	if kind == "late-write" {
		// One of the victim's writes in the round is applied only after
		// its next read (on the simulator: a server behind the leader).
		op := []testkit.OpKind{testkit.OpCreate, testkit.OpDelete, testkit.OpMulti}[victim%3]
		sim, _ := testkit.SimOf(tg)
		f := sim.LateNextWrite(g.conns[victim], op, "/barrier/")
		defer func() {
			if !f.Disarm() {
				counts["late-write taken"]++
			}
		}()
	}
	// The victim goes first, alone, and waits.
	victimIn := make(chan error, 1)
	g.arrived.Add(1)
	go func() { victimIn <- g.members[victim].Enter(ctx) }()
	waitState(t, g.members[victim], events.StateDetermine)
	switch kind {
	case "expire-waiting":
		tg.Expire(t, g.conns[victim])
		if err := <-victimIn; !errors.Is(err, barrier.ErrSessionLost) {
			return fmt.Errorf("the expired member's Enter: %v", err)
		}
		go func() { victimIn <- g.members[victim].Enter(ctx) }() // again, on its new session
	case "cut":
		tg.Disconnect(t, g.conns[victim])
	}
	for i := range n {
		if i != victim {
			wg.Go(func() { errs[i] = g.enter(ctx, i) })
		}
	}
	if kind == "cut" {
		// The others are all in Enter (or through it): let the victim back.
		for i := range n {
			if i != victim {
				waitEntering(t, g.members[i])
			}
		}
		tg.Reconnect(t, g.conns[victim])
	}
	wg.Wait()
	if err := <-victimIn; err != nil {
		return fmt.Errorf("member %d: enter: %w", victim, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if kind == "expire-inside" {
		tg.Expire(t, g.conns[victim])
		if err := g.members[victim].Leave(ctx); !errors.Is(err, barrier.ErrSessionLost) {
			return fmt.Errorf("the expired member's Leave: %v", err)
		}
		g.departed.Add(1) // it is out
	}
	for i := range n {
		if kind == "expire-inside" && i == victim {
			continue
		}
		wg.Go(func() { errs[i] = g.leave(ctx, i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitEntering waits until d waits in Enter, or has passed it.
func waitEntering(t *testing.T, d *barrier.DoubleBarrier) {
	t.Helper()
	for s := d.State(); s != events.StateDetermine && s != events.StateReady; s = d.State() {
		waitAny(t)
	}
}
