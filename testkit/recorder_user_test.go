package testkit_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Record on real handles, as a user's test uses it.

func TestRecordLockLostOnSessionExpiry(t *testing.T) {
	sim := testkit.NewSim()
	t.Cleanup(sim.Close)
	conn := sim.Connect()
	l, err := lock.New(conn, "/app/lock", lock.WithSuspendedIsLost(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	rec := testkit.Record(t, l)

	g, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := rec.WaitFor(t, events.ElectedComplete)
	sim.Expire(conn)
	<-g.Lost()
	rec.Expect(t, events.Suspended, events.Lost)
	if held.Token != g.Token() || held.Node != g.Node() {
		t.Fatalf("ELECTED_COMPLETE says token %#x node %s, the grant %#x %s", held.Token, held.Node, g.Token(), g.Node())
	}
}

func TestRecordQueueRedelivery(t *testing.T) {
	ctx := context.Background()
	sim := testkit.NewSim()
	t.Cleanup(sim.Close)
	conn1 := sim.Connect()
	c1, _ := queue.New(conn1, "/app/jobs")
	c2, _ := queue.New(sim.Connect(), "/app/jobs")
	t.Cleanup(func() { _ = c1.Close(); _ = c2.Close() })
	rec1, rec2 := testkit.Record(t, c1), testkit.Record(t, c2)

	if err := c1.Offer(ctx, []byte("job-1")); err != nil {
		t.Fatal(err)
	}
	it1, err := c1.TakeItem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claimed := rec1.WaitFor(t, events.Claimed)
	sim.Expire(conn1)
	rec1.WaitFor(t, events.Lost)
	it2, err := c2.TakeItem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again := rec2.WaitFor(t, events.Claimed)
	if claimed.Node != it1.Node() || again.Node != it2.Node() || it1.Node() != it2.Node() {
		t.Fatalf("claimed %s (%s), then %s (%s)", claimed.Node, it1.Node(), again.Node, it2.Node())
	}
}
