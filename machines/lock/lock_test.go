package lock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/lagging"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newLock(t *testing.T, c zk.Conn, path string, opts ...lock.Option) *lock.Lock {
	t.Helper()
	l, err := lock.New(c, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// children lists path's children as another client sees them (none when
// path is gone), sorted.
func children(t *testing.T, c zk.Conn, path string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	kids, _, err := c.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kids)
	return kids
}

// waitChildren waits, with a child watch, until path has at least n
// children.
func waitChildren(t *testing.T, c zk.Conn, path string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		kids, _, ch, err := c.ChildrenW(ctx, path)
		if err != nil {
			t.Error(err)
			return
		}
		if len(kids) >= n {
			return
		}
		select {
		case <-ch:
		case <-time.After(15 * time.Second):
			t.Errorf("%s has %d children, want %d", path, len(kids), n)
			return
		}
	}
}

// eventually waits, re-reading path's children each time they change (a
// child watch), until cond holds for them.
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

type acquired struct {
	g   *lock.Grant
	err error
}

func acquireAsync(ctx context.Context, l *lock.Lock) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		g, err := l.Acquire(ctx)
		ch <- acquired{g, err}
	}()
	return ch
}

// ensureDir creates path and its missing ancestors as container nodes, as
// a lock does on first use.
func ensureDir(t *testing.T, c zk.Conn, path string) {
	t.Helper()
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		if _, err := c.Create(ctxT(t), path[:i], nil, zk.ModeContainer); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
}

func TestMutualExclusion(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const handles, conns, total = 16, 4, 2000
		ctx := ctxT(t)
		var cs []zk.Conn
		for range conns {
			cs = append(cs, tg.Connect(t))
		}
		var (
			shared, holders, maxHolders atomic.Int64
			lastToken                   atomic.Int64
			remaining                   atomic.Int64
			wg                          sync.WaitGroup
			mu                          sync.Mutex
			failures                    []string
		)
		remaining.Store(total)
		fail := func(f string, a ...any) {
			mu.Lock()
			failures = append(failures, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
		for i := range handles {
			l := newLock(t, cs[i%conns], "/locks/mutex")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for remaining.Add(-1) >= 0 {
					g, err := l.Acquire(ctx)
					if err != nil {
						fail("acquire: %v", err)
						return
					}
					if h := holders.Add(1); h > maxHolders.Load() {
						maxHolders.Store(h)
					}
					if prev := lastToken.Swap(g.Token()); g.Token() <= prev {
						fail("token %#x after %#x: not increasing in grant order", g.Token(), prev)
					}
					v := shared.Load() // a non-atomic read-modify-write
					runtime.Gosched()
					shared.Store(v + 1)
					holders.Add(-1)
					if err := l.Release(ctx); err != nil {
						fail("release: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if len(failures) > 0 {
			t.Fatalf("%d failures, first: %s", len(failures), failures[0])
		}
		if got := shared.Load(); got != total {
			t.Errorf("shared counter = %d after %d exclusive increments: lost updates", got, total)
		}
		if m := maxHolders.Load(); m != 1 {
			t.Errorf("max concurrent holders = %d", m)
		}
		if kids := children(t, cs[0], "/locks/mutex"); len(kids) != 0 {
			t.Errorf("nodes left behind: %v", kids)
		}
	})
}

func TestFairFIFO(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const handles, conns = 8, 4
		duration := 500 * time.Millisecond
		if tg.Name() != "sim" {
			duration = 2 * time.Second
		}
		ctx := ctxT(t)
		var cs []zk.Conn
		for range conns {
			cs = append(cs, tg.Connect(t))
		}
		// A gate holds the lock until every handle is queued, so that the
		// run starts with all of them waiting.
		gate := newLock(t, cs[0], "/locks/fair")
		if _, err := gate.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		counts := make([]int, handles)
		var deadline atomic.Int64
		var wg sync.WaitGroup
		for i := range handles {
			l := newLock(t, cs[i%conns], "/locks/fair")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if _, err := l.Acquire(ctx); err != nil {
						t.Error(err)
						return
					}
					counts[i]++
					over := time.Now().UnixNano() >= deadline.Load()
					if !over {
						// Hold until every other handle is queued again, so
						// "re-requests at once" holds however the
						// goroutines are scheduled.
						waitChildren(t, cs[i%conns], "/locks/fair", handles)
					}
					if err := l.Release(ctx); err != nil {
						t.Error(err)
						return
					}
					if over {
						return
					}
				}
			}()
		}
		waitChildren(t, cs[0], "/locks/fair", handles+1) // every handle queued
		deadline.Store(time.Now().Add(duration).UnixNano())
		if err := gate.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		lo, hi := slices.Min(counts), slices.Max(counts)
		t.Logf("per-handle acquisitions in %v: %v", duration, counts)
		if hi-lo > 1 || lo == 0 {
			t.Errorf("not FIFO-fair: per-handle counts %v differ by %d", counts, hi-lo)
		}
	})
}

