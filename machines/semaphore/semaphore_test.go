package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newSem(t *testing.T, c zk.Conn, path string, max int, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(c, path, max, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// leases lists the lease nodes of the semaphore at path as another client
// sees them (none when the directory is gone), sorted.
func leases(t *testing.T, c zk.Conn, path string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	kids, _, err := c.Children(ctx, semaphore.LeasesDir(path))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kids)
	return kids
}

// eventually waits, re-reading the lease nodes each time they change (a
// child watch), until cond holds for them.
func eventually(t *testing.T, c zk.Conn, path, what string, cond func(kids []string) bool) {
	t.Helper()
	dir := semaphore.LeasesDir(path)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		kids, _, ch, err := c.ChildrenW(ctx, dir)
		if errors.Is(err, zk.ErrNoNode) {
			_, _, ch, err = c.ExistsW(ctx, dir)
		}
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		slices.Sort(kids)
		if cond(kids) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for: %s (leases %v)", what, kids)
		}
	}
}

type acquired struct {
	l   *semaphore.Lease
	err error
}

func acquireAsync(ctx context.Context, s *semaphore.Semaphore) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := s.Acquire(ctx)
		ch <- acquired{l, err}
	}()
	return ch
}

func mustAcquire(t *testing.T, ctx context.Context, s *semaphore.Semaphore) *semaphore.Lease {
	t.Helper()
	l, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitQueued waits until s has an instance waiting (READY_START).
func waitQueued(t *testing.T, sub *events.Subscription) {
	t.Helper()
	testkit.WaitEvent(t, sub, events.ReadyStart)
}

func TestAcquireRelease(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/sem/basic"
		s := newSem(t, c, path, 2, semaphore.WithID("worker-1"))
		l1 := mustAcquire(t, ctx, s)
		l2 := mustAcquire(t, ctx, s)
		if l1.Node() == l2.Node() || l2.Token() <= l1.Token() {
			t.Fatalf("two leases: %s %#x, %s %#x", l1.Node(), l1.Token(), l2.Node(), l2.Token())
		}
		for _, l := range []*semaphore.Lease{l1, l2} {
			if zk.Parent(l.Node()) != path+"/leases" {
				t.Errorf("lease node %s not under %s/leases", l.Node(), path)
			}
			if err := l.Err(); err != nil {
				t.Errorf("Err while held = %v", err)
			}
		}
		data, _, err := c.Get(ctx, path)
		if err != nil || string(data) != "2" {
			t.Fatalf("the path's data = %q, %v; want maxLeases \"2\"", data, err)
		}
		data, _, err = c.Get(ctx, l1.Node())
		if err != nil || string(data) != "worker-1" {
			t.Fatalf("the lease node's data = %q, %v; want the id", data, err)
		}
		if ok, _, err := s.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire with both leases held = %t, %v", ok, err)
		}
		eventually(t, c, path, "the failed TryAcquire's node gone", func(kids []string) bool { return len(kids) == 2 })
		if err := l1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l1.Lost():
		default:
			t.Fatal("Lost not closed after Release")
		}
		if !errors.Is(l1.Err(), semaphore.ErrReleased) {
			t.Errorf("Err after Release = %v", l1.Err())
		}
		if err := l1.Release(ctx); !errors.Is(err, semaphore.ErrNotHeld) {
			t.Errorf("a second Release = %v, want ErrNotHeld", err)
		}
		ok, l3, err := s.TryAcquire(ctx)
		if !ok || err != nil {
			t.Fatalf("TryAcquire with a lease free = %t, %v", ok, err)
		}
		if l3.Token() <= l2.Token() {
			t.Errorf("token %#x not above the previous grant's %#x", l3.Token(), l2.Token())
		}
		if err := l1.Release(ctx); !errors.Is(err, semaphore.ErrNotHeld) {
			t.Errorf("Release of a released lease whose instance holds again = %v, want ErrNotHeld", err)
		}
		if l3.Err() != nil {
			t.Fatalf("the old lease's Release ended the new one: %v", l3.Err())
		}
		for _, l := range []*semaphore.Lease{l2, l3} {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if kids := leases(t, c, path); len(kids) != 0 {
			t.Fatalf("nodes left after every Release: %v", kids)
		}
	})
}

