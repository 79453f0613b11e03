package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/lagging"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// After a lost reply, a consumer may read from a server that has not yet
// applied its write (see package lagging): the check that looks for the
// write syncs first. Before it did, a chaos run on the ensemble lost an
// item: the ack's multi came to be applied between the check's read of
// the item (there) and of its claim (gone), and the Ack said ErrClaimLost
// for an item that was gone for good.

// An ack whose multi is applied only after the consumer starts looking
// returns nil, and the item is gone.
func TestAckReplyLostReadFromALaggingServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := lagging.Wrap(tg.Connect(t))
		const path = "/queue/lagging/ack"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a")
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := c.LoseNext(lagging.OpMulti, path)
		if err := it.Ack(ctx); err != nil {
			t.Fatalf("Ack whose multi was applied late = %v, want nil", err)
		}
		<-w.Applied()
		if w.Err() != nil {
			t.Fatalf("the late multi: %v", w.Err())
		}
		nothingLeft(t, c, path)
	})
}

// A take whose delete is applied only after the consumer starts looking
// still returns the item (ErrUncertain on its TAKEN event); it is not
// taken for another consumer's and dropped.
func TestTakeDeleteReplyLostReadFromALaggingServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := lagging.Wrap(tg.Connect(t))
		const path = "/queue/lagging/delete"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a", "b")
		sub := q.Subscribe()
		defer sub.Close()
		w := c.LoseNext(lagging.OpDelete, path+"/qn-")
		if got := take(t, ctx, q); got != "a" {
			t.Fatalf("Take = %q, want a (the item whose delete was applied late)", got)
		}
		<-w.Applied()
		ev := testkit.WaitEvent(t, sub, events.Taken)
		if !errors.Is(ev.Err, queue.ErrUncertain) {
			t.Fatalf("TAKEN after a late delete: err %v, want ErrUncertain", ev.Err)
		}
		if got := take(t, ctx, q); got != "b" {
			t.Fatalf("next Take = %q, want b", got)
		}
		nothingLeft(t, c, path)
	})
}

// A claim whose create is applied only after the consumer starts looking
// is found ours and delivered; it is not taken for another consumer's
// claim, which would hold the item until our session ended.
func TestClaimReplyLostReadFromALaggingServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := lagging.Wrap(tg.Connect(t))
		const path = "/queue/lagging/claim"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a")
		w := c.LoseNext(lagging.OpMulti, path+"/qn-") // the claim's multi
		it, err := q.TakeItem(ctx)
		if err != nil || string(it.Data()) != "a" {
			t.Fatalf("TakeItem = %v, %v", it, err)
		}
		<-w.Applied()
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, c, path)
	})
}

// lateQueue offers an item on path, and returns a queue on a connection
// whose first write of kind op under it lands late (lagging.LandLate).
func lateQueue(t *testing.T, tg testkit.Target, path string, op lagging.Op) (context.Context, *lagging.Conn, *lagging.Write, *queue.Queue) {
	ctx := ctxT(t)
	offer(t, ctx, newQueue(t, tg.Connect(t), path), "a") // not a write of the late connection's
	c := lagging.Wrap(tg.Connect(t))
	w := c.LandLate(op, path+"/qn-")
	return ctx, c, w, newQueue(t, c, path)
}

// within makes the call named what, whose write w lands late, giving it
// 5 s (it waited for good before the fix), and checks that w was made.
func within[T any](t *testing.T, ctx context.Context, w *lagging.Write, what string, call func(context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := call(ctx)
	if err != nil {
		t.Fatalf("%s whose first write landed late: %v", what, err)
	}
	select {
	case <-w.Applied():
		if w.Err() != nil {
			t.Fatalf("the late write: %v", w.Err())
		}
	default:
		t.Fatalf("%s: the late write was not made", what)
	}
	return v
}

// An ack whose first multi lands after the check that found the claim
// still ours, just before the ack is sent again: the second multi finds
// the claim gone. The item went with the first, so the Ack says nil, not
// ErrClaimLost (which promises the item again).
func TestAckLandingAfterItsCheck(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const path = "/queue/late/ack"
		ctx, c, w, q := lateQueue(t, tg, path, lagging.OpMulti)
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		within(t, ctx, w, "Ack", func(ctx context.Context) (struct{}, error) { return struct{}{}, it.Ack(ctx) })
		nothingLeft(t, c, path)
	})
}

// A claim whose first create lands after the check that found no claim,
// just before it is made again: the second create finds the first. It is
// ours, so the item is delivered, not waited on as another's claim until
// our session ends.
func TestClaimLandingAfterItsCheck(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const path = "/queue/late/claim"
		ctx, c, w, q := lateQueue(t, tg, path, lagging.OpMulti) // the claim's multi
		it := within(t, ctx, w, "TakeItem", q.TakeItem)
		if string(it.Data()) != "a" {
			t.Fatalf("TakeItem = %q, want a", it.Data())
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, c, path)
	})
}

// A take whose first delete lands after the check that found the item
// there, just before it is made again: the second delete finds nothing.
// The item may be gone with our first delete, so it is delivered (its
// TAKEN event says ErrUncertain), not dropped as another consumer's.
func TestTakeDeleteLandingAfterItsCheck(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const path = "/queue/late/take"
		ctx, c, w, q := lateQueue(t, tg, path, lagging.OpDelete)
		if data := within(t, ctx, w, "Take", q.Take); string(data) != "a" {
			t.Fatalf("Take = %q, want a", data)
		}
		nothingLeft(t, c, path)
	})
}

// A late ack: its multi is lost (not sent), and made for real only later,
// once the consumer's session has ended and another consumer has claimed
// the item, on the session that came next (as go-zookeeper sends a
// request queued before a drop). It fails on the server, on the item's
// version the other claim bumped: the Ack says ErrClaimLost, and the other
// consumer's claim and Ack stand. (Without the version, the late multi
// deleted the other's claim and the item: this Ack said ErrUncertain and
// the other's ErrClaimLost, for an item that would not come again.)
func TestLateAckFailsOnTheServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/queue/lagging/lateack"
		offer(t, ctx, newQueue(t, tg.Connect(t), path), "a")
		under := tg.Connect(t)
		lc := lagging.Wrap(under)
		c := &heldSessionConn{Conn: lc}
		a := newQueue(t, c, path)
		it, err := a.TakeItem(ctx)
		if err != nil || string(it.Data()) != "a" {
			t.Fatalf("TakeItem = %v, %v", it, err)
		}
		c.hold()
		tg.Expire(t, under) // the client is on a new session; the consumer does not know
		b := newQueue(t, tg.Connect(t), path)
		other, err := b.TakeItem(ctx)
		if err != nil || string(other.Data()) != "a" {
			t.Fatalf("the other consumer's TakeItem = %v, %v; want a, its claim gone with the session", other, err)
		}
		w := lc.LoseNext(lagging.OpMulti, path)
		acked := make(chan error, 1)
		go func() { acked <- it.Ack(ctx) }()
		<-w.Applied()
		if !errors.Is(w.Err(), zk.ErrBadVersion) {
			t.Fatalf("the late ack's multi: %v, want zk.ErrBadVersion", w.Err())
		}
		c.release()
		if err := <-acked; !errors.Is(err, queue.ErrClaimLost) {
			t.Fatalf("the late Ack = %v, want ErrClaimLost", err)
		}
		if err := other.Ack(ctx); err != nil {
			t.Fatalf("the other consumer's Ack = %v, want nil: its claim stands", err)
		}
		a.Close()
		b.Close()
		nothingLeft(t, under, path)
	})
}
