package secured_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestAuthSurvivesFaults: after a connection loss (the same session back)
// and after an expiry (a new session), alice's connection is alice: her
// lock handle (WithSuspendedIsLost(false)) holds through a reconnect,
// releases, and takes the lock again, her
// queue handle takes the item she offered before the fault and offers
// again, with her default ACL (CreatorAll needs an identity: a session
// without one could not create those nodes), and bob is still refused.
// TestSecuredLock covers a lock taken after an expiry; this adds the
// reconnect, a grant held across the fault, and the queue.
func TestAuthSurvivesFaults(t *testing.T) {
	for _, fault := range []struct {
		name string
		do   func(t *testing.T, tg testkit.Target, c zk.Conn)
	}{
		{"reconnect", func(t *testing.T, tg testkit.Target, c zk.Conn) { tg.Disconnect(t, c); tg.Reconnect(t, c) }},
		{"expire", func(t *testing.T, tg testkit.Target, c zk.Conn) { tg.Expire(t, c) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			forEachTarget(t, func(t *testing.T, tg testkit.Target) {
				ctx := testCtx(t)
				alice, _, bob := parties(t, tg)
				const ldir, qdir = "/e2e/faults/lock", "/e2e/faults/queue"
				l := mustLock(t, alice, ldir, lock.WithID("alice"), lock.WithSuspendedIsLost(false))
				g, err := l.Acquire(ctx)
				check(t, err)
				q, err := queue.New(alice, qdir)
				open(t, q, err)
				check(t, q.Offer(ctx, []byte("before")))
				sid := alice.SessionID()

				fault.do(t, tg, alice)

				if expired := alice.SessionID() != sid; !expired {
					// The grant survived: alice releases it (deleting her node).
					if err := g.Err(); err != nil {
						t.Fatalf("the grant did not survive the reconnect: %v", err)
					}
					refused(t, "bob deleting the holder's node after the reconnect", bob.Delete(ctx, g.Node(), zk.AnyVersion))
					check(t, g.Release(ctx))
				} else {
					select { // the expiry ended the grant: alice lets it go
					case <-g.Lost():
					case <-ctx.Done():
						t.Fatal("the grant outlived its session")
					}
					if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
						t.Fatalf("Release of the lost grant: %v, want lock.ErrNotHeld", err)
					}
				}
				g, err = l.Acquire(ctx)
				check(t, err)
				refused(t, "bob deleting alice's new holder node", bob.Delete(ctx, g.Node(), zk.AnyVersion))
				_, err = mustLock(t, bob, ldir).Acquire(ctx)
				refused(t, "bob's Acquire", err)
				if err := g.Err(); err != nil {
					t.Fatalf("alice lost her grant: %v", err)
				}
				check(t, g.Release(ctx))

				qb, err := queue.New(bob, qdir)
				open(t, qb, err)
				_, err = qb.Take(ctx)
				refused(t, "bob's Take", err)
				check(t, q.Offer(ctx, []byte("after")))
				refused(t, "bob's Offer", qb.Offer(ctx, []byte("bob's")))
				for _, want := range []string{"before", "after"} {
					data, err := q.Take(ctx)
					check(t, err)
					if string(data) != want {
						t.Fatalf("alice took %q, want %q", data, want)
					}
				}
			})
		})
	}
}