// A release wakes a waiter: the third contender of two leases holds once
// one of the holders releases, and not before.
func TestHandOver(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/handover"
		a := newSem(t, tg.Connect(t), path, 2)
		b := newSem(t, tg.Connect(t), path, 2)
		c := newSem(t, tg.Connect(t), path, 2)
		la := mustAcquire(t, ctx, a)
		lb := mustAcquire(t, ctx, b)
		sub := c.Subscribe()
		defer sub.Close()
		res := acquireAsync(ctx, c)
		waitQueued(t, sub)
		select {
		case r := <-res:
			t.Fatalf("a third lease granted with two held: %v", r.err)
		default:
		}
		if err := lb.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.l.Token() <= lb.Token() {
			t.Errorf("waiter's token %#x not above %#x", r.l.Token(), lb.Token())
		}
		if la.Err() != nil {
			t.Errorf("the other holder's lease ended: %v", la.Err())
		}
	})
}

// AcquireN takes all n or none: with one lease taken by someone else, an
// AcquireN(3) of 3 leases waits; when its ctx ends it gives back the two
// it took and leaves no node; once the lease is free it takes all three.
func TestAcquireNAllOrNone(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/n"
		cc := tg.Connect(t)
		other := newSem(t, tg.Connect(t), path, 3)
		s := newSem(t, cc, path, 3)
		lo := mustAcquire(t, ctx, other)
		sub := s.Subscribe()
		defer sub.Close()
		nctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := s.AcquireN(nctx, 3)
			done <- err
		}()
		waitQueued(t, sub) // the third waits behind the other's
		eventually(t, cc, path, "the other's and AcquireN's three nodes", func(kids []string) bool { return len(kids) == 4 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("AcquireN after its ctx ended = %v", err)
		}
		eventually(t, cc, path, "only the other's node left", func(kids []string) bool {
			return len(kids) == 1 && kids[0] == zk.Base(lo.Node())
		})
		if err := lo.Release(ctx); err != nil {
			t.Fatal(err)
		}
		ls, err := s.AcquireN(ctx, 3)
		if err != nil || len(ls) != 3 {
			t.Fatalf("AcquireN(3) of 3 free leases = %d, %v", len(ls), err)
		}
		for i := 1; i < len(ls); i++ {
			if ls[i].Token() <= ls[i-1].Token() {
				t.Errorf("tokens not growing: %#x after %#x", ls[i].Token(), ls[i-1].Token())
			}
		}
		if ok, _, err := other.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire with all leases taken = %t, %v", ok, err)
		}
		for _, l := range ls {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// TryAcquire answers before its node's delete completes.
		eventually(t, cc, path, "no node left", func(kids []string) bool { return len(kids) == 0 })
	})
}

// Many handles on a few connections, each acquiring and releasing in a
// loop: never more than maxLeases hold at once, and they do overlap.
func TestNeverMoreThanMaxLeases(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const handles, conns, max, total = 8, 4, 3, 600
		ctx := ctxT(t)
		var cs []zk.Conn
		for range conns {
			cs = append(cs, tg.Connect(t))
		}
		var holders, maxHolders, remaining atomic.Int64
		remaining.Store(total)
		var wg sync.WaitGroup
		errs := make(chan error, handles)
		for i := range handles {
			s := newSem(t, cs[i%conns], "/sem/bounded", max)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for remaining.Add(-1) >= 0 {
					l, err := s.Acquire(ctx)
					if err != nil {
						errs <- err
						return
					}
					h := holders.Add(1)
					for m := maxHolders.Load(); h > m && !maxHolders.CompareAndSwap(m, h); m = maxHolders.Load() {
					}
					holders.Add(-1)
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("max concurrent holders: %d of %d", maxHolders.Load(), max)
		if m := maxHolders.Load(); m > max {
			t.Errorf("max concurrent holders = %d > maxLeases %d", m, max)
		}
		if kids := leases(t, cs[0], "/sem/bounded"); len(kids) != 0 {
			t.Errorf("nodes left behind: %v", kids)
		}
	})
}

