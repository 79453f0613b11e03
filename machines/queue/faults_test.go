package queue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A take whose delete was applied but whose reply was lost still returns
// the item, once: the consumer looks again after reconnecting.
func TestTakeDeleteReplyLost(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/delete"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a", "b")
		sub := q.Subscribe()
		defer sub.Close()
		f := tg.LoseNextReply(t, c, testkit.OpDelete, path+"/qn-")
		if got := take(t, ctx, q); got != "a" {
			t.Fatalf("Take = %q, want a", got)
		}
		<-f.Fired()
		ev := testkit.WaitEvent(t, sub, events.Taken)
		if !errors.Is(ev.Err, queue.ErrUncertain) {
			t.Fatalf("TAKEN after a lost delete reply: err %v, want ErrUncertain", ev.Err)
		}
		if got := take(t, ctx, q); got != "b" {
			t.Fatalf("next Take = %q, want b", got)
		}
		nothingLeft(t, c, path)
	})
}

// A claim whose create was applied but whose reply was lost is found
// ours (same session) and delivered; nothing is left behind after its ack.
func TestClaimReplyLost(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/claim"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a")
		f := tg.LoseNextReply(t, c, testkit.OpMulti, path+"/qn-") // the claim's multi
		it, err := q.TakeItem(ctx)
		if err != nil || string(it.Data()) != "a" {
			t.Fatalf("TakeItem = %v, %v", it, err)
		}
		<-f.Fired()
		other := newQueue(t, tg.Connect(t), path)
		if _, err := other.Poll(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("another consumer's Poll of the claimed item = %v, want ErrEmpty", err)
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, c, path)
	})
}

// An ack whose multi was applied but whose reply was lost returns nil
// (our claim, on our live session, kept everyone else off the item).
func TestAckReplyLost(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/ack"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a")
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f := tg.LoseNextReply(t, c, testkit.OpMulti, path)
		if err := it.Ack(ctx); err != nil {
			t.Fatalf("Ack with its reply lost = %v", err)
		}
		<-f.Fired()
		nothingLeft(t, c, path)
	})
}

// A consumer whose session ends while it holds an item loses the claim:
// the item goes to another consumer, and the first one's Ack says
// ErrClaimLost.
func TestSessionExpiryGivesTheItemBack(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/expiry"
		q := newQueue(t, c, path)
		other := newQueue(t, tg.Connect(t), path)
		offer(t, ctx, q, "job")
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The other consumer sees the item claimed (its delete is refused:
		// the item has a child) and watches the claim.
		if _, err := other.Poll(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("Poll of a claimed item = %v, want ErrEmpty", err)
		}
		got := make(chan *queue.Item, 1)
		go func() {
			it, err := other.TakeItem(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- it
		}()
		sub := other.Subscribe()
		defer sub.Close()
		tg.Expire(t, c)
		again := <-got
		if again == nil || string(again.Data()) != "job" {
			t.Fatalf("the other consumer got %v", again)
		}
		testkit.WaitEvent(t, sub, events.Redelivered)
		if err := it.Ack(ctx); !errors.Is(err, queue.ErrClaimLost) {
			t.Fatalf("Ack after the session expired = %v, want ErrClaimLost", err)
		}
		if err := again.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, c, path)
	})
}

// A consumer that dies mid-item (its connection closed) gives it back.
func TestCrashMidItem(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/crash"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "job")
		if _, err := q.TakeItem(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
		other := newQueue(t, tg.Connect(t), path)
		it, err := other.TakeItem(ctx)
		if err != nil || string(it.Data()) != "job" {
			t.Fatalf("after the crash: %v, %v", it, err)
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != nil {
			t.Fatalf("Close after the connection closed = %v", err)
		}
	})
}

// Close gives back the claims of items still out: they come again.
func TestCloseGivesClaimsBack(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/close"
		q, err := queue.New(c, path)
		if err != nil {
			t.Fatal(err)
		}
		offer(t, ctx, q, "job")
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if err := it.Ack(ctx); !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("Ack after Close = %v, want ErrClosed", err)
		}
		if _, err := q.Take(ctx); !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("Take after Close = %v, want ErrClosed", err)
		}
		other := newQueue(t, c, path)
		again, err := other.Poll(ctx)
		if err != nil || string(again) != "job" {
			t.Fatalf("after Close: %q, %v", again, err)
		}
	})
}

// A take whose caller gives up while its delete is in flight puts the
// item back, under its own name: nothing is lost.
func TestCancelDuringRemovePutsTheItemBack(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/cancel"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "job")
		before := children(t, c, path)
		f := tg.HoldNextReply(t, c, testkit.OpDelete, path+"/qn-")
		tctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := q.Take(tctx)
			done <- err
		}()
		<-f.Fired()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Take = %v, want Canceled", err)
		}
		f.Release()
		other := newQueue(t, tg.Connect(t), path)
		got, err := other.Take(ctx)
		if err != nil || string(got) != "job" {
			t.Fatalf("after the cancelled take: %q, %v", got, err)
		}
		if len(before) != 1 {
			t.Fatalf("before: %v", before)
		}
	})
}

