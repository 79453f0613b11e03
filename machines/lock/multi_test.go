package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func newMulti(t *testing.T, c zk.Conn, paths []string, opts ...lock.Option) *lock.Multi {
	t.Helper()
	m, err := lock.NewMulti(c, paths, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func empty(k []string) bool { return len(k) == 0 }

// A Multi holds every lock at once, each with its grant (in the order
// NewMulti was given the paths), and excludes a plain lock on any of them.
func TestMultiHoldsEveryLock(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		paths := []string{"/multi/c", "/multi/a", "/multi/b"}
		m := newMulti(t, c, paths, lock.WithReentrant())
		mg, err := m.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		gs := mg.Grants()
		if len(gs) != 3 {
			t.Fatalf("%d grants", len(gs))
		}
		for i, g := range gs {
			if zk.Parent(g.Node()) != paths[i] || g.Token() == 0 {
				t.Fatalf("grant %d: node %s token %d, want one under %s", i, g.Node(), g.Token(), paths[i])
			}
			hs, err := lock.Holders(ctx, c, paths[i])
			if err != nil || len(hs) != 1 || hs[0].Node != g.Node() {
				t.Fatalf("holders of %s: %+v, %v", paths[i], hs, err)
			}
		}
		// Tokens grow in the order the locks were taken: sorted paths.
		if !(gs[1].Token() < gs[2].Token() && gs[2].Token() < gs[0].Token()) {
			t.Fatalf("tokens a=%d b=%d c=%d: not taken in path order", gs[1].Token(), gs[2].Token(), gs[0].Token())
		}
		if ok, _, err := newLock(t, tg.Connect(t), "/multi/b").TryAcquire(ctx); ok || err != nil {
			t.Fatalf("a plain lock beside the multi: %t, %v", ok, err)
		}
		// Re-entrant: one more hold, the same grant; the balancing
		// Release lets go.
		if again, err := m.Acquire(ctx); err != nil || again != mg {
			t.Fatalf("re-entrant Acquire: %p, %v (want %p)", again, err, mg)
		}
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-mg.Lost():
			t.Fatal("Lost closed while a hold is left")
		default:
		}
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		<-mg.Lost()
		if !errors.Is(mg.Err(), lock.ErrReleased) {
			t.Fatalf("Err after Release = %v", mg.Err())
		}
		for _, p := range paths {
			eventually(t, c, p, "no node left in "+p, empty)
		}
		if err := m.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Release without a hold = %v, want ErrNotHeld", err)
		}
	})
}

// Two Multis over the same locks, given in opposite orders, take them in
// the same (sorted) order and never deadlock; they never hold together.
func TestMultiReversedOrdersNeverDeadlock(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const rounds = 60
		ctx := ctxT(t)
		fwd := []string{"/multi/dl/1", "/multi/dl/2", "/multi/dl/3", "/multi/dl/4"}
		rev := []string{"/multi/dl/4", "/multi/dl/3", "/multi/dl/2", "/multi/dl/1"}
		var holding, overlaps atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, paths := range [][]string{fwd, rev} {
			m := newMulti(t, tg.Connect(t), paths)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if _, err := m.Acquire(ctx); err != nil {
						errs <- err
						return
					}
					if holding.Add(1) > 1 {
						overlaps.Add(1)
					}
					holding.Add(-1)
					if err := m.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a multi failed (a deadlock ends in the test's deadline): %v", err)
		}
		if n := overlaps.Load(); n > 0 {
			t.Fatalf("the two multis held together %d times", n)
		}
	})
}

