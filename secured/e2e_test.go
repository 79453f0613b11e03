package secured_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// parties are three authenticated sessions with the default ACL
// (CreatorAll, world read): two as alice, one as bob. What alice makes
// under /e2e is removed, as alice, at the end of the test.
func parties(t *testing.T, tg testkit.Target) (alice1, alice2, bob zk.Conn) {
	alice1, alice2, bob = tg.Connect(t, alicePW), tg.Connect(t, alicePW), tg.Connect(t, bobPW)
	t.Cleanup(func() { removeTree(t, alice1, "/e2e") })
	return alice1, alice2, bob
}

// refused fails t unless err matches zk.ErrNoAuth.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("%s: got %v, want an error matching zk.ErrNoAuth", what, err)
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSecuredLock: alice's lock is hers. Bob sees its holder, but can
// neither delete its node nor ask it to give the lock up, nor queue for
// it; the holder keeps its grant. Alice's second session waits its turn
// and gets the lock when the first releases it, and her first connection
// is still alice after its session expired.
func TestSecuredLock(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		alice1, alice2, bob := parties(t, tg)
		const dir = "/e2e/lock"
		l1 := mustLock(t, alice1, dir, lock.WithID("alice-1"))
		g1, err := l1.Acquire(ctx)
		check(t, err)

		hs, err := lock.Holders(ctx, bob, dir)
		check(t, err)
		if len(hs) != 1 || hs[0].ID != "alice-1" || hs[0].Node != g1.Node() {
			t.Fatalf("bob sees holders %+v, want alice-1 on %s", hs, g1.Node())
		}
		refused(t, "bob deleting the holder's node", bob.Delete(ctx, g1.Node(), zk.AnyVersion))
		refused(t, "bob asking the holder to revoke", lock.RequestRevoke(ctx, bob, g1.Node()))
		_, err = mustLock(t, bob, dir).Acquire(ctx)
		refused(t, "bob's Acquire", err)
		if err := g1.Err(); err != nil {
			t.Fatalf("the holder lost its grant: %v", err)
		}

		l2 := mustLock(t, alice2, dir, lock.WithID("alice-2"))
		sub := l2.Subscribe()
		defer sub.Close()
		got := make(chan error, 1)
		go func() {
			g2, err := l2.Acquire(ctx)
			if err == nil {
				err = g2.Release(ctx)
			}
			got <- err
		}()
		testkit.WaitEvent(t, sub, events.ReadyStart) // alice's second session waits behind the first
		check(t, g1.Release(ctx))
		check(t, <-got)

		// A new session of alice's first connection is alice again: it
		// takes the lock in her directory, and bob still cannot delete it.
		tg.Expire(t, alice1)
		g1, err = l1.Acquire(ctx)
		check(t, err)
		refused(t, "bob deleting the holder's node after alice's expiry", bob.Delete(ctx, g1.Node(), zk.AnyVersion))
		check(t, g1.Release(ctx))
	})
}

// TestSecuredElection: bob reads who leads alice's election but cannot
// delete the leader's node, nor run; alice's second session takes over
// when the first resigns.
func TestSecuredElection(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		alice1, alice2, bob := parties(t, tg)
		const dir = "/e2e/election"
		e1, err := election.New(alice1, dir, election.WithID("alice-1"))
		open(t, e1, err)
		term, err := e1.Campaign(ctx)
		check(t, err)

		eb, err := election.New(bob, dir, election.WithID("bob"))
		open(t, eb, err)
		leader, err := eb.Leader(ctx)
		check(t, err)
		if leader.ID != "alice-1" {
			t.Fatalf("bob sees leader %+v, want alice-1", leader)
		}
		refused(t, "bob deleting the leader's node", bob.Delete(ctx, term.Node(), zk.AnyVersion))
		_, err = eb.Campaign(ctx)
		refused(t, "bob's Campaign", err)
		if err := term.Err(); err != nil {
			t.Fatalf("the leader lost its term: %v", err)
		}

		e2, err := election.New(alice2, dir, election.WithID("alice-2"))
		open(t, e2, err)
		sub := e2.Subscribe()
		defer sub.Close()
		got := make(chan error, 1)
		go func() { _, err := e2.Campaign(ctx); got <- err }()
		testkit.WaitEvent(t, sub, events.ReadyStart)
		check(t, e1.Resign(ctx))
		check(t, <-got)
		leader, err = eb.Leader(ctx)
		check(t, err)
		if leader.ID != "alice-2" {
			t.Fatalf("bob sees leader %+v after the resignation, want alice-2", leader)
		}
	})
}