// A Take waiting through a connection loss and an expiry still gets the
// next item.
func TestTakeWaitsThroughFaults(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/wait"
		q := newQueue(t, c, path)
		producer := newQueue(t, tg.Connect(t), path)
		got := make(chan string, 1)
		go func() {
			d, err := q.Take(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- string(d)
		}()
		waitState(t, q, events.StateReady)
		tg.Disconnect(t, c)
		tg.Reconnect(t, c)
		tg.Expire(t, c)
		offer(t, ctx, producer, "after")
		if g := <-got; g != "after" {
			t.Fatalf("Take = %q", g)
		}
	})
}

// An ack whose multi the server applied, but whose reply never came
// because the session ended meanwhile, removed the item for good: Ack must
// not say ErrClaimLost ("the item will be delivered again"), which it did
// once. It cannot tell our ack from another consumer's after a
// redelivery, so it says ErrUncertain. (Found by the chaos suite: an item
// whose Ack returned ErrClaimLost was never delivered again.)
func TestAckAppliedThenSessionLost(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/ackexpire"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a")
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f := tg.HoldNextReply(t, c, testkit.OpMulti, path+"/")
		acked := make(chan error, 1)
		go func() { acked <- it.Ack(ctx) }()
		select {
		case <-f.Fired():
		case <-ctx.Done():
			t.Fatal("the ack's multi was never applied")
		}
		tg.Expire(t, c)
		f.Release()
		err = <-acked
		if errors.Is(err, queue.ErrClaimLost) || !errors.Is(err, queue.ErrUncertain) {
			t.Fatalf("Ack applied, then the session ended: %v, want ErrUncertain", err)
		}
		nothingLeft(t, c, path)
	})
}

// The multi that acks Consume's item and claims the next one is applied,
// but its reply is lost: both are found done on the same session, the
// next item is handed to the handler, and nothing is delivered twice or
// left behind.
func TestConsumeJointReplyLost(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/joint"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a", "b", "c")
		f := tg.LoseNextReply(t, c, testkit.OpMulti, path)
		cctx, stop := context.WithCancel(ctx)
		var got []string
		err := q.Consume(cctx, func(_ context.Context, data []byte) error {
			if got = append(got, string(data)); len(got) == 3 {
				stop()
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Consume = %v", err)
		}
		<-f.Fired()
		if !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("handled %v, want a, b, c once each", got)
		}
		nothingLeft(t, c, path)
	})
}

// The joint multi is applied, and the session ends before its reply
// comes: the ack is uncertain, the next item's claim went with the
// session, and the next item is handled after all (claimed again on the
// new session); nothing is lost or left behind.
func TestConsumeJointAppliedThenSessionLost(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/faults/jointexpire"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a", "b")
		f := tg.HoldNextReply(t, c, testkit.OpMulti, path+"/")
		go func() {
			select {
			case <-f.Fired():
				tg.Expire(t, c)
				f.Release()
			case <-ctx.Done():
			}
		}()
		cctx, stop := context.WithCancel(ctx)
		seen := map[string]int{}
		err := q.Consume(cctx, func(_ context.Context, data []byte) error {
			if seen[string(data)]++; seen["a"] > 0 && seen["b"] > 0 {
				stop()
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Consume = %v", err)
		}
		if seen["a"] != 1 || seen["b"] != 1 {
			t.Fatalf("handled %v, want a and b once each", seen)
		}
		drained(t, ctx, c, path)
	})
}

// A consumer that finds an item claimed by another watches that claim,
// and the claim may be gone (item acked) by the time the watch is set: it
// must leave no watch behind. (An exists on the claim once waited for its
// creation, which never comes once the item is gone, until the session
// ended: a watch, and a client goroutine, per such race.)
func TestNoWatchLeftOnAClaimGoneFirst(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		ca, cb := tg.Connect(t), tg.Connect(t)
		const path = "/queue/faults/claimgone"
		a, b := newQueue(t, ca, path), newQueue(t, cb, path)
		offer(t, ctx, a, "x")
		itA, err := a.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// b's claim of x fails (a holds it); its reply waits until a has
		// acked x, so b watches a claim that is gone.
		f := tg.HoldNextReply(t, cb, testkit.OpMulti, path+"/") // b's claim
		got := make(chan string, 1)
		go func() {
			it, err := b.TakeItem(ctx)
			if err != nil {
				t.Error(err)
				got <- ""
				return
			}
			got <- string(it.Data())
		}()
		select {
		case <-f.Fired():
		case <-ctx.Done():
			t.Fatal("b never tried to claim x")
		}
		if err := itA.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		f.Release()
		offer(t, ctx, a, "y")
		if g := <-got; g != "y" {
			t.Fatalf("b took %q, want y", g)
		}
		for _, p := range testkit.WatchedPaths(t, tg, cb) {
			if strings.HasSuffix(p, "/"+queue.ClaimName) {
				t.Errorf("b still watches %s", p)
			}
		}
	})
}
