package runtime

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/internal/lagging"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5s", what)
	}
}

// notYet fails if ch is closed now.
func notYet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: done already", what)
	default:
	}
}

func janitorOf(c zk.Conn) *janitor {
	janitorsMu.Lock()
	defer janitorsMu.Unlock()
	return janitors[c]
}

func mkNodes(t *testing.T, c zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := c.Create(context.Background(), p, nil, zk.ModeEphemeral); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(t *testing.T, c zk.Conn, p string) bool {
	t.Helper()
	_, ok, err := c.Exists(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// The janitor deletes a node and the nodes named with a lost create's
// prefix once the same session is back, leaves other nodes alone, and
// then ends (TestMain's goleak check). Leftovers handed over twice share
// the connection's one janitor.
func TestJanitorDeletesOnReconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c, look := tg.Connect(t), tg.Connect(t)
		mkNodes(t, c, "/a", "/b", "/_c_u1-lock-0000000001", "/_c_u2-lock-0000000002")
		tg.Disconnect(t, c)
		done := HandOver(c, Leftovers{Session: c.SessionID(), Nodes: []string{"/a", "/gone"}, Prefixes: []string{"/_c_u1-lock-"}})
		j := janitorOf(c)
		done2 := HandOver(c, Leftovers{Session: c.SessionID(), Nodes: []string{"/b"}})
		if j == nil || janitorOf(c) != j {
			t.Fatal("a connection's leftovers went to more than one janitor")
		}
		notYet(t, done, "the janitor while the connection is down")
		notYet(t, done2, "the janitor while the connection is down")
		if !exists(t, look, "/a") {
			t.Fatal("/a deleted while the connection is down")
		}
		tg.Reconnect(t, c)
		within(t, done, "the janitor's deletes after the reconnect")
		within(t, done2, "the janitor's deletes after the reconnect")
		for _, p := range []string{"/a", "/b", "/_c_u1-lock-0000000001"} {
			if exists(t, look, p) {
				t.Fatalf("leftover %s is still there", p)
			}
		}
		if !exists(t, look, "/_c_u2-lock-0000000002") {
			t.Fatal("the janitor deleted a node that was not its to delete")
		}
	})
}

// A request that meets a connection loss is tried again at the next
// reconnect: here the listing for a lost create's prefix has its reply
// held and the connection cut, so the first try cannot know the node, and
// only the second, after the reconnect, finds and deletes it.
func TestJanitorRetriesAfterALossMidRequest(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c, look := tg.Connect(t), tg.Connect(t)
		mkNodes(t, c, "/_c_u1-lock-0000000001")
		f := tg.HoldNextReply(t, c, testkit.OpChildren, "/")
		done := HandOver(c, Leftovers{Session: c.SessionID(), Prefixes: []string{"/_c_u1-lock-"}})
		within(t, f.Fired(), "the janitor's listing reaching the server")
		tg.Disconnect(t, c)
		if !exists(t, look, "/_c_u1-lock-0000000001") {
			t.Fatal("the node went while the connection is down")
		}
		tg.Reconnect(t, c)
		within(t, done, "the janitor's second try after the reconnect")
		if exists(t, look, "/_c_u1-lock-0000000001") {
			t.Fatal("the lost create's node is still there")
		}
	})
}

// A lost create may not be applied yet on the server the janitor reads
// from (internal/lagging makes it so: the create is made only before the
// connection's next write or sync, or after a read of its directory has
// answered). The janitor syncs before it lists the directory, so it finds
// the node and deletes it; a listing alone would miss it and leave it
// behind until the session ends.
func TestJanitorFindsALostCreateAppliedLate(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := context.Background()
		c, look := lagging.Wrap(tg.Connect(t)), tg.Connect(t)
		w := c.LoseNext(lagging.OpCreate, "/_c_u3-lock-")
		if _, err := c.Create(ctx, "/_c_u3-lock-", nil, zk.ModeEphemeralSequential); !errors.Is(err, zk.ErrConnectionLoss) {
			t.Fatalf("the lost create answered %v, want a connection loss", err)
		}
		within(t, HandOver(c, Leftovers{Session: c.SessionID(), Prefixes: []string{"/_c_u3-lock-"}}), "the janitor")
		within(t, w.Applied(), "the lost create, made late")
		if err := w.Err(); err != nil {
			t.Fatalf("the lost create, made late: %v", err)
		}
		kids, _, err := look.Children(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			if strings.HasPrefix(k, "_c_u3-lock-") {
				t.Fatalf("the lost create's node %s is left behind", k)
			}
		}
	})
}

