package lock_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// After Close every call returns ErrClosed, State says STOP, a new
// subscription is closed already, and Close is idempotent.
func TestEveryCallAfterClose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		l := newLock(t, tg.Connect(t), "/closed/lock")
		if _, err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(ctx); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Acquire = %v", err)
		}
		if _, _, err := l.TryAcquire(ctx); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("TryAcquire = %v", err)
		}
		if err := l.Release(ctx); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Release = %v", err)
		}
		if s := l.State(); s != events.StateStop {
			t.Errorf("State = %v, want STOP", s)
		}
		sub := l.Subscribe()
		if _, open := <-sub.C; open {
			t.Error("a subscription made after Close delivers events")
		}
		if err := l.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
	})
}
