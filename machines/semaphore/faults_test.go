package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A holder whose session expires gives its lease back: its Lost closes
// with ErrSessionLost, its node is gone, and the waiter holds.
func TestSessionExpiryReturnsTheLease(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/expiry"
		ca := tg.Connect(t)
		a := newSem(t, ca, path, 1, semaphore.WithSuspendedIsLost(false))
		w := newSem(t, tg.Connect(t), path, 1)
		la := mustAcquire(t, ctx, a)
		sub := w.Subscribe()
		defer sub.Close()
		res := acquireAsync(ctx, w)
		waitQueued(t, sub)
		tg.Expire(t, ca)
		<-la.Lost()
		if !errors.Is(la.Err(), semaphore.ErrSessionLost) {
			t.Errorf("Err after expiry = %v, want ErrSessionLost", la.Err())
		}
		r := <-res
		if r.err != nil {
			t.Fatalf("the waiter after the holder's expiry: %v", r.err)
		}
		if err := la.Release(ctx); !errors.Is(err, semaphore.ErrNotHeld) {
			t.Errorf("Release of a lost lease = %v, want ErrNotHeld", err)
		}
		// The expired handle goes on with its new session.
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l := mustAcquire(t, ctx, a)
		if l.Token() <= r.l.Token() {
			t.Errorf("token %#x after %#x", l.Token(), r.l.Token())
		}
	})
}

// A connection loss while holding ends the lease under the default policy
// (ErrSuspended), and its node goes once the connection is back, so the
// waiter holds; under WithSuspendedIsLost(false) the lease survives it.
func TestConnectionLossWhileHolding(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/suspend"
		ca, cb := tg.Connect(t), tg.Connect(t)
		a := newSem(t, ca, path, 1)
		b := newSem(t, cb, path, 1, semaphore.WithSuspendedIsLost(false))
		w := newSem(t, tg.Connect(t), path, 1)

		la := mustAcquire(t, ctx, a)
		sub := w.Subscribe()
		defer sub.Close()
		res := acquireAsync(ctx, w)
		waitQueued(t, sub)
		tg.Disconnect(t, ca)
		<-la.Lost()
		if !errors.Is(la.Err(), semaphore.ErrSuspended) {
			t.Errorf("Err after a disconnect = %v, want ErrSuspended", la.Err())
		}
		tg.Reconnect(t, ca)
		r := <-res
		if r.err != nil {
			t.Fatalf("the waiter once the suspended holder is back: %v", r.err)
		}
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}

		lb := mustAcquire(t, ctx, b)
		tg.Disconnect(t, cb)
		tg.Reconnect(t, cb)
		if err := lb.Err(); err != nil {
			t.Fatalf("WithSuspendedIsLost(false): the lease ended on a disconnect: %v", err)
		}
		if ok, _, err := w.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire beside a surviving lease = %t, %v", ok, err)
		}
		if err := lb.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter whose connection is lost while it waits keeps its place: the
// holder releases meanwhile, and once the waiter is back it holds.
func TestConnectionLossWhileWaiting(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/wait-suspend"
		cw := tg.Connect(t)
		h := newSem(t, tg.Connect(t), path, 2)
		w := newSem(t, cw, path, 2)
		l1, l2 := mustAcquire(t, ctx, h), mustAcquire(t, ctx, h)
		sub := w.Subscribe()
		defer sub.Close()
		res := acquireAsync(ctx, w)
		waitQueued(t, sub)
		tg.Disconnect(t, cw)
		if err := l1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		tg.Reconnect(t, cw)
		r := <-res
		if r.err != nil {
			t.Fatalf("the waiter after its reconnect: %v", r.err)
		}
		if l2.Err() != nil {
			t.Fatalf("the other lease ended: %v", l2.Err())
		}
		eventually(t, cw, path, "two leases", func(kids []string) bool { return len(kids) == 2 })
	})
}

// A create whose reply was lost is found again by its uuid: the acquire
// holds with one node, not two.
func TestCreateReplyLost(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/lost-create"
		c := tg.Connect(t)
		s := newSem(t, c, path, 2)
		mustAcquire(t, ctx, newSem(t, tg.Connect(t), path, 2)) // the directory exists
		f := tg.LoseNextReply(t, c, testkit.OpCreate, semaphore.LeasesDir(path)+"/_c_")
		l := mustAcquire(t, ctx, s)
		select {
		case <-f.Fired():
		case <-time.After(10 * time.Second):
			t.Fatal("the fault never fired: the test tested nothing")
		}
		if kids := leases(t, c, path); len(kids) != 2 {
			t.Fatalf("after a lost create reply: %v, want the other's node and ours", kids)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, c, path, "our node gone", func(kids []string) bool { return len(kids) == 1 })
	})
}

