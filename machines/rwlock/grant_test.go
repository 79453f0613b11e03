package rwlock_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A write Grant and a read Grant release themselves: the waiter behind
// gets the lock, and the released grant's Release then says ErrNotHeld.
func TestGrantReleasesItself(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		a, b := newRW(t, tg.Connect(t), "/grant/rw"), newRW(t, tg.Connect(t), "/grant/rw")
		for _, read := range []bool{false, true} {
			la := a.WriteLock()
			if read {
				la = a.ReadLock()
			}
			g := acq(t, ctx, la)
			waiter := acquireAsync(ctx, b.WriteLock())
			eventually(t, c, "/grant/rw", "the waiter queued", count(2))
			if err := g.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if w := <-waiter; w.err != nil {
				t.Fatalf("the waiter's Acquire = %v", w.err)
			}
			if err := g.Release(ctx); !errors.Is(err, rwlock.ErrNotHeld) {
				t.Errorf("a released grant's Release = %v, want ErrNotHeld", err)
			}
			rel(t, ctx, b.WriteLock())
		}
	})
}
