package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestGrantLostCause ends a hold in each way there is and checks that
// Lost closes and Err names the way: Release, Close, SUSPENDED, LOST, and
// the node deleted by another client (seen through the watch that the
// own-node read already sets, within one notification).
func TestGrantLostCause(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []lock.Option
		end  func(t *testing.T, tg testkit.Target, c, other zk.Conn, l *lock.Lock, g *lock.Grant)
		want error
		then func(t *testing.T, tg testkit.Target, c zk.Conn) // after Lost closed
	}{
		{"release", nil, func(t *testing.T, _ testkit.Target, _, _ zk.Conn, l *lock.Lock, _ *lock.Grant) {
			if err := l.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}, lock.ErrReleased, nil},
		{"close", nil, func(t *testing.T, _ testkit.Target, _, _ zk.Conn, l *lock.Lock, _ *lock.Grant) {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}, lock.ErrClosed, nil},
		{"suspended", nil, func(t *testing.T, tg testkit.Target, c, _ zk.Conn, _ *lock.Lock, _ *lock.Grant) {
			tg.Disconnect(t, c)
		}, lock.ErrSuspended, func(t *testing.T, tg testkit.Target, c zk.Conn) { tg.Reconnect(t, c) }},
		// Expiry passes through SUSPENDED, which ends the hold by default;
		// with the policy off, LOST does.
		{"expired", []lock.Option{lock.WithSuspendedIsLost(false)}, func(t *testing.T, tg testkit.Target, c, _ zk.Conn, _ *lock.Lock, _ *lock.Grant) {
			tg.Expire(t, c)
		}, lock.ErrSessionLost, nil},
		{"node deleted", nil, func(t *testing.T, _ testkit.Target, _, other zk.Conn, _ *lock.Lock, g *lock.Grant) {
			if err := other.Delete(ctxT(t), g.Node(), zk.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}, lock.ErrNodeDeleted, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
				c, other := tg.Connect(t), tg.Connect(t)
				l := newLock(t, c, "/cause/lock", tc.opts...)
				g, err := l.Acquire(ctxT(t))
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Err(); err != nil {
					t.Fatalf("Err while held = %v, want nil", err)
				}
				tc.end(t, tg, c, other, l, g)
				select {
				case <-g.Lost():
				case <-time.After(10 * time.Second):
					t.Fatal("Lost not closed within 10s")
				}
				if err := g.Err(); !errors.Is(err, tc.want) {
					t.Fatalf("Err = %v, want %v", err, tc.want)
				}
				if tc.then != nil {
					tc.then(t, tg, c)
				}
				// Whatever ended the hold, another participant gets the lock.
				b := newLock(t, other, "/cause/lock")
				if _, err := b.Acquire(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// With WithSuspendedIsLost(false), a connection loss that ends with the
// same session does not end the hold, and the watch on our node still
// works after the reconnect: a deletion then ends it with ErrNodeDeleted.
func TestGrantSurvivesSuspensionWhenAllowed(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c, other := tg.Connect(t), tg.Connect(t)
		l := newLock(t, c, "/cause/keep", lock.WithSuspendedIsLost(false))
		sub := l.Subscribe()
		defer sub.Close()
		g, err := l.Acquire(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		tg.Disconnect(t, c)
		tg.Reconnect(t, c)
		// The lock has seen the suspension once it reports the reconnect:
		// its inputs are handled in order.
		awaitEvent(t, sub, events.Reconnected)
		select {
		case <-g.Lost():
			t.Fatalf("Lost closed by a suspension the policy allows (Err %v)", g.Err())
		default:
		}
		if err := g.Err(); err != nil {
			t.Fatalf("Err = %v, want nil", err)
		}
		if err := other.Delete(ctxT(t), g.Node(), zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		select {
		case <-g.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("our node's deletion after a reconnect did not close Lost within 10s")
		}
		if err := g.Err(); !errors.Is(err, lock.ErrNodeDeleted) {
			t.Fatalf("Err = %v, want ErrNodeDeleted", err)
		}
	})
}

// Releasing and acquiring again: our own delete of the first node is no
// foreign deletion, for the first grant (ErrReleased) or the second (it
// holds until its own Release).
func TestReleaseIsNotAForeignDelete(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		l := newLock(t, c, "/cause/again")
		first, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		second, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A round trip on the same connection after the second grant: the
		// first node's deletion event came before it.
		if _, _, err := c.Exists(ctx, second.Node()); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for i, g := range []*lock.Grant{first, second} {
			<-g.Lost()
			if err := g.Err(); !errors.Is(err, lock.ErrReleased) {
				t.Errorf("grant %d: Err = %v, want ErrReleased", i+1, err)
			}
		}
	})
}

// awaitEvent waits for an event of type typ on sub.
func awaitEvent(t *testing.T, sub *events.Subscription, typ events.Type) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription closed before %s", typ)
			}
			if ev.Type == typ {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event within 10s", typ)
		}
	}
}