// An Acquire whose ctx ends while it waits returns ctx.Err() and leaves no
// node; the lease it waited for goes to the next waiter.
func TestCancelWhileWaiting(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/cancel"
		c := tg.Connect(t)
		h := newSem(t, c, path, 1)
		w := newSem(t, tg.Connect(t), path, 1)
		l := mustAcquire(t, ctx, h)
		sub := w.Subscribe()
		defer sub.Close()
		wctx, cancel := context.WithCancel(ctx)
		res := acquireAsync(wctx, w)
		waitQueued(t, sub)
		cancel()
		if r := <-res; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Acquire after cancel = %v", r.err)
		}
		eventually(t, c, path, "only the holder's node", func(kids []string) bool {
			return len(kids) == 1 && kids[0] == zk.Base(l.Node())
		})
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, ctx, w) // the cancelled handle works on
	})
}

// Close releases the leases, fails the waiting calls with ErrClosed and
// deletes every node; after it every call is ErrClosed, and the lease
// goes to another handle.
func TestCloseCleansUp(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/close"
		c := tg.Connect(t)
		s := newSem(t, c, path, 2)
		other := newSem(t, tg.Connect(t), path, 2)
		ls, err := s.AcquireN(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		sub := s.Subscribe()
		res := acquireAsync(ctx, s)
		waitQueued(t, sub)
		ores := acquireAsync(ctx, other)
		eventually(t, c, path, "four nodes", func(kids []string) bool { return len(kids) == 4 })
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, open := <-sub.C; open {
			for range sub.C {
			}
		}
		if r := <-res; !errors.Is(r.err, semaphore.ErrClosed) {
			t.Errorf("the waiting Acquire after Close = %v, want ErrClosed", r.err)
		}
		for _, l := range ls {
			if !errors.Is(l.Err(), semaphore.ErrClosed) {
				t.Errorf("a lease after Close: Err = %v", l.Err())
			}
		}
		if r := <-ores; r.err != nil {
			t.Fatalf("the other handle after Close: %v", r.err)
		}
		eventually(t, c, path, "only the other's node", func(kids []string) bool { return len(kids) == 1 })

		if _, err := s.Acquire(ctx); !errors.Is(err, semaphore.ErrClosed) {
			t.Errorf("Acquire = %v", err)
		}
		if _, _, err := s.TryAcquire(ctx); !errors.Is(err, semaphore.ErrClosed) {
			t.Errorf("TryAcquire = %v", err)
		}
		if _, err := s.AcquireN(ctx, 1); !errors.Is(err, semaphore.ErrClosed) {
			t.Errorf("AcquireN = %v", err)
		}
		if err := ls[0].Release(ctx); !errors.Is(err, semaphore.ErrClosed) {
			t.Errorf("Release = %v", err)
		}
		if _, open := <-s.Subscribe().C; open {
			t.Error("a subscription made after Close delivers events")
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
	})
}

// Close while the connection is down returns ErrCleanupPending within the
// close timeout; the connection deletes the nodes once it is back.
func TestCloseDuringDisconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path, timeout = "/sem/close-down", 200 * time.Millisecond
		ca, cb := tg.Connect(t), tg.Connect(t)
		s := newSem(t, ca, path, 1, semaphore.WithCloseTimeout(timeout))
		other := newSem(t, cb, path, 1)
		mustAcquire(t, ctx, s)
		tg.Disconnect(t, ca)
		start := time.Now()
		err := s.Close()
		if took := time.Since(start); took > timeout+time.Second {
			t.Errorf("Close took %v with a %v close timeout", took, timeout)
		}
		if !errors.Is(err, semaphore.ErrCleanupPending) {
			t.Fatalf("Close during a disconnect = %v, want ErrCleanupPending", err)
		}
		if err2 := s.Close(); err2 != err {
			t.Errorf("second Close = %v, want the first one's", err2)
		}
		tg.Reconnect(t, ca)
		eventually(t, cb, path, "the closed handle's node deleted after the reconnect", func(kids []string) bool { return len(kids) == 0 })
		mustAcquire(t, ctx, other)
	})
}

// A lease AcquireN took is lost (SUSPENDED) while it waits for the next:
// AcquireN takes one again, and returns n leases that are all held.
func TestAcquireNRetakesALostLease(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/sem/n-lost"
		c := tg.Connect(t)
		other := newSem(t, tg.Connect(t), path, 2)
		s := newSem(t, c, path, 2)
		lo := mustAcquire(t, ctx, other)
		sub := s.Subscribe()
		defer sub.Close()
		type result struct {
			ls  []*semaphore.Lease
			err error
		}
		res := make(chan result, 1)
		go func() {
			ls, err := s.AcquireN(ctx, 2)
			res <- result{ls, err}
		}()
		waitQueued(t, sub) // the first held, the second waits behind it and the other's
		tg.Disconnect(t, c)
		// The first lease's actor has taken the loss in (a lease can be
		// lost at any moment; what AcquireN promises is that one lost
		// before it returns is taken again).
		testkit.WaitEvent(t, sub, events.Failed)
		tg.Reconnect(t, c)
		if err := lo.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-res
		if r.err != nil || len(r.ls) != 2 {
			t.Fatalf("AcquireN(2) = %d leases, %v", len(r.ls), r.err)
		}
		for _, l := range r.ls {
			if l.Err() != nil {
				t.Errorf("AcquireN returned a lost lease: %s: %v", l.Node(), l.Err())
			}
		}
		eventually(t, c, path, "only AcquireN's two nodes", func(kids []string) bool { return len(kids) == 2 })
	})
}
