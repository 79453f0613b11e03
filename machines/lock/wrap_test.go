package lock_test

import (
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// ZooKeeper's sequence counter wraps from 2^31-1 to -2^31, and the node
// made right after the wrap is named "…-lock--2147483648": it comes after
// the one made before the wrap (serial order), so it waits for it. Only
// the simulator can set a directory's counter; a real server would need
// 2^31 creates first.
func TestExclusionAcrossTheSequenceWrap(t *testing.T) {
	ctx := ctxT(t)
	sim := testkit.NewSim()
	a, b := sim.Connect(), sim.Connect()
	t.Cleanup(func() { a.Close(); b.Close() }) // after the locks' Close
	ensureDir(t, a, "/locks/wrap")
	if err := sim.SetSequence("/locks/wrap", 2147483647); err != nil {
		t.Fatal(err)
	}
	first := newLock(t, a, "/locks/wrap")
	g, err := first.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := newLock(t, b, "/locks/wrap")
	sub := second.Subscribe()
	defer sub.Close()
	res := acquireAsync(ctx, second)
	testkit.WaitEvent(t, sub, events.ReadyStart) // it waits: it saw the node below
	select {
	case r := <-res:
		t.Fatalf("the node after the wrap acquired while the one before it held: %+v", r)
	default:
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.HasSuffix(g.Node(), "-lock-2147483647") || !strings.HasSuffix(r.g.Node(), "-lock--2147483648") {
		t.Fatalf("nodes %s then %s: want the last sequence before the wrap, then the first after it", g.Node(), r.g.Node())
	}
	if r.g.Token() <= g.Token() {
		t.Fatalf("token %#x after %#x", r.g.Token(), g.Token())
	}
}
