package testkit_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestFaultsLockFencesWrites is a user's chaos test: three workers take a
// lock and write under its guard while a seeded schedule cuts, expires,
// loses and delays replies on all three connections. Every write the
// simulator accepted (and answered) carries a token no lower than the one
// before, every
// kind of fault was injected, and after the faults stop every worker
// writes again.
func TestFaultsLockFencesWrites(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	setup := sim.Connect()
	defer setup.Close()
	if _, err := setup.Create(context.Background(), "/app", nil, zk.ModePersistent); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Create(context.Background(), "/app/resource", []byte("0"), zk.ModePersistent); err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		accepted = map[int32]int64{} // the resource's version after a write -> its token
		writes   = make([]int, 3)
	)
	worker := func(ctx context.Context, i int, conn zk.Conn) {
		l, err := lock.New(conn, "/app/lock")
		if err != nil {
			t.Error(err)
			return
		}
		defer l.Close()
		for ctx.Err() == nil {
			g, err := l.Acquire(ctx)
			if err != nil {
				continue // a lost session or a cut: try again
			}
			res, err := conn.Multi(ctx, g.Guard(), &zk.SetOp{Path: "/app/resource", Data: []byte(strconv.FormatInt(g.Token(), 10)), Version: zk.AnyVersion})
			if err == nil {
				mu.Lock()
				accepted[res[1].Stat.Version] = g.Token()
				writes[i]++
				mu.Unlock()
			}
			if err := l.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) && ctx.Err() == nil {
				t.Logf("worker %d: release: %v", i, err) // a lost hold is released already
			}
		}
	}

	conns := []zk.Conn{sim.Connect(), sim.Connect(), sim.Connect()}
	faults := testkit.NewFaults(t, sim)
	work, stopWork := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); worker(work, i, c) }()
	}
	chaos, stopChaos := context.WithCancel(context.Background())
	chaosDone := make(chan struct{})
	go func() { defer close(chaosDone); faults.Run(chaos, conns...) }()

	// Faults until every kind was injected, 40 in all, and every worker
	// wrote; then calm until every worker wrote again.
	waitUntil(t, 30*time.Second, func() bool {
		c, n := faults.Counts(), 0
		for _, k := range c {
			n += k
		}
		mu.Lock()
		defer mu.Unlock()
		return len(c) == len(testkit.FaultKinds) && n >= 40 && writes[0] > 0 && writes[1] > 0 && writes[2] > 0
	})
	stopChaos()
	<-chaosDone
	mu.Lock()
	before := append([]int(nil), writes...)
	mu.Unlock()
	waitUntil(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return writes[0] > before[0] && writes[1] > before[1] && writes[2] > before[2]
	})
	stopWork()
	wg.Wait()
	for _, c := range conns {
		c.Close()
	}

	mu.Lock()
	defer mu.Unlock()
	// A write whose reply was lost was applied unseen: its version is a gap.
	versions := slices.Sorted(maps.Keys(accepted))
	for i := 1; i < len(versions); i++ {
		if prev, tok := accepted[versions[i-1]], accepted[versions[i]]; tok < prev {
			t.Fatalf("write %d carries token %d, below the %d of write %d", versions[i], tok, prev, versions[i-1])
		}
	}
	t.Logf("%d guarded writes, per worker %v; faults: %s", len(accepted), writes, faults)
}

// waitUntil polls cond on a ticker until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("condition not met within %v", d)
		}
	}
}
