package interop

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A Curator InterProcessMutex and our lock exclude each other on one path,
// in queue order both ways, and name their nodes alike.
func TestLockWithCuratorMutex(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const dir = "/interop/mutex"
	conn := connect(t, srv.Addr())
	cur := startCurator(t, t0, srv.Addr(), "mutex", dir, "curator")

	l, err := lock.New(conn, dir, lock.WithID("go"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sub := l.Subscribe()
	defer sub.Close()

	// Curator holds: our TryAcquire says no and leaves nothing behind.
	curNode := cur.ask("acquire 5000", "ACQUIRED")
	checkName(t, "Curator's", curNode, "lock-")
	start := time.Now()
	ok, _, err := l.TryAcquire(ctx)
	if err != nil || ok {
		t.Fatalf("TryAcquire while Curator holds = %v, %v; want false, nil", ok, err)
	}
	t.Logf("TryAcquire while Curator holds: false in %s", ms(time.Since(start)))
	// TryAcquire answers before its node's delete completes: wait for it.
	if kids := awaitChildren(t, ctx, conn, dir, 1); dir+"/"+kids[0] != curNode {
		t.Fatalf("after TryAcquire the lock holds %v; want only Curator's %s", kids, curNode)
	}

	// Our Acquire queues behind Curator's node and waits.
	type acquired struct {
		g   *lock.Grant
		err error
	}
	got := make(chan acquired, 1)
	go func() {
		g, err := l.Acquire(ctx)
		got <- acquired{g, err}
	}()
	testkit.WaitEvent(t, sub, events.ReadyStart)
	kids := children(t, ctx, conn, dir)
	if len(kids) != 2 || dir+"/"+kids[0] != curNode {
		t.Fatalf("while we wait the lock holds %v; want Curator's %s first, then ours", kids, curNode)
	}
	ourNode := dir + "/" + kids[1]
	checkName(t, "our waiting", ourNode, "lock-")
	awaitWatch(t, ctx, srv.Addr(), curNode, sessionHex(conn))
	select {
	case r := <-got:
		t.Fatalf("Acquire returned (%v, %v) while Curator holds", r.g, r.err)
	default:
	}

	// Curator releases: we hold, and Curator's node is gone.
	start = time.Now()
	cur.send("release")
	var r acquired
	select {
	case r = <-got:
	case <-time.After(step):
		t.Fatalf("Acquire did not return within %v of Curator's release", step)
	}
	handoff := time.Since(start)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.g.Node() != ourNode {
		t.Errorf("granted on %s; we waited on %s", r.g.Node(), ourNode)
	}
	if _, exists, err := conn.Exists(ctx, curNode); err != nil || exists {
		t.Fatalf("granted while Curator's node %s exists (%v)", curNode, err)
	}
	cur.await("RELEASED")
	t.Logf("handoff Curator release -> our grant: %s (command to Curator included)", ms(handoff))

	// While we hold, Curator's acquire times out and leaves nothing behind.
	start = time.Now()
	cur.ask("acquire 300", "TIMEOUT")
	t.Logf("Curator acquire(300ms) while we hold: TIMEOUT after %s", ms(time.Since(start)))
	if kids := children(t, ctx, conn, dir); !slices.Equal(kids, []string{strings.TrimPrefix(ourNode, dir+"/")}) {
		t.Fatalf("after Curator's timeout the lock holds %v; want only ours", kids)
	}

	// Curator waits behind us; we release and Curator gets it.
	cur.send("acquire 10000")
	kids = awaitChildren(t, ctx, conn, dir, 2)
	if dir+"/"+kids[0] != ourNode {
		t.Fatalf("the lock holds %v; want ours (%s) first", kids, ourNode)
	}
	curWaiting := dir + "/" + kids[1]
	checkName(t, "Curator's waiting", curWaiting, "lock-")
	awaitWatch(t, ctx, srv.Addr(), ourNode, cur.session)
	if n := cur.saw("ACQUIRED"); n != 1 {
		t.Fatalf("Curator acquired while we hold (%d ACQUIRED lines)", n)
	}
	start = time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.g.Lost():
	default:
		t.Error("our grant's Lost() is open after Release")
	}
	if node := cur.await("ACQUIRED"); node != curWaiting {
		t.Errorf("Curator acquired on %s; it waited on %s", node, curWaiting)
	}
	t.Logf("handoff our Release -> Curator acquired: %s (stdout pipe included)", ms(time.Since(start)))
	cur.ask("release", "RELEASED")
	if kids := children(t, ctx, conn, dir); len(kids) != 0 {
		t.Errorf("nodes left after both released: %v", kids)
	}
}