// Every bad argument is refused with its sentinel before anything is sent:
// the server's tree is untouched.
func TestBadInput(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		for _, tc := range []struct {
			name string
			path string
			max  int
			opts []semaphore.Option
			want error
		}{
			{"empty path", "", 1, nil, zk.ErrInvalidPath},
			{"relative path", "sem/x", 1, nil, zk.ErrInvalidPath},
			{"trailing slash", "/sem/x/", 1, nil, zk.ErrInvalidPath},
			{"root", "/", 1, nil, zk.ErrInvalidPath},
			{"zero leases", "/sem/x", 0, nil, semaphore.ErrInvalidOption},
			{"negative leases", "/sem/x", -2, nil, semaphore.ErrInvalidOption},
			{"zero close timeout", "/sem/x", 1, []semaphore.Option{semaphore.WithCloseTimeout(0)}, semaphore.ErrInvalidOption},
		} {
			if _, err := semaphore.New(c, tc.path, tc.max, tc.opts...); !errors.Is(err, tc.want) {
				t.Errorf("%s: New = %v, want %v", tc.name, err, tc.want)
			}
		}
		if _, err := semaphore.New(nil, "/sem/x", 1); !errors.Is(err, semaphore.ErrClosed) {
			t.Errorf("nil connection: New = %v", err)
		}
		s := newSem(t, c, "/sem/x", 2)
		for _, n := range []int{0, -1, 3} {
			if _, err := s.AcquireN(ctx, n); !errors.Is(err, semaphore.ErrInvalidOption) {
				t.Errorf("AcquireN(%d) of 2 = %v, want ErrInvalidOption", n, err)
			}
		}
		if _, err := semaphore.Holders(ctx, c, "sem/x"); !errors.Is(err, zk.ErrInvalidPath) {
			t.Errorf("Holders of a relative path = %v", err)
		}
		if _, _, err := c.Get(ctx, "/sem"); !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("bad input sent something: /sem: %v", err)
		}
	})
}

// A semaphore whose path records another maxLeases fails with
// ErrMaxLeasesMismatch and creates nothing; Curator's empty data is taken
// over.
func TestMaxLeasesMismatch(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		a := newSem(t, c, "/sem/mm", 2)
		la := mustAcquire(t, ctx, a)
		b := newSem(t, tg.Connect(t), "/sem/mm", 3)
		if _, err := b.Acquire(ctx); !errors.Is(err, semaphore.ErrMaxLeasesMismatch) {
			t.Fatalf("Acquire with another maxLeases = %v", err)
		}
		if ok, _, err := b.TryAcquire(ctx); ok || !errors.Is(err, semaphore.ErrMaxLeasesMismatch) {
			t.Fatalf("TryAcquire with another maxLeases = %t, %v", ok, err)
		}
		if _, err := b.AcquireN(ctx, 1); !errors.Is(err, semaphore.ErrMaxLeasesMismatch) {
			t.Fatalf("AcquireN with another maxLeases = %v", err)
		}
		if kids := leases(t, c, "/sem/mm"); len(kids) != 1 || kids[0] != zk.Base(la.Node()) {
			t.Fatalf("a mismatched semaphore created nodes: %v", kids)
		}
		// A path with no data (Curator's) is accepted, and ours recorded.
		if _, err := c.Create(ctx, "/sem/curator", nil, zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		d := newSem(t, c, "/sem/curator", 4)
		mustAcquire(t, ctx, d)
		if data, _, err := c.Get(ctx, "/sem/curator"); err != nil || string(data) != "4" {
			t.Fatalf("empty data not replaced by ours: %q, %v", data, err)
		}
		e := newSem(t, c, "/sem/curator", 5)
		if _, err := e.Acquire(ctx); !errors.Is(err, semaphore.ErrMaxLeasesMismatch) {
			t.Fatalf("after recording: Acquire with another maxLeases = %v", err)
		}
	})
}