func TestReentrantAndTryAcquire(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a := newLock(t, tg.Connect(t), "/locks/re", lock.WithReentrant())
		b := newLock(t, tg.Connect(t), "/locks/re")
		g1, err := a.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		g2, err := a.Acquire(ctx)
		if err != nil || g2.Token() != g1.Token() || g2.Node() != g1.Node() {
			t.Fatalf("re-entrant acquire: %v, %v vs %v", err, g2, g1)
		}
		if ok, _, err := b.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire while held = %t, %v", ok, err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := b.TryAcquire(ctx); ok {
			t.Fatal("released after one of two holds")
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-g1.Lost():
		default:
			t.Fatal("Lost not closed after the last release")
		}
		ok, g3, err := b.TryAcquire(ctx)
		if !ok || err != nil {
			t.Fatalf("TryAcquire after release = %t, %v", ok, err)
		}
		if g3.Token() <= g1.Token() {
			t.Fatalf("token %#x not above the previous grant's %#x", g3.Token(), g1.Token())
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Release without a hold = %v, want ErrNotHeld", err)
		}
	})
}

func TestGhostNodeAdopted(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, other := tg.Connect(t), tg.Connect(t)
		ensureDir(t, other, "/locks/ghost")
		l := newLock(t, c, "/locks/ghost")
		tg.LoseNextReply(t, c, testkit.OpCreate, "/locks/ghost/")
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if kids := children(t, other, "/locks/ghost"); len(kids) != 1 || "/locks/ghost/"+kids[0] != g.Node() {
			t.Fatalf("after a lost create reply: nodes %v, grant on %s; want exactly our adopted node", kids, g.Node())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if kids := children(t, other, "/locks/ghost"); len(kids) != 0 {
			t.Fatalf("left behind after release: %v", kids)
		}
	})
}

// A create whose reply was lost, not yet applied on the server the lock
// then lists from (see package lagging), is still found and adopted: the
// hunt syncs first. Listed without the sync, the node was missed, made
// again, and the first one, applied late, sat below ours as a ghost of
// our own session that the lock waited on until the session ended.
func TestGhostNodeAdoptedFromALaggingServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		defer cancel()
		c, other := lagging.Wrap(tg.Connect(t)), tg.Connect(t)
		ensureDir(t, other, "/locks/lagging")
		l := newLock(t, c, "/locks/lagging")
		w := c.LoseNext(lagging.OpCreate, "/locks/lagging/")
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire after a create applied late = %v (nodes %v)", err, children(t, other, "/locks/lagging"))
		}
		<-w.Applied()
		if kids := children(t, other, "/locks/lagging"); len(kids) != 1 || "/locks/lagging/"+kids[0] != g.Node() {
			t.Fatalf("nodes %v, grant on %s; want exactly our adopted node", kids, g.Node())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if kids := children(t, other, "/locks/lagging"); len(kids) != 0 {
			t.Fatalf("left behind after release: %v", kids)
		}
	})
}

