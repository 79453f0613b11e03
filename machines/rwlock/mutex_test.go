package rwlock_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Goroutines sharing one write lock never hold it at once, as with
// sync.Mutex, and a held write lock's TryAcquire says false at once; the
// read lock counts its holds: goroutines share it, and its node goes with
// the last Release. WithReentrant makes the write lock count its holds too.
func TestWriteLockIsAMutex(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const goroutines, rounds = 4, 50
		ctx := ctxT(t)
		c := tg.Connect(t)
		rw := newRW(t, c, "/mutex/rw")
		w := rw.WriteLock()
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					g, err := w.Acquire(ctx)
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
		acq(t, ctx, w)
		if ok, _, err := w.TryAcquire(ctx); ok || err != nil {
			t.Errorf("TryAcquire on a held write lock = %t, %v", ok, err)
		}
		rel(t, ctx, w)

		r := rw.ReadLock()
		g1, g2 := acq(t, ctx, r), <-acquireAsync(ctx, r)
		if g2.err != nil || g2.g.Node() != g1.Node() {
			t.Fatalf("second read hold: %v, %v", g2.g, g2.err)
		}
		rel(t, ctx, r)
		eventually(t, c, "/mutex/rw", "the reader's node, one hold left", count(1))
		rel(t, ctx, r)
		eventually(t, c, "/mutex/rw", "no node after the last read hold", count(0))

		re := newRW(t, c, "/mutex/rw", rwlock.WithReentrant()).WriteLock()
		acq(t, ctx, re)
		if a := <-acquireAsync(ctx, re); a.err != nil {
			t.Fatalf("a re-entrant write lock's second Acquire = %v", a.err)
		}
		rel(t, ctx, re)
		rel(t, ctx, re)
	})
}
