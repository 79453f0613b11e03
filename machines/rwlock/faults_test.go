package rwlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// The downgrade's create is a multi (check the writer, create the reader).
// Its reply lost to a connection loss: the reader is found by its uuid and
// adopted, not made twice; the downgrade holds.
func TestDowngradeReplyLost(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/rw/downgrade-lost"
		c := tg.Connect(t)
		a := newRW(t, c, path, rwlock.WithSuspendedIsLost(false))
		gw := acq(t, ctx, a.WriteLock())
		f := tg.LoseNextReply(t, c, testkit.OpMulti, path+"/_c_")
		gr := acq(t, ctx, a.ReadLock())
		select {
		case <-f.Fired():
		default:
			t.Fatal("the downgrade's multi was not the request whose reply was lost")
		}
		if !strings.HasSuffix(gr.Node(), gw.Node()[len(gw.Node())-10:]) || gw.Err() != nil {
			t.Fatalf("reader %s beside writer %s (%v)", gr.Node(), gw.Node(), gw.Err())
		}
		eventually(t, c, path, "the writer and one reader", count(2))
		rel(t, ctx, a.WriteLock())
		rel(t, ctx, a.ReadLock())
		eventually(t, c, path, "no node", count(0))
	})
}

// A writer waiting behind readers gives up when its ctx ends: its node
// goes, and a reader behind it is not held up by it.
func TestWriterCancelledWhileWaiting(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/rw/cancel"
		c := tg.Connect(t)
		r, w, r2 := newRW(t, c, path), newRW(t, tg.Connect(t), path), newRW(t, tg.Connect(t), path)
		acq(t, ctx, r.ReadLock())
		sub := w.WriteLock().Subscribe()
		defer sub.Close()
		wctx, cancel := context.WithCancel(ctx)
		wch := acquireAsync(wctx, w.WriteLock())
		testkit.WaitEvent(t, sub, events.ReadyStart)
		rch := acquireAsync(ctx, r2.ReadLock()) // queued behind the writer
		eventually(t, c, path, "the second reader queued", count(3))
		cancel()
		if res := <-wch; !errors.Is(res.err, context.Canceled) {
			t.Fatalf("the cancelled writer: %+v", res)
		}
		res := <-rch
		must(t, res.g, res.err)
		eventually(t, c, path, "the writer's node gone", count(2))
	})
}

// A reader's session expires while it holds: its grant is lost with
// ErrSessionLost (ErrSuspended first under the default policy), its node
// goes with the session, and a writer waiting behind it holds.
func TestExpiryWhileReading(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/rw/expiry"
		c := tg.Connect(t)
		r := newRW(t, c, path, rwlock.WithSuspendedIsLost(false))
		w := newRW(t, tg.Connect(t), path)
		g := acq(t, ctx, r.ReadLock())
		sub := w.WriteLock().Subscribe()
		defer sub.Close()
		wch := acquireAsync(ctx, w.WriteLock())
		testkit.WaitEvent(t, sub, events.ReadyStart)
		tg.Expire(t, c)
		<-g.Lost()
		if !errors.Is(g.Err(), rwlock.ErrSessionLost) {
			t.Fatalf("the reader's grant: %v, want ErrSessionLost", g.Err())
		}
		res := <-wch
		must(t, res.g, res.err)
		// The participant works again on the new session.
		rel(t, ctx, w.WriteLock())
		acq(t, ctx, r.ReadLock())
	})
}
