package rwlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newRW(t *testing.T, c zk.Conn, path string, opts ...rwlock.Option) *rwlock.RWLock {
	t.Helper()
	rw, err := rwlock.New(c, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	return rw
}

// eventually waits, re-reading path's children on every change, until
// cond holds for them.
func eventually(t *testing.T, c zk.Conn, path, what string, cond func(kids []string) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		kids, _, ch, err := c.ChildrenW(ctx, path)
		if errors.Is(err, zk.ErrNoNode) {
			_, _, ch, err = c.ExistsW(ctx, path)
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
			t.Fatalf("timed out waiting for: %s (children %v)", what, kids)
		}
	}
}

func count(n int) func([]string) bool { return func(k []string) bool { return len(k) == n } }

type acquired struct {
	g   *rwlock.Grant
	err error
}

func acquireAsync(ctx context.Context, l *rwlock.Lock) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		g, err := l.Acquire(ctx)
		ch <- acquired{g, err}
	}()
	return ch
}

func must(t *testing.T, g *rwlock.Grant, err error) *rwlock.Grant {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func acq(t *testing.T, ctx context.Context, l *rwlock.Lock) *rwlock.Grant {
	t.Helper()
	g, err := l.Acquire(ctx)
	return must(t, g, err)
}

func rel(t *testing.T, ctx context.Context, l *rwlock.Lock) {
	t.Helper()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func try(t *testing.T, ctx context.Context, l *rwlock.Lock) bool {
	t.Helper()
	ok, _, err := l.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return ok
}

// Readers hold together; a writer waits for them and then holds alone.
func TestReadersShareWriterExcludes(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/rw/share"
		c := tg.Connect(t)
		r1, r2, w := newRW(t, c, path), newRW(t, tg.Connect(t), path), newRW(t, tg.Connect(t), path)
		g1 := acq(t, ctx, r1.ReadLock())
		g2 := acq(t, ctx, r2.ReadLock())
		if g1.Node() == g2.Node() || !strings.Contains(g1.Node(), "/_c_") || !strings.Contains(g1.Node(), "-__READ__") {
			t.Fatalf("reader nodes %s, %s", g1.Node(), g2.Node())
		}
		if try(t, ctx, w.WriteLock()) {
			t.Fatal("a writer held beside two readers")
		}
		eventually(t, c, path, "the try's node gone", count(2))
		wch := acquireAsync(ctx, w.WriteLock())
		eventually(t, c, path, "the writer queued", count(3))
		// A reader behind a queued writer waits for it (no writer starves).
		if try(t, ctx, newRW(t, c, path).ReadLock()) {
			t.Fatal("a reader overtook a queued writer")
		}
		rel(t, ctx, r1.ReadLock())
		rel(t, ctx, r2.ReadLock())
		a := <-wch
		gw := must(t, a.g, a.err)
		if !strings.Contains(gw.Node(), "-__WRIT__") || gw.Token() <= g2.Token() {
			t.Fatalf("writer node %s token %d after readers' %d", gw.Node(), gw.Token(), g2.Token())
		}
		if try(t, ctx, r1.ReadLock()) {
			t.Fatal("a reader held beside the writer")
		}
		rel(t, ctx, w.WriteLock())
		if !try(t, ctx, r1.ReadLock()) {
			t.Fatal("no reader could hold once the writer left")
		}
	})
}

// A downgrade: the writer takes the read lock at once, releases the write
// lock, and a writer queued behind it still waits for the reader.
func TestDowngrade(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/rw/downgrade"
		c := tg.Connect(t)
		cb := tg.Connect(t)
		a, b := newRW(t, c, path), newRW(t, cb, path)
		gw := acq(t, ctx, a.WriteLock())
		sub := b.WriteLock().Subscribe()
		defer sub.Close()
		bch := acquireAsync(ctx, b.WriteLock())
		testkit.WaitEvent(t, sub, events.ReadyStart) // b waits on a's writer
		gr := acq(t, ctx, a.ReadLock())
		if seq := gw.Node()[len(gw.Node())-10:]; !strings.HasSuffix(gr.Node(), "-__READ__"+seq) {
			t.Fatalf("downgraded reader %s is not at the writer's sequence %s", gr.Node(), seq)
		}
		// b, behind a's writer, lists again and watches the reader (its
		// deletion: a reader's mark would tell a writer nothing): hold
		// that watch's reply to know b decided to wait.
		watched := tg.HoldNextReply(t, cb, testkit.OpChildren, gr.Node())
		rel(t, ctx, a.WriteLock())
		if gw.Err() == nil || gr.Err() != nil {
			t.Fatalf("after the write release: write %v, read %v", gw.Err(), gr.Err())
		}
		select {
		case <-watched.Fired():
		case r := <-bch:
			t.Fatalf("b's writer got in beside the downgraded reader: %+v", r)
		}
		watched.Release()
		hs, err := rwlock.Holders(ctx, c, path)
		if err != nil || len(hs) != 1 || hs[0].Node != gr.Node() || hs[0].Write {
			t.Fatalf("holders after the downgrade: %+v, %v", hs, err)
		}
		if b.WriteLock().State() == events.StateLeader {
			t.Fatal("b's writer holds beside the downgraded reader")
		}
		rel(t, ctx, a.ReadLock())
		r := <-bch
		must(t, r.g, r.err)
	})
}