// An Acquire whose ctx ends while it waits for its second lock releases
// the first: nothing of it is left.
func TestMultiCancelLeavesNoNode(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		holder := newLock(t, tg.Connect(t), "/multi/cancel/b")
		hg, err := holder.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := newMulti(t, c, []string{"/multi/cancel/b", "/multi/cancel/a"})
		actx, cancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() {
			_, err := m.Acquire(actx)
			res <- err
		}()
		eventually(t, c, "/multi/cancel/b", "the multi waits for b", func(k []string) bool { return len(k) == 2 })
		if kids := children(t, c, "/multi/cancel/a"); len(kids) != 1 {
			t.Fatalf("the multi holds a: %v", kids)
		}
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want context.Canceled", err)
		}
		eventually(t, c, "/multi/cancel/a", "a released", empty)
		eventually(t, c, "/multi/cancel/b", "only the holder's node in b", func(k []string) bool {
			return len(k) == 1 && "/multi/cancel/b/"+k[0] == hg.Node()
		})
		if err := m.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Release after the cancel = %v, want ErrNotHeld", err)
		}
		// It still works.
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A lost part — the connection lost (SUSPENDED), or the session expired —
// closes the multi grant's Lost, and Err names the part and why; Release
// then lets go of the rest and says ErrNotHeld; the Multi acquires again.
func TestMultiLostPart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, tg testkit.Target, c zk.Conn)
		opts  []lock.Option
		cause error
	}{
		{"suspended", func(t *testing.T, tg testkit.Target, c zk.Conn) {
			tg.Disconnect(t, c)
			tg.Reconnect(t, c)
		}, nil, lock.ErrSuspended},
		// Expire disconnects first: only LOST must end the hold.
		{"expired", func(t *testing.T, tg testkit.Target, c zk.Conn) { tg.Expire(t, c) },
			[]lock.Option{lock.WithSuspendedIsLost(false)}, lock.ErrSessionLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
				ctx := ctxT(t)
				c := tg.Connect(t)
				other := tg.Connect(t)
				paths := []string{"/multi/lost/a", "/multi/lost/b"}
				m := newMulti(t, c, paths, tc.opts...)
				mg, err := m.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tc.fault(t, tg, c)
				<-mg.Lost()
				var pe *lock.PartError
				if !errors.Is(mg.Err(), tc.cause) || !errors.As(mg.Err(), &pe) || (pe.Path != paths[0] && pe.Path != paths[1]) {
					t.Fatalf("Err = %v, want a PartError wrapping %v", mg.Err(), tc.cause)
				}
				if err := m.Release(ctx); !errors.Is(err, lock.ErrNotHeld) || !errors.Is(err, tc.cause) {
					t.Fatalf("Release after the loss = %v, want ErrNotHeld and %v", err, tc.cause)
				}
				for _, p := range paths {
					eventually(t, other, p, "no node left in "+p, empty)
				}
				mg2, err := m.Acquire(ctx)
				if err != nil || mg2 == mg || mg2.Err() != nil {
					t.Fatalf("Acquire after the loss: %v, %v", mg2, err)
				}
			})
		})
	}
}

// After Close every call says ErrClosed, a grant held ends with
// ErrClosed, a waiting Acquire fails, and Close is idempotent.
func TestMultiClose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		m := newMulti(t, c, []string{"/multi/close/a", "/multi/close/b"})
		mg, err := m.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := newMulti(t, tg.Connect(t), []string{"/multi/close/b", "/multi/close/a"})
		res := make(chan error, 1)
		go func() {
			_, err := w.Acquire(ctx)
			res <- err
		}()
		eventually(t, c, "/multi/close/a", "the second multi waits", func(k []string) bool { return len(k) == 2 })
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-res; !errors.Is(err, lock.ErrClosed) {
			t.Fatalf("the waiting Acquire = %v, want ErrClosed", err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		<-mg.Lost()
		if !errors.Is(mg.Err(), lock.ErrClosed) {
			t.Fatalf("Err after Close = %v", mg.Err())
		}
		if _, err := m.Acquire(ctx); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Acquire after Close = %v", err)
		}
		if err := m.Release(ctx); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Release after Close = %v", err)
		}
		if err := m.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
		for _, p := range []string{"/multi/close/a", "/multi/close/b"} {
			eventually(t, c, p, "no node left in "+p, empty)
		}
	})
}

// Bad input is refused before anything is sent.
func TestNewMultiBadInput(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	c := sim.Connect()
	defer c.Close()
	for _, tc := range []struct {
		name  string
		paths []string
		want  error
	}{
		{"none", nil, lock.ErrNoPaths},
		{"empty list", []string{}, lock.ErrNoPaths},
		{"relative", []string{"/a", "b"}, zk.ErrInvalidPath},
		{"trailing slash", []string{"/a/"}, zk.ErrInvalidPath},
		{"root", []string{"/"}, zk.ErrInvalidPath},
		{"duplicate", []string{"/a", "/b", "/a"}, lock.ErrDuplicatePath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := lock.NewMulti(c, tc.paths); !errors.Is(err, tc.want) {
				t.Fatalf("NewMulti(%q) = %v, want %v", tc.paths, err, tc.want)
			}
		})
	}
	if _, err := lock.NewMulti(nil, []string{"/a"}); !errors.Is(err, lock.ErrClosed) {
		t.Errorf("NewMulti on a nil conn = %v, want ErrClosed", err)
	}
	if _, err := lock.NewMulti(c, []string{"/a", "/b"}, lock.WithCloseTimeout(0)); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("NewMulti with a bad option = %v, want ErrInvalidOption", err)
	}
	if kids, _, err := c.Children(t.Context(), "/"); err != nil || len(kids) != 1 {
		t.Errorf("the tree after refused input: %v, %v (want only /zookeeper)", kids, err)
	}
}
