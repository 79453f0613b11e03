package queue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// claimOf reads who claims item (the claim's data: the handle's id); ""
// when it is not claimed.
func claimOf(t *testing.T, ctx context.Context, c zk.Conn, path, item string) string {
	t.Helper()
	data, _, err := c.Get(ctx, zk.Join(zk.Join(path, item), queue.ClaimName))
	if errors.Is(err, zk.ErrNoNode) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// takeAck takes an item with TakeItem, checks that it is want, and acks it.
func takeAck(t *testing.T, ctx context.Context, q *queue.Queue, want string) {
	t.Helper()
	it, err := q.TakeItem(ctx)
	if err != nil || string(it.Data()) != want {
		t.Fatalf("TakeItem = %v, %v; want %s", it, err, want)
	}
	if err := it.Ack(ctx); err != nil {
		t.Fatalf("Ack of %s = %v", want, err)
	}
}

// has: one of evs is of type typ.
func has(evs []events.Event, typ events.Type) bool {
	return slices.ContainsFunc(evs, func(e events.Event) bool { return e.Type == typ })
}

// An Ack claims the next item in its own multi, for the handle's next
// TakeItem: when Ack returns the next item is claimed, other consumers
// pass it by, and the next TakeItem gets it. With nothing next, Ack claims
// nothing, and nothing is left.
func TestAckClaimsAhead(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/ahead/taken"
		q := newQueue(t, c, path, queue.WithID("q"))
		offer(t, ctx, q, "a", "b", "c")
		rec := testkit.Record(t, q)
		takeAck(t, ctx, q, "a")
		kids := children(t, c, path)
		if len(kids) != 2 || claimOf(t, ctx, c, path, kids[0]) != "q" {
			t.Fatalf("after the Ack: items %v, the first claimed by %q; want b claimed by q", kids, claimOf(t, ctx, c, path, kids[0]))
		}
		other := newQueue(t, tg.Connect(t), path)
		if got, err := other.Poll(ctx); err != nil || string(got) != "c" {
			t.Fatalf("another consumer's Poll = %q, %v; want c (b is claimed)", got, err)
		}
		takeAck(t, ctx, q, "b")
		nothingLeft(t, c, path)
		rec.WaitFor(t, events.Acked)
		rec.WaitFor(t, events.Acked)
		if has(rec.Events(), events.Nacked) || has(rec.Events(), events.Redelivered) {
			t.Fatalf("events %v: nothing was nacked or delivered again", rec.Events())
		}
	})
}

// The item claimed ahead is given back when no TakeItem comes within the
// handle's ClaimAhead, with no NACKED event, and another consumer gets it;
// Close gives it back at once; with WithClaimAhead(0) Ack claims nothing.
func TestClaimAheadGivenBack(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/ahead/back"
		q := newQueue(t, c, path, queue.WithClaimAhead(20*time.Millisecond))
		rec := testkit.Record(t, q)
		offer(t, ctx, q, "a", "b")
		takeAck(t, ctx, q, "a")
		takeAck(t, ctx, newQueue(t, tg.Connect(t), path), "b") // waits for the give-back
		if has(rec.Events(), events.Nacked) {
			t.Fatalf("events %v: a claim ahead given back is not a nack", rec.Events())
		}

		// Close gives the claim ahead back.
		offer(t, ctx, q, "c", "d")
		takeAck(t, ctx, q, "c")
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		kids := children(t, c, path)
		if len(kids) != 1 || claimOf(t, ctx, c, path, kids[0]) != "" {
			t.Fatalf("after Close: %v, want d unclaimed", kids)
		}

		// Off: nothing is claimed ahead.
		off := newQueue(t, c, path, queue.WithClaimAhead(0))
		offer(t, ctx, off, "e")
		takeAck(t, ctx, off, "d")
		if kids := children(t, c, path); len(kids) != 1 || claimOf(t, ctx, c, path, kids[0]) != "" {
			t.Fatalf("with WithClaimAhead(0), after the Ack: %v, want e unclaimed", kids)
		}
	})
}

// The item claimed ahead goes with the session, like any claim: another
// consumer gets it, and the handle goes on with the next one.
func TestClaimAheadLostWithTheSession(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/ahead/expiry"
		q := newQueue(t, c, path, queue.WithClaimAhead(time.Hour))
		rec := testkit.Record(t, q)
		offer(t, ctx, q, "a", "b")
		takeAck(t, ctx, q, "a")
		if kids := children(t, c, path); len(kids) != 1 || claimOf(t, ctx, c, path, kids[0]) == "" {
			t.Fatalf("after the Ack: %v, want b claimed", kids)
		}
		other := newQueue(t, tg.Connect(t), path, queue.WithClaimAhead(0))
		got := make(chan *queue.Item, 1)
		go func() {
			it, _ := other.TakeItem(ctx) // waits for the claim to go with the session
			got <- it
		}()
		tg.Expire(t, c)
		if it := <-got; it == nil || string(it.Data()) != "b" {
			t.Fatalf("the other consumer got %v, want b", it)
		} else if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		rec.WaitFor(t, events.Lost) // the handle knows its session ended
		offer(t, ctx, q, "c")
		takeAck(t, ctx, q, "c")
		nothingLeft(t, c, path)
	})
}

// The handle's own Peek and Poll see the item it claimed ahead: its claim
// is given back at once, and they find it like any other item.
func TestPlainCallsSeeTheItemClaimedAhead(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/ahead/plain"
		q := newQueue(t, c, path, queue.WithClaimAhead(time.Hour))
		offer(t, ctx, q, "a", "b")
		takeAck(t, ctx, q, "a")
		if got, err := q.Peek(ctx); err != nil || string(got) != "b" {
			t.Fatalf("Peek after the Ack = %q, %v; want b", got, err)
		}
		if got, err := q.Poll(ctx); err != nil || string(got) != "b" {
			t.Fatalf("Poll = %q, %v; want b", got, err)
		}
		offer(t, ctx, q, "c", "d")
		takeAck(t, ctx, q, "c")
		if got, err := q.Poll(ctx); err != nil || string(got) != "d" {
			t.Fatalf("Poll after the Ack = %q, %v; want d", got, err)
		}
		nothingLeft(t, c, path)
	})
}

// A TakeItem that comes while the claim ahead is being given back (its
// wait ended first) gets that item, the head, not the one after it.
func TestTakeWaitsForTheClaimAheadGivenBack(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/ahead/giveback"
		q := newQueue(t, c, path, queue.WithClaimAhead(20*time.Millisecond))
		offer(t, ctx, q, "a", "b", "c")
		f := tg.HoldNextReply(t, c, testkit.OpDelete, path+"/qn-") // the give-back's delete of b's claim
		takeAck(t, ctx, q, "a")                                    // claims b ahead
		<-f.Fired()
		got := make(chan *queue.Item, 1)
		go func() {
			it, _ := q.TakeItem(ctx)
			got <- it
		}()
		time.Sleep(50 * time.Millisecond) // the TakeItem reaches the handle while the give-back is held
		f.Release()
		if it := <-got; it == nil || string(it.Data()) != "b" {
			t.Fatalf("TakeItem during the give-back = %v, want b", it)
		} else if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		takeAck(t, ctx, q, "c")
		nothingLeft(t, c, path)
	})
}