// Asking for the write lock while holding only the read lock is refused at
// once, with nothing sent; a downgraded participant may take its write
// lock again while it still holds it (WithReentrant).
func TestUpgradeRefused(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/rw/upgrade"
		c := tg.Connect(t)
		a := newRW(t, c, path, rwlock.WithReentrant())
		acq(t, ctx, a.ReadLock())
		if _, err := a.WriteLock().Acquire(ctx); !errors.Is(err, rwlock.ErrUpgrade) {
			t.Fatalf("upgrade: %v, want ErrUpgrade", err)
		}
		if ok, _, err := a.WriteLock().TryAcquire(ctx); ok || !errors.Is(err, rwlock.ErrUpgrade) {
			t.Fatalf("try upgrade: %t, %v", ok, err)
		}
		eventually(t, c, path, "only the reader's node", count(1))
		rel(t, ctx, a.ReadLock())
		gw := acq(t, ctx, a.WriteLock())
		acq(t, ctx, a.ReadLock())
		if g := acq(t, ctx, a.WriteLock()); g != gw {
			t.Fatal("the re-entrant write acquire after a downgrade is another grant")
		}
	})
}

// Holders shows the current holders only, with their participants' ids,
// and Curator's nodes count.
func TestHolders(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/rw/holders"
		c := tg.Connect(t)
		if hs, err := rwlock.Holders(ctx, c, path); err != nil || len(hs) != 0 {
			t.Fatalf("holders of a missing path: %v, %v", hs, err)
		}
		a, b, w := newRW(t, c, path, rwlock.WithID("a")), newRW(t, tg.Connect(t), path), newRW(t, tg.Connect(t), path, rwlock.WithID("w"))
		ga := acq(t, ctx, a.ReadLock())
		wch := acquireAsync(ctx, w.WriteLock())
		eventually(t, c, path, "the writer queued", count(2))
		// A Curator reader made after the writer waits; one made by hand
		// below everyone (a plain node) holds.
		hs, err := rwlock.Holders(ctx, c, path)
		if err != nil || len(hs) != 1 || hs[0].Node != ga.Node() || hs[0].Token != ga.Token() || hs[0].Write || hs[0].ID != "a" {
			t.Fatalf("holders: %+v, %v", hs, err)
		}
		rel(t, ctx, a.ReadLock())
		a1 := <-wch
		gw := must(t, a1.g, a1.err)
		bch := acquireAsync(ctx, b.ReadLock())
		eventually(t, c, path, "the reader queued", count(2))
		hs, err = rwlock.Holders(ctx, c, path)
		if err != nil || len(hs) != 1 || hs[0].Node != gw.Node() || !hs[0].Write || hs[0].ID != "w" {
			t.Fatalf("holders: %+v, %v", hs, err)
		}
		rel(t, ctx, w.WriteLock())
		b1 := <-bch
		must(t, b1.g, b1.err)
		for _, bad := range []string{"", "rel", "/x/"} {
			if _, err := rwlock.Holders(ctx, c, bad); !errors.Is(err, zk.ErrInvalidPath) {
				t.Errorf("Holders(%q): %v", bad, err)
			}
		}
	})
}

