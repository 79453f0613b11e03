package group_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// deletes counts a Conn's deletes.
type deletes struct {
	zk.Conn
	n atomic.Int32
}

func (c *deletes) Delete(ctx context.Context, path string, version int32) error {
	c.n.Add(1)
	return c.Conn.Delete(ctx, path, version)
}

// A create whose reply was lost made our node: Join finds it ours (this
// session's) and takes it as it is: no delete, no second node, no
// ErrMemberExists.
func TestLostCreateReply(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		if _, err := c.Create(ctx, "/g", nil, zk.ModePersistent); err != nil {
			t.Fatal(err) // the lost create is the one that makes /g/x
		}
		f := tg.LoseNextReply(t, c, testkit.OpCreate, "/g/x")
		dc := &deletes{Conn: c}
		m := must[*group.Member](t)(group.Join(ctx, dc, "/g", "x", []byte("d")))
		if n := dc.n.Load(); n != 0 {
			t.Errorf("%d deletes: our node was made again, not taken", n)
		}
		closeOnCleanup(t, m)
		select {
		case <-f.Fired():
		default:
			t.Fatal("the create's reply was not lost")
		}
		if d, owner, ok := node(ctx, t, c, "/g/x"); !ok || d != "d" || owner != c.SessionID() {
			t.Errorf("/g/x: %q owner %#x (there %t), want d, ours %#x", d, owner, ok, c.SessionID())
		}
		if m.State() != events.StateReady {
			t.Errorf("state %s", m.State())
		}
	})
}

// A SetData made while the connection is down is written once it is
// back, on the same node (the session lived).
func TestSetDataAcrossDisconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, w := tg.Connect(t), tg.Connect(t)
		m := must[*group.Member](t)(group.Join(ctx, c, "/g", "x", []byte("1")))
		closeOnCleanup(t, m)
		rec := record(t, m)
		tg.Disconnect(t, c)
		done := make(chan error, 1)
		go func() { done <- m.SetData(ctx, []byte("2")) }()
		rec.waitN(1, events.Suspended, "")
		tg.Reconnect(t, c)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d, owner, _ := node(ctx, t, w, "/g/x"); d != "2" || owner != c.SessionID() {
			t.Errorf("/g/x: %q owner %#x, want 2 on %#x", d, owner, c.SessionID())
		}
		if n := rec.count(events.MemberJoined); n != 0 {
			t.Errorf("%d MEMBER_JOINED after a disconnect: the node was made again", n)
		}
	})
}

// After the session's end our node is made again on the new session, with
// the latest data; a watcher sees it leave and join again.
func TestRejoinAfterExpiry(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, w := tg.Connect(t), tg.Connect(t)
		g := must[*group.Group](t)(group.Watch(w, "/g"))
		closeOnCleanup(t, g)
		grec := record(t, g)
		m := must[*group.Member](t)(group.Join(ctx, c, "/g", "x", []byte("1")))
		closeOnCleanup(t, m)
		rec := record(t, m)
		if err := m.SetData(ctx, []byte("latest")); err != nil {
			t.Fatal(err)
		}
		grec.waitFor("the watcher to see latest", func(evs []events.Event) bool {
			return slices.ContainsFunc(evs, func(e events.Event) bool { return string(e.Data) == "latest" && e.Version == 1 })
		})
		old := c.SessionID()
		tg.Expire(t, c)
		ev := rec.waitN(1, events.MemberJoined, "/g/x")
		if string(ev.Data) != "latest" || ev.Term != 2 {
			t.Errorf("made again with %q term %d, want latest, term 2", ev.Data, ev.Term)
		}
		if d, owner, ok := node(ctx, t, w, "/g/x"); !ok || d != "latest" || owner == old || owner != c.SessionID() {
			t.Errorf("/g/x: %q owner %#x (there %t), want latest on the new session %#x (old %#x)", d, owner, ok, c.SessionID(), old)
		}
		if rec.count(events.Lost) != 1 {
			t.Errorf("LOST %d times", rec.count(events.Lost))
		}
		grec.waitN(1, events.MemberLeft, "/g/x")
		if ev := grec.waitN(2, events.MemberJoined, "/g/x"); string(ev.Data) != "latest" || ev.Version != 0 {
			t.Errorf("the watcher saw it join again with %q v%d, want latest v0", ev.Data, ev.Version)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := node(ctx, t, w, "/g/x"); ok {
			t.Error("/g/x left after Close")
		}
	})
}

// Someone deletes our node: it is made again. Someone replaces it with a
// node of theirs, at once (a multi): the member does not take it, and is
// FAILED with ErrMemberExists; SetData says so; Close leaves their node.
func TestDeletedAndTaken(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, o := tg.Connect(t), tg.Connect(t)
		m := must[*group.Member](t)(group.Join(ctx, c, "/g", "x", []byte("mine")))
		closeOnCleanup(t, m)
		rec := record(t, m)
		if err := o.Delete(ctx, "/g/x", zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		rec.waitN(1, events.MemberJoined, "/g/x")
		if d, owner, _ := node(ctx, t, o, "/g/x"); d != "mine" || owner != c.SessionID() {
			t.Fatalf("/g/x after its deletion: %q owner %#x", d, owner)
		}
		if _, err := o.Multi(ctx, &zk.DeleteOp{Path: "/g/x", Version: zk.AnyVersion},
			&zk.CreateOp{Path: "/g/x", Data: []byte("theirs"), Mode: zk.ModeEphemeral}); err != nil {
			t.Fatal(err)
		}
		ev := rec.waitN(1, events.Failed, "/g/x")
		if !errors.Is(ev.Err, group.ErrMemberExists) || m.State() != events.StateFailed {
			t.Errorf("FAILED with %v, state %s; want ErrMemberExists, FAILED", ev.Err, m.State())
		}
		if err := m.SetData(ctx, []byte("again")); !errors.Is(err, group.ErrMemberExists) {
			t.Errorf("SetData when FAILED: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if d, owner, _ := node(ctx, t, o, "/g/x"); d != "theirs" || owner != o.SessionID() {
			t.Errorf("their node after our Close: %q owner %#x", d, owner)
		}
	})
}

