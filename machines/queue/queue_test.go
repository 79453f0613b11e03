package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newQueue(t *testing.T, c zk.Conn, path string, opts ...queue.Option) *queue.Queue {
	t.Helper()
	q, err := queue.New(c, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func offer(t *testing.T, ctx context.Context, q *queue.Queue, items ...string) {
	t.Helper()
	for _, it := range items {
		if err := q.Offer(ctx, []byte(it)); err != nil {
			t.Fatal(err)
		}
	}
}

func take(t *testing.T, ctx context.Context, q *queue.Queue) string {
	t.Helper()
	data, err := q.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// children lists path's children as another client sees them, sorted.
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

// nothingLeft fails the test if any item is left under path.
func nothingLeft(t *testing.T, c zk.Conn, path string) {
	t.Helper()
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("left %v", kids)
	}
}

func TestOfferTakeInOrder(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/basic/jobs"
		q := newQueue(t, c, path)
		if _, err := q.Peek(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("Peek of a queue that does not exist yet = %v, want ErrEmpty", err)
		}
		if _, err := q.Poll(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("Poll of a queue that does not exist yet = %v, want ErrEmpty", err)
		}
		offer(t, ctx, q, "a", "b", "c")
		kids := children(t, c, path)
		if len(kids) != 3 || !strings.HasPrefix(kids[0], "qn-") || len(kids[0]) != len("qn-0000000000") {
			t.Fatalf("items %v: want three qn-<seq10> nodes", kids)
		}
		if n, err := q.Len(ctx); n != 3 || err != nil {
			t.Fatalf("Len = %d, %v; want 3", n, err)
		}
		if d, err := q.Peek(ctx); string(d) != "a" || err != nil {
			t.Fatalf("Peek = %q, %v; want a", d, err)
		}
		if got := take(t, ctx, q); got != "a" {
			t.Fatalf("Take = %q, want a", got)
		}
		if d, err := q.Poll(ctx); string(d) != "b" || err != nil {
			t.Fatalf("Poll = %q, %v; want b", d, err)
		}
		if got := take(t, ctx, q); got != "c" {
			t.Fatalf("Take = %q, want c", got)
		}
		if _, err := q.Poll(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("Poll of an empty queue = %v, want ErrEmpty", err)
		}
		if n, err := q.Len(ctx); n != 0 || err != nil {
			t.Fatalf("Len = %d, %v; want 0", n, err)
		}
	})
}

// An item Offer returned is seen at once by another session's Peek and
// Poll, with no wait for a watch.
func TestOfferVisibleAtOnceElsewhere(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/queue/visible"
		producer := newQueue(t, tg.Connect(t), path)
		consumer := newQueue(t, tg.Connect(t), path)
		if _, err := consumer.Poll(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("Poll = %v, want ErrEmpty", err)
		}
		for i := range 20 {
			want := fmt.Sprint("item-", i)
			offer(t, ctx, producer, want)
			if d, err := consumer.Peek(ctx); string(d) != want || err != nil {
				t.Fatalf("Peek right after Offer = %q, %v; want %q", d, err, want)
			}
			if d, err := consumer.Poll(ctx); string(d) != want || err != nil {
				t.Fatalf("Poll right after Offer = %q, %v; want %q", d, err, want)
			}
		}
	})
}

func TestTakeWaitsForAnItem(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/queue/wait"
		consumer := newQueue(t, tg.Connect(t), path)
		producer := newQueue(t, tg.Connect(t), path)
		got := make(chan string, 1)
		go func() {
			d, err := consumer.Take(ctx)
			if err != nil {
				got <- err.Error()
				return
			}
			got <- string(d)
		}()
		sub := consumer.Subscribe()
		defer sub.Close()
		waitState(t, consumer, events.StateReady)
		offer(t, ctx, producer, "late")
		if g := <-got; g != "late" {
			t.Fatalf("Take = %q, want late", g)
		}
		testkit.WaitEvent(t, sub, events.Taken)
	})
}

// waitState polls q's state every millisecond, for at most 15 s, until it
// is s.
func waitState(t *testing.T, q *queue.Queue, s events.State) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Second)
	for q.State() != s {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("state %s, want %s", q.State(), s)
		}
	}
}

func TestBatchAllInOrder(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/batch"
		q := newQueue(t, c, path)
		var items [][]byte
		for i := range 100 {
			items = append(items, []byte(fmt.Sprint(i)))
		}
		if err := q.OfferBatch(ctx, items); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if got := take(t, ctx, q); got != fmt.Sprint(i) {
				t.Fatalf("item %d = %q", i, got)
			}
		}
	})
}