// Holders reports the first maxLeases lease nodes, with their ids and
// tokens, and no waiter; it creates nothing.
func TestHolders(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/sem/holders"
		if hs, err := semaphore.Holders(ctx, c, path); err != nil || len(hs) != 0 {
			t.Fatalf("Holders of a missing path = %v, %v", hs, err)
		}
		if _, _, err := c.Get(ctx, path); !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("Holders created the path: %v", err)
		}
		var ls []*semaphore.Lease
		for i := range 2 {
			s := newSem(t, tg.Connect(t), path, 2, semaphore.WithID(fmt.Sprintf("h%d", i)))
			ls = append(ls, mustAcquire(t, ctx, s))
		}
		w := newSem(t, tg.Connect(t), path, 2, semaphore.WithID("waiter"))
		sub := w.Subscribe()
		defer sub.Close()
		res := acquireAsync(ctx, w)
		waitQueued(t, sub)
		hs, err := semaphore.Holders(ctx, c, path)
		if err != nil {
			t.Fatal(err)
		}
		want := []semaphore.Holder{{Node: ls[0].Node(), ID: "h0", Token: ls[0].Token()}, {Node: ls[1].Node(), ID: "h1", Token: ls[1].Token()}}
		if !slices.Equal(hs, want) {
			t.Fatalf("Holders = %+v, want %+v", hs, want)
		}
		if err := ls[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		hs, err = semaphore.Holders(ctx, c, path)
		if err != nil || len(hs) != 2 || hs[1].ID != "waiter" || hs[1].Token != r.l.Token() {
			t.Fatalf("Holders after the hand-over = %+v, %v", hs, err)
		}
		// A path with no maxLeases recorded (only Curator used it).
		if _, err := c.Create(ctx, "/sem/curator-only", nil, zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		if _, err := semaphore.Holders(ctx, c, "/sem/curator-only"); !errors.Is(err, semaphore.ErrMaxLeasesUnknown) {
			t.Fatalf("Holders of a path with no maxLeases = %v", err)
		}
	})
}

// The handle's face: Path, ID (WithID's, or a random one), and State
// summing up its instances: START, READY while an acquire waits, LEADER
// while a lease is held (also while another acquire waits), STOP after
// the last call released, and after Close; a subscriber gets the
// handle's START first, whenever it subscribes.
func TestHandleShape(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/shape"
		s := newSem(t, tg.Connect(t), path, 1, semaphore.WithID("shape"))
		other := newSem(t, tg.Connect(t), path, 1)
		if s.Path() != path || s.ID() != "shape" || other.ID() == "" {
			t.Fatalf("Path, ID = %q, %q; another's ID %q", s.Path(), s.ID(), other.ID())
		}
		state := func(want events.State, when string) {
			t.Helper()
			if st := s.State(); st != want {
				t.Fatalf("State %s = %v, want %v", when, st, want)
			}
		}
		state(events.StateStart, "before any call")
		lo := mustAcquire(t, ctx, other)
		sub := s.Subscribe()
		defer sub.Close()
		res := acquireAsync(ctx, s)
		waitQueued(t, sub)
		state(events.StateReady, "while an acquire waits")
		if err := lo.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		state(events.StateLeader, "holding a lease")
		res = acquireAsync(ctx, s)
		waitQueued(t, sub)
		state(events.StateLeader, "holding a lease, another acquire waiting")
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r = <-res; r.err != nil {
			t.Fatal(r.err)
		}
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		state(events.StateStop, "after the last Release")
		late := s.Subscribe()
		if ev := <-late.C; ev.Type != events.Start || ev.Instance != "shape" {
			t.Errorf("a late subscriber's first event = %v, want the handle's START", ev)
		}
		late.Close()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		state(events.StateStop, "after Close")
	})
}
