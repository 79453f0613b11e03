package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5s", what)
	}
}

func hasJanitor(c zk.Conn) bool {
	janitorsMu.Lock()
	defer janitorsMu.Unlock()
	return janitors[c] != nil
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
// prefix once the same session is back, and then ends.
func TestJanitorDeletesOnReconnect(t *testing.T) {
	s := sim.New()
	c, look := s.Connect(), s.Connect()
	defer c.Close()
	defer look.Close()
	mkNodes(t, c, "/a", "/_c_u1-lock-0000000001", "/_c_u2-lock-0000000002")
	s.Disconnect(c)
	done := HandOver(c, Leftovers{Session: c.SessionID(), Nodes: []string{"/a", "/gone"}, Prefixes: []string{"/_c_u1-lock-"}})
	select {
	case <-done:
		t.Fatal("done while the connection is down")
	case <-time.After(50 * time.Millisecond):
	}
	s.Reconnect(c)
	within(t, done, "the janitor's deletes after the reconnect")
	if exists(t, look, "/a") || exists(t, look, "/_c_u1-lock-0000000001") {
		t.Fatal("a leftover is still there")
	}
	if !exists(t, look, "/_c_u2-lock-0000000002") {
		t.Fatal("the janitor deleted a node that was not its to delete")
	}
	// TestMain's goleak check finds the janitor's goroutine if it did not end.
}

// When the session ends, the server has deleted the nodes: the janitor
// lets them go, and ends with the connection.
func TestJanitorEndsWithTheSession(t *testing.T) {
	s := sim.New()
	c := s.Connect()
	defer c.Close()
	mkNodes(t, c, "/a")
	s.Disconnect(c)
	done := HandOver(c, Leftovers{Session: c.SessionID(), Nodes: []string{"/a"}})
	s.Expire(c)
	within(t, done, "done after expiry")

	c2 := s.Connect()
	mkNodes(t, c2, "/b")
	s.Disconnect(c2)
	done = HandOver(c2, Leftovers{Session: c2.SessionID(), Nodes: []string{"/b"}})
	c2.Close()
	within(t, done, "done after the connection closed")
}

// Nothing to delete, or a session that is already over: done at once.
func TestJanitorNothingToDo(t *testing.T) {
	s := sim.New()
	c := s.Connect()
	defer c.Close()
	within(t, HandOver(c, Leftovers{Session: c.SessionID()}), "empty leftovers")
	within(t, HandOver(c, Leftovers{Session: c.SessionID() + 1, Nodes: []string{"/x"}}), "another session's leftovers")
	if hasJanitor(c) {
		t.Fatal("a janitor for nothing")
	}
}
