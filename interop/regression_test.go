// Regression tests for two interop bugs found with Curator 5.4: a data
// change on the node a waiter watches must not be taken for a release
// (Curator's revocation writes to the holder's node), and a latch node must
// go with a plain delete (a Curator LeaderLatch behind it waits for
// NodeDeleted on a one-shot data watch).
package interop

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// latchBehindOurs starts a server where our participant go-a leads on dir
// and a Curator LeaderLatch, next in queue, watches go-a's node. conn is one
// more session, for looking.
func latchBehindOurs(t *testing.T, dir string) (ctx context.Context, a *election.Election, termA *election.Term, conn zk.Conn, cur *curatorPeer) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx = testCtx(t)
	a = newElection(t, connect(t, srv.Addr()), dir, "go-a")
	conn = connect(t, srv.Addr())
	cur = startCurator(t, t0, srv.Addr(), "latch", dir, "curator-b")
	termA, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur.ask("start", "STARTED")
	awaitChildren(t, ctx, conn, dir, 2)
	awaitWatch(t, ctx, srv.Addr(), termA.Node(), cur.session)
	return ctx, a, termA, conn, cur
}

// Our leader resigns with a Curator LeaderLatch next in queue: the latch
// must lead. The finding: a release signalled by setting the node's data
// before deleting it fired the latch's one-shot data watch with
// NodeDataChanged, no NodeDeleted followed, and LeaderLatch (which re-reads
// only on NodeDeleted) never learned it was first. Resign now only deletes
// the node (the mark is a separate node, contention.ReleaseMark).
func TestFindingLatchFollowsOurResign(t *testing.T) {
	ctx, a, termA, conn, cur := latchBehindOurs(t, "/interop/latch-resign")
	// Watch go-a's node as Curator's latch does (a data watch), to see what
	// a watcher is told.
	_, _, seen, err := conn.GetW(ctx, termA.Node())
	if err != nil {
		t.Fatal(err)
	}

	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	ev := <-seen
	t.Logf("a data watch on go-a's node saw %v on Resign", ev.Type)
	if _, ok := cur.awaitWithin("LEADER", 3*time.Second); ok {
		return
	}
	kids := children(t, ctx, conn, "/interop/latch-resign")
	t.Errorf("Curator's latch is not leader 3s after go-a resigned: nodes %v (Curator's is first), "+
		"Curator hasLeadership %s, Curator getLeader %q, our Leader %q",
		kids, cur.ask("status", "STATUS"), cur.ask("leader", "LEADERID"), leaderID(t, ctx, a))
}

// The same handover through a plain delete (as when our leader's session
// ends) works: the latch sees NodeDeleted.
func TestFindingLatchFollowsPlainDelete(t *testing.T) {
	ctx, _, termA, conn, cur := latchBehindOurs(t, "/interop/latch-delete")
	start := time.Now()
	if err := conn.Delete(ctx, termA.Node(), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	cur.await("LEADER")
	t.Logf("plain delete of go-a's node -> Curator isLeader: %s", ms(time.Since(start)))
}

// A Curator holder is asked to give the lock up (Curator's
// Revoker.attemptRevoke sets the holder's node data to "__REVOKE__"; the
// holder keeps the lock until it chooses to release). The finding: our
// waiter, when a data change was the release signal, took the request for a
// release and held at once: two holders. It must keep waiting.
func TestFindingLockWaiterHoldsOnRevokeRequest(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const dir = "/interop/mutex-revoke"
	conn := connect(t, srv.Addr())
	cur := startCurator(t, t0, srv.Addr(), "mutex", dir, "curator")
	lconn := connect(t, srv.Addr())
	l, err := lock.New(lconn, dir, lock.WithID("go"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sub := l.Subscribe()
	defer sub.Close()

	curNode := cur.ask("acquire 5000", "ACQUIRED")
	got := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx)
		got <- err
	}()
	testkit.WaitEvent(t, sub, events.ReadyStart)
	awaitWatch(t, ctx, srv.Addr(), curNode, sessionHex(lconn))
	// What Revoker.attemptRevoke(client, curNode) sends.
	if _, err := conn.Set(ctx, curNode, []byte("__REVOKE__"), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		_, exists, xerr := conn.Exists(ctx, curNode)
		t.Errorf("our Acquire returned (err %v) while Curator holds: its node %s exists=%v (%v)",
			err, curNode, exists, xerr)
	case <-time.After(2 * time.Second):
		t.Log("no grant within 2s of the revoke request, as it should be")
	}
	cur.ask("release", "RELEASED")
}