// Close while the connection is down hands our node to the connection's
// janitor (ErrCleanupPending), which deletes it once the session is back.
func TestCloseWhileDisconnected(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, w := tg.Connect(t), tg.Connect(t)
		m := must[*group.Member](t)(group.Join(ctx, c, "/g", "x", nil, group.WithCloseTimeout(50*time.Millisecond)))
		tg.Disconnect(t, c)
		if err := m.Close(); !errors.Is(err, group.ErrCleanupPending) {
			t.Fatalf("Close while cut off: %v, want ErrCleanupPending", err)
		}
		if _, _, ok := node(ctx, t, w, "/g/x"); !ok {
			t.Fatal("/g/x gone while the session is cut off")
		}
		ws := must[<-chan zk.WatchEvent](t)(func() (<-chan zk.WatchEvent, error) {
			_, _, ch, err := w.GetW(ctx, "/g/x")
			return ch, err
		}())
		tg.Reconnect(t, c)
		select {
		case ev := <-ws:
			if ev.Type != zk.EventNodeDeleted {
				t.Errorf("watch: %v", ev.Type)
			}
		case <-ctx.Done():
			t.Fatal("the janitor did not delete /g/x")
		}
	})
}

// Join's ctx ends while its create is applied but unanswered: either
// Join returns ctx's error and the node the create made is deleted once
// its reply comes, or (the reply came with the ctx's end) Join returns
// the member, whose node is ours. Never a node left without a member.
func TestJoinCancelledDuringCreate(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, w := tg.Connect(t), tg.Connect(t)
		if _, err := w.Create(ctx, "/g", nil, zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		for round := range 3 {
			id := fmt.Sprintf("x%d", round)
			f := tg.HoldNextReply(t, c, testkit.OpCreate, "/g/"+id)
			jctx, cancel := context.WithCancel(ctx)
			type joined struct {
				m   *group.Member
				err error
			}
			done := make(chan joined, 1)
			go func() {
				m, err := group.Join(jctx, c, "/g", id, []byte("d"))
				done <- joined{m, err}
			}()
			select {
			case <-f.Fired():
			case <-ctx.Done():
				t.Fatal("the create was not made")
			}
			if _, _, ok := node(ctx, t, w, "/g/"+id); !ok {
				t.Fatal("the held create did not make its node")
			}
			cancel()
			f.Release()
			j := <-done
			_, owner, ok := node(ctx, t, w, "/g/"+id)
			switch {
			case errors.Is(j.err, context.Canceled):
				if ok {
					t.Errorf("round %d: /g/%s left after the cancelled Join returned", round, id)
				}
			case j.err == nil:
				t.Logf("round %d: the reply came with the ctx's end: joined", round)
				if !ok || owner != c.SessionID() {
					t.Errorf("round %d: joined, but /g/%s is not ours (there %t)", round, id, ok)
				}
				if err := j.m.Close(); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("round %d: Join: %v, want nil or context.Canceled", round, j.err)
			}
		}
	})
}

// A delete the server refuses is no departure: a group path that lets
// anyone create members but only its owner delete them (Join works), our
// node stays. Leave returns zk.ErrNoAuth and leaves the member FAILED, with
// its node; Close tries again and returns it too, and so does a Close
// alone. (Both returned nil, the node still there.)
func TestLeaveRefused(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		admin := tg.Connect(t, zk.WithAuth("digest", []byte("admin:pw")))
		acl := append(zk.DigestACL(zk.PermAll, "admin", "pw"), zk.WorldACL(zk.PermRead|zk.PermCreate)...)
		if _, err := admin.CreateACL(ctx, "/refused", nil, zk.ModePersistent, acl); err != nil {
			t.Fatal(err)
		}
		for _, leave := range []bool{true, false} {
			c := tg.Connect(t)
			m := must[*group.Member](t)(group.Join(ctx, c, "/refused", fmt.Sprint("leave-", leave), nil))
			rec := record(t, m)
			if leave {
				if err := m.Leave(ctx); !errors.Is(err, zk.ErrNoAuth) {
					t.Fatalf("Leave: %v, want zk.ErrNoAuth", err)
				}
				if ev := rec.waitN(1, events.Failed, m.Node()); !errors.Is(ev.Err, zk.ErrNoAuth) || m.State() != events.StateFailed {
					t.Errorf("after Leave: FAILED with %v, state %s; want zk.ErrNoAuth, FAILED", ev.Err, m.State())
				}
				if _, owner, ok := node(ctx, t, admin, m.Node()); !ok || owner != c.SessionID() {
					t.Errorf("%s after the refused Leave: there %t, owner %#x, want ours", m.Node(), ok, owner)
				}
			}
			if err := m.Close(); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("Close (after Leave %t): %v, want zk.ErrNoAuth", leave, err)
			}
			if err := m.Close(); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("second Close: %v, want the first's", err)
			}
			if _, _, ok := node(ctx, t, admin, m.Node()); !ok {
				t.Errorf("%s gone after the refused Close", m.Node())
			}
		}
	})
}