func TestBadInputAndClose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		for _, bad := range []string{"", "rel", "/x/", "/"} {
			if _, err := rwlock.New(c, bad); !errors.Is(err, zk.ErrInvalidPath) {
				t.Errorf("New(%q): %v", bad, err)
			}
		}
		if _, err := rwlock.New(nil, "/rw/x"); !errors.Is(err, rwlock.ErrClosed) {
			t.Errorf("New(nil conn): %v", err)
		}
		if _, err := rwlock.New(c, "/rw/x", rwlock.WithCloseTimeout(0)); !errors.Is(err, rwlock.ErrInvalidOption) {
			t.Errorf("New(close timeout 0): %v", err)
		}
		rw := newRW(t, c, "/rw/bad", nil)
		if err := rw.ReadLock().Release(ctx); !errors.Is(err, rwlock.ErrNotHeld) {
			t.Errorf("Release without a hold: %v", err)
		}
		g := acq(t, ctx, rw.WriteLock())
		if err := rw.Close(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(g.Err(), rwlock.ErrClosed) {
			t.Errorf("grant after Close: %v", g.Err())
		}
		if _, err := rw.ReadLock().Acquire(ctx); !errors.Is(err, rwlock.ErrClosed) {
			t.Errorf("Acquire after Close: %v", err)
		}
		if err := rw.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		eventually(t, c, "/rw/bad", "no node after Close", count(0))
	})
}

// A waiter whose writer below gives up (its node deleted with no release
// mark) leaves no watch behind: a reader watches only the deletion of the
// writer it waits for, and a writer behind a writer, the one watcher of
// that writer's mark, fires the mark at the end of its term. (A reader
// behind two writers, and a writer behind a writer, once left an exists
// watch on the mark of the writer that gave up, and a goroutine with it,
// until its session ended.)
func TestNoWatchLeftWhenAWriterGivesUp(t *testing.T) {
	for _, readerFirst := range []bool{true, false} {
		name := "writer behind the writer that gives up"
		if readerFirst {
			name = "reader behind the writer that gives up"
		}
		t.Run(name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) { writerGivesUp(t, tg, readerFirst) })
		})
	}
}

// writerGivesUp: a holds the write lock, b's writer waits behind it, and a
// reader and a second writer queue behind b's (the reader first, or the
// writer); b gives up; everything is acquired and released in turn.
func writerGivesUp(t *testing.T, tg testkit.Target, readerFirst bool) {
	ctx := ctxT(t)
	const path = "/rw/giveup"
	ca, cb, cr, cw := tg.Connect(t), tg.Connect(t), tg.Connect(t), tg.Connect(t)
	a, b, r, w := newRW(t, ca, path), newRW(t, cb, path), newRW(t, cr, path), newRW(t, cw, path)
	acq(t, ctx, a.WriteLock())
	bctx, giveUp := context.WithCancel(ctx)
	bch := acquireAsync(bctx, b.WriteLock())
	eventually(t, ca, path, "b's writer queued", count(2))
	// Each waits (READY_START) before b gives up.
	rsub, wsub := r.ReadLock().Subscribe(), w.WriteLock().Subscribe()
	defer rsub.Close()
	defer wsub.Close()
	first, second := r.ReadLock(), w.WriteLock()
	if !readerFirst {
		first, second = second, first
	}
	ch1 := acquireAsync(ctx, first)
	eventually(t, ca, path, "the third contender queued", count(3))
	ch2 := acquireAsync(ctx, second)
	testkit.WaitEvent(t, rsub, events.ReadyStart)
	testkit.WaitEvent(t, wsub, events.ReadyStart)
	giveUp()
	if got := <-bch; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("b's writer after giving up: %+v", got)
	}
	eventually(t, ca, path, "b's writer gone", count(3))
	rel(t, ctx, a.WriteLock())
	for _, c := range []struct {
		l  *rwlock.Lock
		ch <-chan acquired
	}{{first, ch1}, {second, ch2}} {
		got := <-c.ch
		must(t, got.g, got.err)
		rel(t, ctx, c.l)
	}
	for name, c := range map[string]zk.Conn{"a": ca, "b": cb, "reader": cr, "writer": cw} {
		if ws := testkit.WatchedPaths(t, tg, c); len(ws) != 0 {
			t.Errorf("%s's session still watches %v", name, ws)
		}
	}
}

// Each of the read/write lock's sentinels matches the one every recipe
// shares.
func TestErrorsMatchTheShared(t *testing.T) {
	for _, c := range []struct{ err, shared error }{
		{rwlock.ErrClosed, zkrecipes.ErrClosed},
		{rwlock.ErrSessionLost, zkrecipes.ErrSessionLost},
		{rwlock.ErrSuspended, zkrecipes.ErrSuspended},
		{rwlock.ErrNodeDeleted, zkrecipes.ErrNodeDeleted},
		{rwlock.ErrInvalidOption, zkrecipes.ErrInvalidOption},
		{rwlock.ErrCleanupPending, zkrecipes.ErrCleanupPending},
	} {
		if !errors.Is(c.err, c.shared) {
			t.Errorf("%v does not match %v", c.err, c.shared)
		}
	}
}
