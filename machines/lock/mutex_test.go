package lock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Goroutines sharing one handle never hold at once, as with sync.Mutex; a
// held handle's TryAcquire says false at once; an Acquire that gives up
// waiting for the handle leaves nothing behind.
func TestHandleIsAMutex(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const goroutines, rounds = 4, 50
		ctx := ctxT(t)
		c := tg.Connect(t)
		l := newLock(t, c, "/mutex/shared")
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					g, err := l.Acquire(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if n := inside.Add(1); n > most.Load() {
						most.Store(n)
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := g.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if m := most.Load(); m != 1 {
			t.Errorf("%d goroutines inside at once", m)
		}

		if _, err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := l.TryAcquire(ctx); ok || err != nil {
			t.Errorf("TryAcquire on a held handle = %t, %v", ok, err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := l.Acquire(short); err != context.DeadlineExceeded {
			t.Errorf("Acquire on a held handle, ctx ending = %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, c, "/mutex/shared", "nothing left", empty)
	})
}

// WithReentrant keeps the handle re-entrant: a second goroutine's Acquire
// on a held handle returns at once with one more hold.
func TestWithReentrantSharesTheHold(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		l := newLock(t, tg.Connect(t), "/mutex/reentrant", lock.WithReentrant())
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again := acquireAsync(ctx, l)
		select {
		case a := <-again:
			if a.err != nil || a.g.Token() != g.Token() {
				t.Fatalf("second goroutine's Acquire = %v, %v", a.g, a.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a re-entrant handle's second Acquire waits")
		}
		for range 2 {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
