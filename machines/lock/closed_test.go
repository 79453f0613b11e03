package lock_test

import (
	"errors"
	"sync"
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

// Close from many goroutines at once while the lock is held and another
// handle waits: no panic, no race (run under -race), every call returns
// the same result (nil), and the waiter gets the lock.
func TestConcurrentClose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		l := newLock(t, tg.Connect(t), "/closed/race")
		if _, err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		waiter := acquireAsync(ctx, newLock(t, tg.Connect(t), "/closed/race"))
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- l.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("a concurrent Close = %v, want nil", err)
			}
		}
		if a := <-waiter; a.err != nil {
			t.Fatalf("the waiter's Acquire = %v", a.err)
		}
	})
}