// The deletes go out together: while the reply to /a's delete is held,
// /b's delete has reached the server too (one after the other, /b's would
// wait for /a's reply), so a node and its hold mark go in one round trip.
func TestJanitorDeletesTogether(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c, look := tg.Connect(t), tg.Connect(t)
		mkNodes(t, c, "/a", "/b")
		f := tg.HoldNextReply(t, c, testkit.OpDelete, "/a")
		done := HandOver(c, Leftovers{Session: c.SessionID(), Nodes: []string{"/a", "/b"}})
		within(t, f.Fired(), "the janitor's delete of /a reaching the server")
		testkit.AwaitNoNode(t, look, "/b")
		notYet(t, done, "the janitor while a reply is held")
		f.Release()
		within(t, done, "the janitor once the reply came")
	})
}

// timingOut is a connection whose next delete of path fails as a
// server's operation timeout does: a connection loss (the outcome is
// unknown) while the session stays connected.
type timingOut struct {
	zk.Conn
	path  string
	fired atomic.Bool
}

func (c *timingOut) Delete(ctx context.Context, path string, version int32) error {
	if path == c.path && c.fired.CompareAndSwap(false, true) {
		return zk.ErrConnectionLoss
	}
	return c.Conn.Delete(ctx, path, version)
}

// A connection loss with no session change after it (a server's timeout)
// is tried again at once: waiting for a reconnect would wait for ever.
func TestJanitorRetriesALossWithoutASessionChange(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		raw, look := tg.Connect(t), tg.Connect(t)
		mkNodes(t, raw, "/a")
		c := &timingOut{Conn: raw, path: "/a"}
		within(t, HandOver(c, Leftovers{Session: c.SessionID(), Nodes: []string{"/a"}}), "the janitor's second try")
		if !c.fired.Load() || exists(t, look, "/a") {
			t.Fatalf("the first delete failed: %t; /a is left: %t", c.fired.Load(), exists(t, look, "/a"))
		}
	})
}

// When the session ends (expiry: the connection goes on with a new
// session), the server has deleted the nodes: the janitor lets them go.
// The same when the connection is closed.
func TestJanitorEndsWithTheSession(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c := tg.Connect(t)
		mkNodes(t, c, "/a")
		tg.Disconnect(t, c)
		done := HandOver(c, Leftovers{Session: c.SessionID(), Nodes: []string{"/a"}})
		tg.Expire(t, c)
		within(t, done, "done after expiry")

		c2 := tg.Connect(t)
		mkNodes(t, c2, "/b")
		tg.Disconnect(t, c2)
		done = HandOver(c2, Leftovers{Session: c2.SessionID(), Nodes: []string{"/b"}})
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
		within(t, done, "done after the connection closed")
	})
}

// Nothing to delete, or a session that is already over: done at once,
// and no janitor.
func TestJanitorNothingToDo(t *testing.T) {
	s := testkit.NewSim()
	defer s.Close()
	c := s.Connect()
	defer c.Close()
	within(t, HandOver(c, Leftovers{Session: c.SessionID()}), "empty leftovers")
	within(t, HandOver(c, Leftovers{Session: c.SessionID() + 1, Nodes: []string{"/x"}}), "another session's leftovers")
	if janitorOf(c) != nil {
		t.Fatal("a janitor for nothing")
	}
}
