package rwlock_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func awaitRevoke(t *testing.T, g *rwlock.Grant) {
	t.Helper()
	select {
	case <-g.RevokeRequested():
	case <-time.After(15 * time.Second):
		t.Fatalf("no revocation request reached the holder of %s", g.Node())
	}
}

// A revocable writer and a revocable reader are each told when asked to
// give up, and hold on until they release; a participant that is not
// revocable is never told.
func TestRevocable(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/rw/revoke"
		c, other := tg.Connect(t), tg.Connect(t)
		rw := newRW(t, c, path, rwlock.WithRevocable())
		sub := rw.WriteLock().Subscribe()
		defer sub.Close()
		gw := acq(t, ctx, rw.WriteLock())
		readers := acquireAsync(ctx, newRW(t, other, path).ReadLock())
		eventually(t, other, path, "the reader queued", count(2))
		if err := lock.RequestRevoke(ctx, other, gw.Node()); err != nil {
			t.Fatal(err)
		}
		awaitRevoke(t, gw)
		if ev := testkit.WaitEvent(t, sub, events.RevokeRequested); ev.Node != gw.Node() {
			t.Fatalf("event %v", ev)
		}
		select {
		case r := <-readers:
			t.Fatalf("a reader holds beside the asked writer: %+v", r)
		default:
		}
		rel(t, ctx, rw.WriteLock())
		r := <-readers
		plain := must(t, r.g, r.err)
		gr := acq(t, ctx, rw.ReadLock())
		if err := lock.RequestRevoke(ctx, other, gr.Node()); err != nil {
			t.Fatal(err)
		}
		awaitRevoke(t, gr)
		if err := lock.RequestRevoke(ctx, c, plain.Node()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-plain.RevokeRequested():
			t.Fatal("a reader that is not revocable was told")
		default:
		}
		rel(t, ctx, rw.ReadLock())
	})
}
