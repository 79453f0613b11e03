package sim

import (
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/fault"
)

// The simulator's behaviour is tested from outside, with testkit's helpers
// and on a real server beside it (testkit/sim_test.go and
// testkit/conformance_test.go). The tests here look at what only the inside
// shows.

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestLostReadLeavesNoWatch: a watching read whose reply is lost registers
// no watch on the server's side.
func TestLostReadLeavesNoWatch(t *testing.T) {
	s := New()
	defer s.Close()
	a := s.Connect()
	ctx := t.Context()
	_, err := a.Create(ctx, "/p", nil, zk.ModePersistent)
	must(t, err)
	s.LoseNextReply(a, fault.OpGet, "")
	if _, _, _, err := a.GetW(ctx, "/p"); err == nil {
		t.Fatal("GetW whose reply was lost: no error")
	}
	s.mu.Lock()
	n := len(a.(*simConn).watches)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("a lost read left %d watches", n)
	}
}

// TestEventOrder looks at the order in which a transaction queues its
// notifications for a session (what a real server sends on the wire): a
// node's before its parent's, and a multi's in op order, the parent's child
// watch spent by the first child change.
func TestEventOrder(t *testing.T) {
	s := New()
	defer s.Close()
	a, b := s.Connect(), s.Connect()
	ctx := t.Context()
	for _, p := range []string{"/P", "/P/m1", "/P/m2", "/P/m3"} {
		_, err := a.Create(ctx, p, nil, zk.ModePersistent)
		must(t, err)
	}
	watch := func(read func() error) { t.Helper(); must(t, read()) }
	childrenW := func(p string) { watch(func() error { _, _, _, err := a.ChildrenW(ctx, p); return err }) }
	existsW := func(p string) { watch(func() error { _, _, _, err := a.ExistsW(ctx, p); return err }) }
	getW := func(p string) { watch(func() error { _, _, _, err := a.GetW(ctx, p); return err }) }
	bwho := principal{session: b.SessionID()}
	// queued runs fn as a transaction and returns what it queued for a.
	queued := func(fn func(tx *txn) error) []string {
		t.Helper()
		s.mu.Lock()
		must(t, s.write(fn))
		var got []string
		for _, d := range a.(*simConn).outbox {
			got = append(got, d.watch.Type.String()+" "+d.watch.Path)
		}
		s.mu.Unlock()
		s.deliver()
		return got
	}
	childrenW("/P")
	existsW("/P/c")
	got := queued(func(tx *txn) error { _, err := tx.create("/P/c", nil, zk.ModePersistent, nil, bwho); return err })
	if want := []string{"NodeCreated /P/c", "NodeChildrenChanged /P"}; !slices.Equal(got, want) {
		t.Fatalf("create: %v, want %v", got, want)
	}
	childrenW("/P")
	getW("/P/c")
	childrenW("/P/c")
	got = queued(func(tx *txn) error { return tx.delete("/P/c", -1, bwho) })
	if want := []string{"NodeDeleted /P/c", "NodeDeleted /P/c", "NodeChildrenChanged /P"}; !slices.Equal(got, want) {
		t.Fatalf("delete: %v, want %v (one notification for both watches of /P/c)", got, want)
	}
	getW("/P/m3")
	getW("/P/m2")
	getW("/P/m1")
	existsW("/P/m4")
	childrenW("/P")
	got = queued(func(tx *txn) error {
		_, err := tx.multi([]zk.Op{
			&zk.SetOp{Path: "/P/m1", Version: -1},
			&zk.DeleteOp{Path: "/P/m2", Version: -1},
			&zk.SetOp{Path: "/P/m3", Version: -1},
			&zk.CreateOp{Path: "/P/m4"},
		}, bwho)
		return err
	})
	want := []string{"NodeDataChanged /P/m1", "NodeDeleted /P/m2", "NodeChildrenChanged /P", "NodeDataChanged /P/m3", "NodeCreated /P/m4"}
	if !slices.Equal(got, want) {
		t.Fatalf("multi: %v, want %v", got, want)
	}
}

// TestReplyAfterEarlierEvents: a reply comes after the events queued for
// its session before its request was applied, also while another
// goroutine's write has taken them for delivery and not yet handed them
// over (go-zookeeper hands an event to its watch before it reads the next
// reply). A watch request of the contention engine, which looks at what
// its watches hold once the replies are in, saw no event there.
func TestReplyAfterEarlierEvents(t *testing.T) {
	s := New()
	defer s.Close()
	a, b := s.Connect(), s.Connect()
	ctx := t.Context()
	_, _, ch, err := a.ExistsW(ctx, "/x")
	must(t, err)
	// b's create, as its goroutine leaves it: the event queued for a,
	// taken from the pending list by its delivery, not handed over yet.
	bwho := principal{session: b.SessionID()}
	s.mu.Lock()
	must(t, s.write(func(tx *txn) error {
		_, err := tx.create("/x", nil, zk.ModePersistent, nil, bwho)
		return err
	}))
	ac := a.(*simConn)
	s.pending, ac.queued = slices.DeleteFunc(s.pending, func(c *simConn) bool { return c == ac }), false
	s.mu.Unlock()
	if _, _, err := a.Exists(ctx, "/y"); err != nil {
		t.Fatal(err)
	}
	if len(ch) != 1 {
		t.Fatal("a reply came before the event queued for its session ahead of it")
	}
}
