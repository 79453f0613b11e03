package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// revokeWait bounds how long a revocation request may take to reach its
// holder: a write and a watch notification.
const revokeWait = 15 * time.Second

// awaitRevoke waits until g's RevokeRequested closes.
func awaitRevoke(t *testing.T, g *lock.Grant) {
	t.Helper()
	select {
	case <-g.RevokeRequested():
	case <-time.After(revokeWait):
		t.Fatalf("no revocation request reached the holder of %s within %v", g.Node(), revokeWait)
	}
}

// notRevoked fails the test if g's RevokeRequested is closed.
func notRevoked(t *testing.T, g *lock.Grant, when string) {
	t.Helper()
	select {
	case <-g.RevokeRequested():
		t.Fatalf("%s: the holder of %s was asked to give up", when, g.Node())
	default:
	}
}

// A revocable holder is told when someone asks it to give up, with a
// REVOKE_REQUESTED event, and goes on holding until it releases; then the
// waiter holds. ZooKeeper's word "unlock" asks too.
func TestRevokeWhileHolding(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/revoke/holding"
		c, other := tg.Connect(t), tg.Connect(t)
		l := newLock(t, c, path, lock.WithRevocable())
		sub := l.Subscribe()
		defer sub.Close()
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := newLock(t, other, path)
		waiter := acquireAsync(ctx, w)
		eventually(t, other, path, "the waiter queued", func(k []string) bool { return len(k) == 2 })
		notRevoked(t, g, "before the request")
		if err := lock.RequestRevoke(ctx, other, g.Node()); err != nil {
			t.Fatal(err)
		}
		awaitRevoke(t, g)
		ev := testkit.WaitEvent(t, sub, events.RevokeRequested)
		if ev.Node != g.Node() || ev.Token != g.Token() || ev.Phase != events.PhaseNone || ev.State != events.StateLeader {
			t.Fatalf("event %v", ev)
		}
		select {
		case <-g.Lost():
			t.Fatalf("the request took the grant: %v", g.Err())
		case r := <-waiter:
			t.Fatalf("the waiter holds while the revoked holder has not released: %+v", r)
		default:
		}
		if hs, err := lock.Holders(ctx, other, path); err != nil || len(hs) != 1 || hs[0].Node != g.Node() || hs[0].ID != lock.RevokeMessage {
			t.Fatalf("holders after the request: %+v, %v", hs, err)
		}
		// The holder honours it.
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-waiter
		if r.err != nil {
			t.Fatal(r.err)
		}
		// ZooKeeper's recipe word asks too; a lock that is not revocable
		// is never told.
		if _, err := other.Set(ctx, r.g.Node(), []byte(contention.UnlockMessage), zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		next := acquireAsync(ctx, l)
		eventually(t, c, path, "the revocable waiter queued", func(k []string) bool { return len(k) == 2 })
		notRevoked(t, r.g, "a lock that is not revocable")
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r2 := <-next
		if r2.err != nil {
			t.Fatal(r2.err)
		}
		notRevoked(t, r2.g, "the next grant, unasked")
		if _, err := c.Set(ctx, r2.g.Node(), []byte("unlock"), zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		awaitRevoke(t, r2.g)
		if lock.RevokeMessage != contention.RevokeMessage {
			t.Fatalf("lock.RevokeMessage %q, the engine's %q", lock.RevokeMessage, contention.RevokeMessage)
		}
	})
}

// A request written into a waiter's node reaches it as soon as it holds.
func TestRevokeRequestedBeforeTheGrant(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/revoke/early"
		c, other := tg.Connect(t), tg.Connect(t)
		holder := newLock(t, other, path)
		if _, err := holder.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		l := newLock(t, c, path, lock.WithRevocable())
		res := acquireAsync(ctx, l)
		var waiting string
		eventually(t, other, path, "the revocable waiter queued", func(k []string) bool {
			if len(k) == 2 {
				hs, _ := lock.Holders(ctx, other, path)
				for _, n := range k {
					if len(hs) == 1 && path+"/"+n != hs[0].Node {
						waiting = path + "/" + n
					}
				}
			}
			return waiting != ""
		})
		if err := lock.RequestRevoke(ctx, other, waiting); err != nil {
			t.Fatal(err)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.g.Node() != waiting {
			t.Fatalf("granted %s, asked %s", r.g.Node(), waiting)
		}
		awaitRevoke(t, r.g)
	})
}

// After the release a request finds no node: ErrNotHeld (and zk.ErrNoNode),
// nothing is written, and the ended grant is never told.
func TestRevokeAfterRelease(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/revoke/released"
		c := tg.Connect(t)
		l := newLock(t, c, path, lock.WithRevocable())
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		err = lock.RequestRevoke(ctx, tg.Connect(t), g.Node())
		if !errors.Is(err, lock.ErrNotHeld) || !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("RequestRevoke after the release = %v, want ErrNotHeld and zk.ErrNoNode", err)
		}
		if _, ok, err := c.Exists(ctx, g.Node()); ok || err != nil {
			t.Fatalf("the request made the node again (%v)", err)
		}
		g2, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		notRevoked(t, g, "the released grant")
		notRevoked(t, g2, "the next grant")
	})
}

// A holder that survives a connection loss (WithSuspendedIsLost(false))
// learns of a request made while it was disconnected once it is back.
func TestRevokeAcrossAConnectionLoss(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/revoke/disconnected"
		c, other := tg.Connect(t), tg.Connect(t)
		l := newLock(t, c, path, lock.WithRevocable(), lock.WithSuspendedIsLost(false))
		sub := l.Subscribe()
		defer sub.Close()
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tg.Disconnect(t, c)
		testkit.WaitEvent(t, sub, events.Suspended)
		if err := lock.RequestRevoke(ctx, other, g.Node()); err != nil {
			t.Fatal(err)
		}
		notRevoked(t, g, "while disconnected")
		tg.Reconnect(t, c)
		awaitRevoke(t, g)
		if g.Err() != nil {
			t.Fatalf("the hold ended: %v", g.Err())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRequestRevokeBadInput(t *testing.T) {
	ctx := ctxT(t)
	sim := testkit.NewSim()
	defer sim.Close()
	c := sim.Connect()
	defer c.Close()
	for _, p := range []string{"", "rel", "/a/", "/"} {
		if err := lock.RequestRevoke(ctx, c, p); !errors.Is(err, zk.ErrInvalidPath) {
			t.Errorf("RequestRevoke(%q) = %v, want zk.ErrInvalidPath", p, err)
		}
	}
	if err := lock.RequestRevoke(ctx, nil, "/a/_c_x-lock-0000000000"); !errors.Is(err, lock.ErrClosed) {
		t.Errorf("RequestRevoke on a nil conn = %v, want ErrClosed", err)
	}
}
