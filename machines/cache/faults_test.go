package cache_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/cache"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// faultTree makes /f/a0../f/a4, each with children b0 and b1 (16 nodes
// with /f), and a tree cache of /f on its own session, counted; it
// returns the cache, its recorder and its counted conn, once initialized.
func faultTree(t *testing.T, tg testkit.Target) (*cache.TreeCache, *recorder, *counting, func() map[string]string) {
	ctx := ctxT(t)
	w := tg.Connect(t)
	for i := range 5 {
		for j := range 2 {
			mk(ctx, t, w, fmt.Sprintf("/f/a%d/b%d", i, j), "x")
		}
	}
	cnt := &counting{Conn: tg.Connect(t)}
	tc := must[*cache.TreeCache](t)(cache.NewTree(cnt, "/f"))
	closeOnCleanup(t, tc)
	rec := record(t, tc)
	if err := tc.Initialized(ctx); err != nil {
		t.Fatal(err)
	}
	return tc, rec, cnt, func() map[string]string { return fresh(ctx, t, w, "/f", 10) }
}

// The changes made while the cache's connection was down, its session
// alive.
func changeWhileAway(t *testing.T, tg testkit.Target) {
	ctx := ctxT(t)
	w := tg.Connect(t)
	set(ctx, t, w, "/f/a0", "y")
	del(ctx, t, w, "/f/a1/b0")
	mk(ctx, t, w, "/f/a2/b9", "new")
}

var awayChanges = []string{"NODE_ADDED /f/a2/b9 new v0", "NODE_REMOVED /f/a1/b0 x v0", "NODE_UPDATED /f/a0 y v1"}

// sortedChanges are the node events after INITIALIZED, sorted.
func sortedChanges(evs []events.Event) []string {
	i := slices.IndexFunc(evs, func(e events.Event) bool { return e.Type == events.Initialized })
	c := changes(evs[i+1:])
	slices.Sort(c)
	return c
}

// After a connection loss the watches survived: the cache catches up from
// the watches the server fires, reading only what changed (a get of a0,
// listings of a1 and a2, a get and a listing of the new b9: 5 requests,
// where a reload makes 16 gets and 16 listings), and publishes exactly
// the changes.
func TestCatchUpAfterDisconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		tc, rec, cnt, want := faultTree(t, tg)
		before := cnt.reads()
		tg.Disconnect(t, cnt.Conn)
		changeWhileAway(t, tg)
		tg.Reconnect(t, cnt.Conn)
		settle(t, "the tree cache", want, func() map[string]string { return treeOf(tc) })
		rec.waitFor("the three changes", func(evs []events.Event) bool { return len(sortedChanges(evs)) >= 3 })
		if got := sortedChanges(rec.events()); !slices.Equal(got, awayChanges) {
			t.Errorf("changes %q, want %q", got, awayChanges)
		}
		if n := cnt.reads() - before; n > 5 {
			t.Errorf("%d reads to catch up with 3 changes (gets %d, lists %d)", n, cnt.gets.Load(), cnt.lists.Load())
		}
		rec.waitEvent(events.Reconnected, "")
	})
}

// After the session's end the cache reads everything again and publishes
// only the differences: no remove and add of a node that did not change.
func TestReloadAfterExpiry(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		tc, rec, cnt, want := faultTree(t, tg)
		before := cnt.reads()
		tg.Disconnect(t, cnt.Conn)
		changeWhileAway(t, tg)
		tg.Expire(t, cnt.Conn)
		settle(t, "the tree cache", want, func() map[string]string { return treeOf(tc) })
		rec.waitFor("the three changes", func(evs []events.Event) bool { return len(sortedChanges(evs)) >= 3 })
		if got := sortedChanges(rec.events()); !slices.Equal(got, awayChanges) {
			t.Errorf("changes %q, want %q", got, awayChanges)
		}
		if n := cnt.reads() - before; n < 16 {
			t.Errorf("%d reads after the expiry: not every node was read again", n)
		}
		rec.waitEvent(events.Lost, "")
		if tc.State() != events.StateReady {
			t.Errorf("state %s after a reload, want READY", tc.State())
		}
	})
}

// A read whose reply is lost (applied, with its watch, but the answer
// never comes) is made again once the connection is back, during the
// first load and after it; the cache ends equal to the server.
func TestLostReplies(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		w := tg.Connect(t)
		for i := range 3 {
			mk(ctx, t, w, fmt.Sprintf("/l/a%d/b", i), "x")
		}
		for _, op := range []testkit.OpKind{testkit.OpGet, testkit.OpChildren} {
			t.Run(fmt.Sprint(op), func(t *testing.T) {
				c := tg.Connect(t)
				f := tg.LoseNextReply(t, c, op, "/l/a1")
				tc := must[*cache.TreeCache](t)(cache.NewTree(c, "/l"))
				closeOnCleanup(t, tc)
				rec := record(t, tc)
				if err := tc.Initialized(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case <-f.Fired():
				default:
					t.Fatal("no reply was lost")
				}
				want := func() map[string]string { return fresh(ctx, t, w, "/l", 10) }
				settle(t, "after the load", want, func() map[string]string { return treeOf(tc) })
				// and after it: the lost reply is a re-read's
				f = tg.LoseNextReply(t, c, op, "/l/a1")
				if op == testkit.OpGet {
					set(ctx, t, w, "/l/a1", "y")
				} else {
					mk(ctx, t, w, "/l/a1/c", "z")
				}
				select {
				case <-f.Fired():
				case <-ctx.Done():
					t.Fatal("no reply was lost after the change")
				}
				settle(t, "after a change", want, func() map[string]string { return treeOf(tc) })
				rec.waitFor("the change", func(evs []events.Event) bool { return len(sortedChanges(evs)) > 0 })
			})
		}
	})
}
