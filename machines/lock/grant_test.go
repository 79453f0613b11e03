package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A Grant and a MultiGrant release themselves: the waiter behind gets the
// lock, and the released grant's Release then says ErrNotHeld.
func TestGrantReleasesItself(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a, b := newLock(t, tg.Connect(t), "/grant/lock"), newLock(t, tg.Connect(t), "/grant/lock")
		g, err := a.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waiter := acquireAsync(ctx, b)
		waitChildren(t, tg.Connect(t), "/grant/lock", 2)
		if err := g.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if w := <-waiter; w.err != nil {
			t.Fatalf("the waiter's Acquire = %v", w.err)
		}
		if err := g.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("a released grant's Release = %v, want ErrNotHeld", err)
		}

		m := newMulti(t, tg.Connect(t), []string{"/grant/m1", "/grant/m2"})
		mg, err := m.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		other := newMulti(t, tg.Connect(t), []string{"/grant/m2", "/grant/m1"})
		done := make(chan error, 1)
		go func() { _, err := other.Acquire(ctx); done <- err }()
		waitChildren(t, tg.Connect(t), "/grant/m1", 2)
		select {
		case err := <-done:
			t.Fatalf("the other Multi's Acquire returned while held: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if err := mg.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("the other Multi's Acquire = %v", err)
		}
		if err := mg.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("a released MultiGrant's Release = %v, want ErrNotHeld", err)
		}
	})
}
