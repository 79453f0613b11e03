package group_test

import (
	"errors"
	"maps"
	"slices"
	"testing"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Two members join, one changes its data, both leave (one by Leave, one
// by Close); a watcher on another session sees each change with its data,
// in order, and Members agrees; nothing is left under the group.
func TestJoinWatchLeave(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		g := must[*group.Group](t)(group.Watch(tg.Connect(t), "/app/members"))
		closeOnCleanup(t, g)
		rec := record(t, g)
		if err := g.Initialized(ctx); err != nil {
			t.Fatal(err)
		}
		c := tg.Connect(t)
		a := must[*group.Member](t)(group.Join(ctx, c, "/app/members", "node-a", []byte("a1")))
		rec.waitN(1, events.MemberJoined, "/app/members/node-a")
		if err := a.SetData(ctx, []byte("a2")); err != nil {
			t.Fatal(err)
		}
		rec.waitN(1, events.MemberUpdated, "/app/members/node-a")
		b := must[*group.Member](t)(group.Join(ctx, tg.Connect(t), "/app/members", "node-b", []byte("b1")))
		rec.waitN(1, events.MemberJoined, "/app/members/node-b")
		want := map[string][]byte{"node-a": []byte("a2"), "node-b": []byte("b1")}
		if got := g.Members(); !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("Members %q, want %q", got, want)
		}
		if a.State() != events.StateReady || a.ID() != "node-a" || a.Node() != "/app/members/node-a" || a.Path() != "/app/members" {
			t.Errorf("member: state %s id %s node %s path %s", a.State(), a.ID(), a.Node(), a.Path())
		}
		if err := a.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		rec.waitN(1, events.MemberLeft, "/app/members/node-b")
		rec.waitN(1, events.MemberLeft, "/app/members/node-a")
		if got := kids(ctx, t, c, "/app/members"); len(got) != 0 && !slices.Equal(got, []string{"absent"}) {
			t.Errorf("left under the group: %q", got)
		}
		if len(g.Members()) != 0 {
			t.Errorf("Members after both left: %q", g.Members())
		}
		wantLog := []string{"MEMBER_JOINED /app/members/node-a a1", "MEMBER_UPDATED /app/members/node-a a2",
			"MEMBER_JOINED /app/members/node-b b1"}
		if got := memberLog(rec.events())[:3]; !slices.Equal(got, wantLog) {
			t.Errorf("events %q, want %q", got, wantLog)
		}
		if err := a.SetData(ctx, nil); !errors.Is(err, group.ErrClosed) || !errors.Is(err, zkrecipes.ErrClosed) {
			t.Errorf("SetData after Leave: %v, want ErrClosed", err)
		}
	})
}

// An id held by another live session is ErrMemberExists, and its node is
// left as it was; the failed Join leaves nothing behind.
func TestMemberExists(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c1, c2 := tg.Connect(t), tg.Connect(t)
		a := must[*group.Member](t)(group.Join(ctx, c1, "/g", "x", []byte("first")))
		closeOnCleanup(t, a)
		_, err := group.Join(ctx, c2, "/g", "x", []byte("second"))
		if !errors.Is(err, group.ErrMemberExists) {
			t.Fatalf("second Join: %v, want ErrMemberExists", err)
		}
		if d, owner, ok := node(ctx, t, c2, "/g/x"); !ok || d != "first" || owner != c1.SessionID() {
			t.Errorf("/g/x after the refused Join: %q owner %#x (there %t), want first, %#x", d, owner, ok, c1.SessionID())
		}
	})
}

// Bad input is refused before anything is sent.
func TestBadInput(t *testing.T) {
	sim := testkit.NewSim()
	defer sim.Close()
	c := sim.Connect()
	ctx := ctxT(t)
	for _, tc := range []struct {
		name string
		err  error
		f    func() error
	}{
		{"relative path", zk.ErrInvalidPath, func() error { _, err := group.Join(ctx, c, "g", "x", nil); return err }},
		{"id with a slash", group.ErrInvalidOption, func() error { _, err := group.Join(ctx, c, "/g", "a/b", nil); return err }},
		{"empty id", group.ErrInvalidOption, func() error { _, err := group.Join(ctx, c, "/g", "", nil); return err }},
		{"dot id", group.ErrInvalidOption, func() error { _, err := group.Join(ctx, c, "/g", "..", nil); return err }},
		{"WithID on Join", group.ErrInvalidOption, func() error {
			_, err := group.Join(ctx, c, "/g", "x", nil, group.WithID("y"))
			return err
		}},
		{"bad ACL", group.ErrInvalidOption, func() error {
			_, err := group.Join(ctx, c, "/g", "x", nil, group.WithACL(zk.ACL{}))
			return err
		}},
		{"WithACL on Watch", group.ErrInvalidOption, func() error {
			_, err := group.Watch(c, "/g", group.WithACL(zk.CreatorAll()...))
			return err
		}},
		{"watch relative", zk.ErrInvalidPath, func() error { _, err := group.Watch(c, "g"); return err }},
		{"nil conn", group.ErrClosed, func() error { _, err := group.Watch(nil, "/g"); return err }},
		{"zero close timeout", group.ErrInvalidOption, func() error {
			_, err := group.Watch(c, "/g", group.WithCloseTimeout(0))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f(); !errors.Is(err, tc.err) {
				t.Errorf("%v, want %v", err, tc.err)
			}
		})
	}
	if ns := kids(ctx, t, c, "/"); slices.Contains(ns, "g") {
		t.Errorf("something was created: %q", ns)
	}
}

// WithACL makes our node (and the group's missing path) with its ACL,
// in place of the connection's (alice's alone, others reading): bob, whom
// it lets write, may set our node; another identity may not write, nor
// create in the group's path; our SetData and Leave work.
func TestWithACL(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		alice := tg.Connect(t, zk.WithAuth("digest", []byte("alice:pw")))
		bob := tg.Connect(t, zk.WithAuth("digest", []byte("bob:pw")))
		other := tg.Connect(t)
		acl := append(zk.DigestACL(zk.PermAll, "alice", "pw"), zk.DigestACL(zk.PermRead|zk.PermWrite, "bob", "pw")...)
		m := must[*group.Member](t)(group.Join(ctx, alice, "/acl/g", "x", []byte("d"), group.WithACL(acl...)))
		if _, err := bob.Set(ctx, "/acl/g/x", []byte("bob's"), zk.AnyVersion); err != nil {
			t.Errorf("bob's set, which our ACL allows: %v", err)
		}
		if _, err := other.Set(ctx, "/acl/g/x", []byte("theirs"), zk.AnyVersion); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("another identity's set: %v, want ErrNoAuth", err)
		}
		if _, err := other.Create(ctx, "/acl/g/y", nil, zk.ModeEphemeral); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("another identity's create in the group's path: %v, want ErrNoAuth", err)
		}
		if err := m.SetData(ctx, []byte("e")); err != nil {
			t.Fatal(err)
		}
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := node(ctx, t, alice, "/acl/g/x"); ok {
			t.Error("/acl/g/x left after Leave")
		}
	})
}