func TestPriorityOrder(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/prio"
		q := newQueue(t, c, path)
		other := newQueue(t, tg.Connect(t), path)
		for _, p := range []struct {
			data string
			prio int
		}{{"p5-a", 5}, {"p1-a", 1}, {"p5-b", 5}, {"p3-a", 3}, {"p1-b", 1}} {
			if err := q.OfferPriority(ctx, []byte(p.data), p.prio); err != nil {
				t.Fatal(err)
			}
		}
		if got := take(t, ctx, other); got != "p1-a" {
			t.Fatalf("first = %q, want p1-a", got)
		}
		// A higher priority offered after the consumer cached the queue is
		// not passed over: the consumer syncs before choosing.
		if err := q.OfferPriority(ctx, []byte("p0"), 0); err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 5 {
			got = append(got, take(t, ctx, other))
		}
		want := []string{"p0", "p1-b", "p3-a", "p5-a", "p5-b"}
		if !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
		kids := children(t, c, path)
		if len(kids) != 0 {
			t.Fatalf("left %v", kids)
		}
	})
}

func TestAckNack(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		const path = "/queue/ack"
		q := newQueue(t, c, path)
		other := newQueue(t, tg.Connect(t), path)
		offer(t, ctx, q, "one", "two")
		it, err := q.TakeItem(ctx)
		if err != nil || string(it.Data()) != "one" {
			t.Fatalf("TakeItem = %v, %v", it, err)
		}
		// Claimed: another consumer gets the next one, and a plain take
		// does not remove a claimed item.
		it2, err := other.TakeItem(ctx)
		if err != nil || string(it2.Data()) != "two" {
			t.Fatalf("other's TakeItem = %v, %v", it2, err)
		}
		if _, err := other.Poll(ctx); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("Poll with every item claimed = %v, want ErrEmpty", err)
		}
		if err := it2.Nack(ctx); err != nil {
			t.Fatal(err)
		}
		if err := it2.Ack(ctx); !errors.Is(err, queue.ErrAcked) {
			t.Fatalf("Ack after Nack = %v, want ErrAcked", err)
		}
		again, err := q.TakeItem(ctx)
		if err != nil || string(again.Data()) != "two" {
			t.Fatalf("the nacked item again = %v, %v", again, err)
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if err := it.Ack(ctx); !errors.Is(err, queue.ErrAcked) {
			t.Fatalf("second Ack = %v, want ErrAcked", err)
		}
		if err := again.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, c, path)
	})
}

func TestBadInput(t *testing.T) {
	sim := testkit.NewSim()
	c := sim.Connect()
	defer c.Close()
	ctx := context.Background()
	for _, p := range []string{"", "rel", "/a/", "/"} {
		if _, err := queue.New(c, p); !errors.Is(err, zk.ErrInvalidPath) {
			t.Errorf("New(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	if _, err := queue.New(nil, "/q"); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("New(nil conn) = %v", err)
	}
	if _, err := queue.New(c, "/q", queue.WithMaxItemSize(0)); !errors.Is(err, queue.ErrInvalidOption) {
		t.Errorf("WithMaxItemSize(0) = %v", err)
	}
	q, err := queue.New(c, "/q", queue.WithMaxItemSize(10))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Offer(ctx, nil); !errors.Is(err, queue.ErrNilItem) {
		t.Errorf("Offer(nil) = %v", err)
	}
	if err := q.Offer(ctx, make([]byte, 11)); !errors.Is(err, queue.ErrTooLarge) {
		t.Errorf("Offer(11 bytes) = %v", err)
	}
	if err := q.OfferBatch(ctx, [][]byte{{1}, nil}); !errors.Is(err, queue.ErrNilItem) {
		t.Errorf("OfferBatch with a nil = %v", err)
	}
	big := make([][]byte, 200)
	for i := range big {
		big[i] = make([]byte, 10)
	}
	if err := q.OfferBatch(ctx, big); !errors.Is(err, queue.ErrTooLarge) {
		t.Errorf("OfferBatch over one request = %v", err)
	}
	if err := q.OfferPriority(ctx, []byte("x"), -1); !errors.Is(err, queue.ErrInvalidPriority) {
		t.Errorf("OfferPriority(-1) = %v", err)
	}
	if n, err := q.Len(ctx); n != 0 || err != nil {
		t.Errorf("after refused offers Len = %d, %v; want nothing sent", n, err)
	}
	if err := q.Offer(ctx, []byte{}); err != nil {
		t.Errorf("Offer of an empty item = %v", err)
	}
}

func TestSharedErrorsAndID(t *testing.T) {
	for _, c := range []struct{ err, root error }{
		{queue.ErrClosed, zkrecipes.ErrClosed}, {queue.ErrSessionLost, zkrecipes.ErrSessionLost},
		{queue.ErrInvalidOption, zkrecipes.ErrInvalidOption}, {queue.ErrCleanupPending, zkrecipes.ErrCleanupPending},
	} {
		if !errors.Is(c.err, c.root) {
			t.Errorf("errors.Is(%v, zkrecipes' %v) = false", c.err, c.root)
		}
	}
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c := tg.Connect(t)
		if id := newQueue(t, c, "/queue/id", queue.WithID("me")).ID(); id != "me" {
			t.Errorf("ID with WithID(me) = %q", id)
		}
		a, b := newQueue(t, c, "/queue/id").ID(), newQueue(t, c, "/queue/id").ID()
		if a == "" || a == b {
			t.Errorf("generated IDs %q and %q, want two different ones", a, b)
		}
	})
}