// TestSecuredQueue: bob counts the items of alice's queue but can neither
// take one, delete one, nor offer; both of alice's sessions consume it.
func TestSecuredQueue(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		alice1, alice2, bob := parties(t, tg)
		const dir = "/e2e/queue"
		q1, err := queue.New(alice1, dir)
		open(t, q1, err)
		check(t, q1.OfferBatch(ctx, [][]byte{[]byte("a"), []byte("b")}))

		qb, err := queue.New(bob, dir)
		open(t, qb, err)
		n, err := qb.Len(ctx)
		check(t, err)
		if n != 2 {
			t.Fatalf("bob counts %d items, want 2", n)
		}
		_, err = qb.Take(ctx)
		refused(t, "bob's Take", err)
		items, _, err := bob.Children(ctx, dir)
		check(t, err)
		for _, it := range items {
			refused(t, "bob deleting "+it, bob.Delete(ctx, zk.Join(dir, it), zk.AnyVersion))
		}
		refused(t, "bob's Offer", qb.Offer(ctx, []byte("bob's")))
		if n, err := qb.Len(ctx); err != nil || n != 2 {
			t.Fatalf("after bob's tries: %d items (%v), want 2", n, err)
		}

		q2, err := queue.New(alice2, dir)
		open(t, q2, err)
		for _, tc := range []struct {
			q    *queue.Queue
			want string
		}{{q2, "a"}, {q1, "b"}} {
			data, err := tc.q.Take(ctx)
			check(t, err)
			if string(data) != tc.want {
				t.Fatalf("took %q, want %q", data, tc.want)
			}
		}
	})
}

// TestSecuredDoubleBarrier: alice's two sessions enter and leave her
// double barrier together; bob sees its members but can neither join nor
// remove one.
func TestSecuredDoubleBarrier(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		alice1, alice2, bob := parties(t, tg)
		const dir = "/e2e/double"
		d1, err := barrier.NewDouble(alice1, dir, 2)
		open(t, d1, err)
		entered := make(chan error, 1)
		go func() { entered <- d1.Enter(ctx) }()
		waitContenders(ctx, t, bob, dir, 1) // alice's first member waits for a second

		db, err := barrier.NewDouble(bob, dir, 2)
		refused(t, "bob's Enter", open(t, db, err).Enter(ctx))
		d2, err := barrier.NewDouble(alice2, dir, 2)
		check(t, open(t, d2, err).Enter(ctx))
		check(t, <-entered)

		members, _, err := bob.Children(ctx, dir)
		check(t, err)
		if len(members) < 2 {
			t.Fatalf("bob sees %v under %s, want both members", members, dir)
		}
		refused(t, "bob deleting a member", bob.Delete(ctx, d1.Node(), zk.AnyVersion))

		left := make(chan error, 1)
		go func() { left <- d2.Leave(ctx) }()
		check(t, d1.Leave(ctx))
		check(t, <-left)
	})
}

// TestWithACLOverride: a handle given WithACL(world: all) on alice's
// authenticated connection makes nodes anyone may change: bob deletes the
// holder's node, and the holder learns it lost the lock.
func TestWithACLOverride(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		alice1, _, bob := parties(t, tg)
		const dir = "/e2e/open"
		l := mustLock(t, alice1, dir, lock.WithACL(zk.WorldACL(zk.PermAll)...))
		g, err := l.Acquire(ctx)
		check(t, err)
		check(t, bob.Delete(ctx, g.Node(), zk.AnyVersion))
		select {
		case <-g.Lost():
		case <-ctx.Done():
			t.Fatal("the holder never learnt its node was deleted")
		}
		if !errors.Is(g.Err(), lock.ErrNodeDeleted) {
			t.Fatalf("grant ended with %v, want lock.ErrNodeDeleted", g.Err())
		}
		gb, err := mustLock(t, bob, dir).Acquire(ctx) // bob may queue in the directory too
		check(t, err)
		check(t, gb.Release(ctx))
	})
}
