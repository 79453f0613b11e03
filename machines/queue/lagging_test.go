package queue_test

import (
	"errors"
	"testing"

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
		w := c.LoseNext(lagging.OpCreate, path+"/qn-")
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
