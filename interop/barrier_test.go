package interop

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// startCuratorBarrier starts java/CuratorBarrier.java: a Curator
// DistributedDoubleBarrier member of path, of members members.
func startCuratorBarrier(t *testing.T, t0 time.Time, addr, path string, members int) *curatorPeer {
	t.Helper()
	p := startJava(t, t0, "curator", "CuratorBarrier.java", addr, path, strconv.Itoa(members))
	t.Logf("Curator DistributedDoubleBarrier(%s, %d), session %s, up in %v", path, members, p.session, time.Since(t0).Round(time.Millisecond))
	return p
}

// Curator's DistributedDoubleBarrier and ours share one barrier of 3: one
// Curator member and two of ours. No one passes Enter before the third
// arrives, whichever it is, and no one passes Leave before all have left;
// three rounds on one path, and nothing is left.
func TestDoubleBarrierWithCurator(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const path = "/interop/barrier"
	cur := startCuratorBarrier(t, t0, srv.Addr(), path, 3)
	var ours []*barrier.DoubleBarrier
	for range 2 {
		d, err := barrier.NewDouble(connect(t, srv.Addr()), path, 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		ours = append(ours, d)
	}
	check := connect(t, srv.Addr())
	for _, p := range []string{"/interop", path} {
		if _, err := check.Create(ctx, p, nil, zk.ModePersistent); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		// Ours enter first (round 0, 2) or Curator does (round 1).
		var entered sync.WaitGroup
		errs := make(chan error, 2)
		curatorFirst := round == 1
		if curatorFirst {
			cur.send("enter 10000")
			awaitChildren(t, ctx, check, path, 1)
		}
		for _, d := range ours {
			entered.Go(func() { errs <- d.Enter(ctx) })
		}
		if !curatorFirst {
			// Both of ours wait: 2 of 3.
			kids := awaitChildren(t, ctx, check, path, 2)
			select {
			case err := <-errs:
				t.Fatalf("round %d: ours passed Enter with 2 of 3 in (%v): %v", round, kids, err)
			case <-time.After(100 * time.Millisecond):
			}
			cur.send("enter 10000")
		}
		cur.await("ENTERED")
		entered.Wait()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		// Leave: Curator first; it returns only once ours have left.
		cur.send("leave 10000")
		if _, ok := cur.awaitWithin("LEFT", 100*time.Millisecond); ok {
			t.Fatalf("round %d: Curator left while ours were in", round)
		}
		var left sync.WaitGroup
		for _, d := range ours {
			left.Go(func() { errs <- d.Leave(ctx) })
		}
		cur.await("LEFT")
		left.Wait()
		for range 2 {
			if err := <-errs; err != nil && !errors.Is(err, barrier.ErrNotEntered) {
				t.Fatalf("round %d: leave: %v", round, err)
			}
		}
		t.Logf("round %d done at %s", round, ms(time.Since(t0)))
	}
	if kids := children(t, ctx, check, path); len(kids) != 0 {
		t.Fatalf("nodes left after 3 rounds: %v", kids)
	}
}
