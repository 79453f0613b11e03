package interop

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// startCuratorSemaphore starts java/CuratorSemaphore.java: a Curator
// InterProcessSemaphoreV2 of maxLeases on path, driven over its stdin
// like a curatorPeer, and waits until it is connected. It quits when the
// test ends.
func startCuratorSemaphore(t *testing.T, t0 time.Time, addr, path string, maxLeases int) *curatorPeer {
	t.Helper()
	p := startJava(t, t0, "curator", "CuratorSemaphore.java", addr, path, strconv.Itoa(maxLeases))
	t.Logf("Curator InterProcessSemaphoreV2(%s, %d), session %s, up in %v", path, maxLeases, p.session, time.Since(t0).Round(time.Millisecond))
	return p
}

// Curator's InterProcessSemaphoreV2 and ours share one path of 2 leases:
// each counts the other's leases, so together they never hold more than
// 2; a lease one gives back goes to the other's waiter; both name their
// nodes _c_<uuid>-lease-<seq10> under <path>/leases; Holders reports
// Curator's lease beside ours.
func TestSemaphoreWithCurator(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const path = "/interop/semaphore"
	leases := semaphore.LeasesDir(path)
	conn := connect(t, srv.Addr())
	cur := startCuratorSemaphore(t, t0, srv.Addr(), path, 2)
	s, err := semaphore.New(conn, path, 2, semaphore.WithID("go"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sub := s.Subscribe()
	defer sub.Close()

	// Curator takes the first lease, on the path it creates (no data).
	curNode := zk.Join(leases, cur.ask("acquire 5000", "ACQUIRED"))
	checkName(t, "Curator's", curNode, "lease-")
	// Ours takes the second: Curator's counts as one, and ours is
	// recorded in the path's data.
	l1, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkName(t, "our", l1.Node(), "lease-")
	if zk.Parent(l1.Node()) != leases {
		t.Errorf("our lease %s is not in %s", l1.Node(), leases)
	}
	if data, _, err := conn.Get(ctx, path); err != nil || string(data) != "2" {
		t.Errorf("the path's data = %q, %v; want our maxLeases, 2", data, err)
	}
	hs, err := semaphore.Holders(ctx, conn, path)
	if err != nil || len(hs) != 2 || hs[0].Node != curNode || hs[1].Node != l1.Node() || hs[1].ID != "go" {
		t.Fatalf("Holders = %+v, %v; want Curator's %s, then ours %s", hs, err, curNode, l1.Node())
	}

	// Both leases are taken: our TryAcquire says no, Curator's acquire
	// times out, and neither leaves a lease node behind.
	if ok, _, err := s.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire with Curator's and our lease held = %t, %v", ok, err)
	}
	start := time.Now()
	cur.ask("acquire 300", "TIMEOUT")
	t.Logf("Curator acquire(300ms) with both leases held: TIMEOUT after %s", ms(time.Since(start)))
	if kids := awaitChildren(t, ctx, conn, leases, 2); kids[0] != zk.Base(curNode) || kids[1] != zk.Base(l1.Node()) {
		t.Fatalf("leases %v; want only Curator's and ours", kids)
	}

	// Our waiter gets the lease Curator gives back.
	got := make(chan error, 1)
	var l2 *semaphore.Lease
	go func() {
		var err error
		l2, err = s.Acquire(ctx)
		got <- err
	}()
	testkit.WaitEvent(t, sub, events.ReadyStart)
	select {
	case err := <-got:
		t.Fatalf("Acquire returned (%v) with both leases held", err)
	default:
	}
	start = time.Now()
	if name := cur.ask("release", "RELEASED"); zk.Join(leases, name) != curNode {
		t.Fatalf("Curator released %s, not its lease %s", name, curNode)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(step):
		t.Fatalf("our Acquire did not return within %v of Curator's release", step)
	}
	t.Logf("hand-over Curator release -> our grant: %s (command to Curator included)", ms(time.Since(start)))

	// Curator's waiter gets the lease we give back, and not before.
	cur.send("acquire 10000")
	kids := awaitChildren(t, ctx, conn, leases, 3)
	curWaiting := zk.Join(leases, kids[2])
	checkName(t, "Curator's waiting", curWaiting, "lease-")
	if got := []string{zk.Join(leases, kids[0]), zk.Join(leases, kids[1])}; !slices.Equal(got, []string{l1.Node(), l2.Node()}) {
		t.Fatalf("leases %v; want ours first", kids)
	}
	if _, ok := cur.awaitWithin("ACQUIRED", 300*time.Millisecond); ok {
		t.Fatal("Curator acquired a third lease while we hold two")
	}
	start = time.Now()
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if name := cur.await("ACQUIRED"); zk.Join(leases, name) != curWaiting {
		t.Errorf("Curator acquired %s; it waited on %s", name, curWaiting)
	}
	t.Logf("hand-over our Release -> Curator acquired: %s (stdout pipe included)", ms(time.Since(start)))
	if ok, _, err := s.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire with Curator's and our lease held = %t, %v", ok, err)
	}

	// Everything given back: nothing left in the leases directory.
	cur.ask("release", "RELEASED")
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	awaitEmpty(t, ctx, conn, leases, "no lease node left")
}

// awaitEmpty waits, on child watches, until dir has no children (or is
// gone).
func awaitEmpty(t *testing.T, ctx context.Context, c zk.Conn, dir, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	for {
		kids, _, ch, err := c.ChildrenW(ctx, dir)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if len(kids) == 0 {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s: %s has %v after %v", what, dir, kids, step)
		}
	}
}
