package interop

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Curator's Revoker.attemptRevoke reaches our revocable holder, which
// keeps the lock until it releases; our RequestRevoke reaches a Curator
// InterProcessMutex made revocable, which keeps it until it releases too.
func TestRevocationWithCurator(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const dir = "/interop/revoke"
	conn := connect(t, srv.Addr())
	cur := startCurator(t, t0, srv.Addr(), "mutex", dir, "curator")

	l, err := lock.New(conn, dir, lock.WithID("go"), lock.WithRevocable())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sub := l.Subscribe()
	defer sub.Close()

	// Curator's Revoker asks our holder.
	g, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkName(t, "our", g.Node(), "lock-")
	start := time.Now()
	cur.ask("revoke "+g.Node(), "REVOKE_SENT")
	select {
	case <-g.RevokeRequested():
	case <-time.After(step):
		t.Fatalf("Curator's Revoker did not reach our holder within %v", step)
	}
	testkit.WaitEvent(t, sub, events.RevokeRequested)
	t.Logf("Curator attemptRevoke -> our RevokeRequested: %s (command to Curator included)", ms(time.Since(start)))
	if g.Err() != nil {
		t.Fatalf("the request took our grant: %v", g.Err())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Our RequestRevoke asks Curator's holder.
	cur.ask("revocable", "REVOCABLE")
	curNode := cur.ask("acquire 5000", "ACQUIRED")
	checkName(t, "Curator's", curNode, "lock-")
	got := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx)
		got <- err
	}()
	testkit.WaitEvent(t, sub, events.ReadyStart)
	start = time.Now()
	if err := lock.RequestRevoke(ctx, conn, curNode); err != nil {
		t.Fatal(err)
	}
	cur.await("REVOKE_REQUESTED")
	t.Logf("our RequestRevoke -> Curator's revocation listener: %s (stdout pipe included)", ms(time.Since(start)))
	select {
	case err := <-got:
		t.Fatalf("we acquired (%v) while Curator's holder has not released", err)
	default:
	}
	cur.ask("release", "RELEASED")
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(step):
		t.Fatalf("no grant within %v of Curator's release", step)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