func TestSessionExpiryWhileHolding(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, other := tg.Connect(t), tg.Connect(t)
		l := newLock(t, c, "/locks/expire-held")
		sub := l.Subscribe()
		defer sub.Close()
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tg.Expire(t, c)
		select {
		case <-g.Lost():
		case <-time.After(15 * time.Second):
			t.Fatal("Lost() not closed after the session expired")
		}
		if ev := testkit.WaitEvent(t, sub, events.Failed); ev.Err == nil {
			t.Fatal("FAILED without a cause")
		}
		eventually(t, other, "/locks/expire-held", "the expired holder's node is gone", func(kids []string) bool {
			return !slices.Contains(kids, zk.Base(g.Node()))
		})
		// The lost hold is released (ErrNotHeld), as every hold is, and
		// the handle works again on the new session.
		if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Release of a lost hold = %v, want ErrNotHeld", err)
		}
		g2, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g2.Token() <= g.Token() {
			t.Fatalf("token after expiry %#x not above %#x", g2.Token(), g.Token())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSessionExpiryWhileWaiting(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, other := tg.Connect(t), tg.Connect(t)
		holder := newLock(t, other, "/locks/expire-wait")
		hg, err := holder.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l := newLock(t, c, "/locks/expire-wait")
		sub := l.Subscribe()
		defer sub.Close()
		res := acquireAsync(ctx, l)
		testkit.WaitEvent(t, sub, events.ReadyStart)
		tg.Expire(t, c)
		select {
		case r := <-res:
			if !errors.Is(r.err, lock.ErrSessionLost) {
				t.Fatalf("Acquire after expiry = %v, want ErrSessionLost", r.err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Acquire still blocked after its session expired")
		}
		eventually(t, other, "/locks/expire-wait", "only the holder's node is left", func(kids []string) bool {
			return len(kids) == 1 && "/locks/expire-wait/"+kids[0] == hg.Node()
		})
	})
}

func TestCancelWhileWaiting(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, other := tg.Connect(t), tg.Connect(t)
		holder := newLock(t, other, "/locks/cancel")
		hg, err := holder.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l := newLock(t, c, "/locks/cancel")
		sub := l.Subscribe()
		defer sub.Close()
		wctx, cancel := context.WithCancel(ctx)
		res := acquireAsync(wctx, l)
		testkit.WaitEvent(t, sub, events.ReadyStart)
		cancel()
		if r := <-res; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Acquire after cancel = %v, want context.Canceled", r.err)
		}
		eventually(t, other, "/locks/cancel", "the cancelled waiter's node is gone", func(kids []string) bool {
			return len(kids) == 1 && "/locks/cancel/"+kids[0] == hg.Node()
		})
		// The holder's release still hands over normally.
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if g, err := l.Acquire(ctx); err != nil || g.Token() <= hg.Token() {
			t.Fatalf("acquire after holder released: %v", err)
		}
	})
}

func TestCancelBetweenCreateAndReply(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, other := tg.Connect(t), tg.Connect(t)
		ensureDir(t, other, "/locks/late")
		l := newLock(t, c, "/locks/late")
		held := tg.HoldNextReply(t, c, testkit.OpCreate, "/locks/late/")
		wctx, cancel := context.WithCancel(ctx)
		res := acquireAsync(wctx, l)
		<-held.Fired()
		if kids := children(t, other, "/locks/late"); len(kids) != 1 {
			t.Fatalf("the create should be applied: %v", kids)
		}
		cancel()
		if r := <-res; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Acquire = %v, want context.Canceled", r.err)
		}
		held.Release() // the create's reply arrives after the caller gave up
		eventually(t, other, "/locks/late", "the late-created node is deleted", func(kids []string) bool {
			return len(kids) == 0
		})
	})
}

func TestForeignCuratorNodeIsRespected(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, other := tg.Connect(t), tg.Connect(t)
		ensureDir(t, other, "/locks/interop")
		// What a Curator InterProcessMutex creates.
		foreign, err := other.Create(ctx, "/locks/interop/_c_0f8a9b1c-2d3e-4f50-8a6b-7c8d9e0f1a2b-lock-", nil, zk.ModeEphemeralSequential)
		if err != nil {
			t.Fatal(err)
		}
		l := newLock(t, c, "/locks/interop")
		if ok, _, err := l.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire behind a Curator holder = %t, %v", ok, err)
		}
		sub := l.Subscribe()
		defer sub.Close()
		res := acquireAsync(ctx, l)
		testkit.WaitEvent(t, sub, events.ReadyStart)
		if err := other.Delete(ctx, foreign, zk.AnyVersion); err != nil { // Curator releases: a plain delete
			t.Fatal(err)
		}
		if r := <-res; r.err != nil {
			t.Fatal(r.err)
		}
	})
}

func TestBadInputIsRefusedBeforeAnythingIsSent(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, other := tg.Connect(t), tg.Connect(t)
		for _, p := range []string{"", "locks", "/locks/", "/locks//x", "/locks/./x", "/locks/..", "/lo\x00cks", "/"} {
			if _, err := lock.New(c, p); !errors.Is(err, zk.ErrInvalidPath) {
				t.Errorf("New(%q) = %v, want ErrInvalidPath", p, err)
			}
		}
		if _, err := lock.New(nil, "/locks/x"); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("New(nil conn) = %v, want ErrClosed", err)
		}
		l := newLock(t, c, "/locks/bad")
		if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Release without Acquire = %v, want ErrNotHeld", err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.Acquire(done); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire with a done ctx = %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(ctx); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Acquire after Close = %v, want ErrClosed", err)
		}
		c.Close()
		if _, err := lock.New(c, "/locks/x"); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("New(closed conn) = %v, want ErrClosed", err)
		}
		if _, ok, err := other.Exists(ctx, "/locks"); ok || err != nil {
			t.Errorf("something was created: exists=%t err=%v", ok, err)
		}
	})
}
