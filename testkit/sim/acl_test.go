package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// authed returns a conn of s authenticated as digest user:password.
func authed(t *testing.T, s *Sim, user, password string) *simConn {
	t.Helper()
	c := s.Connect().(*simConn)
	must(t, c.AddAuth(t.Context(), "digest", []byte(user+":"+password)))
	return c
}

// wantErr fails unless err matches want (nil: no error).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// TestAddAuthDigest: a digest identity is the one an "auth" ACL names,
// and a node created with CreatorAll refuses every other session, one
// without an identity and one with another password alike, but exists.
func TestAddAuthDigest(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	owner := authed(t, s, "billing", "s3cret")
	_, err := owner.CreateACL(ctx, "/p", []byte("x"), zk.ModePersistent, zk.CreatorAll())
	must(t, err)
	s.mu.Lock()
	got := s.nodes["/p"].acl
	s.mu.Unlock()
	if want := zk.DigestACL(zk.PermAll, "billing", "s3cret"); !slices.Equal(got, want) {
		t.Fatalf("CreatorAll stored as %v, want %v", got, want)
	}
	for name, other := range map[string]zk.Conn{"anonymous": s.Connect(), "wrong password": authed(t, s, "billing", "guess")} {
		t.Run(name, func(t *testing.T) {
			_, _, err := other.Get(ctx, "/p")
			wantErr(t, "get", err, zk.ErrNoAuth)
			_, _, err = other.Children(ctx, "/p")
			wantErr(t, "children", err, zk.ErrNoAuth)
			_, err = other.Set(ctx, "/p", nil, -1)
			wantErr(t, "set", err, zk.ErrNoAuth)
			_, err = other.Create(ctx, "/p/c", nil, zk.ModePersistent)
			wantErr(t, "create a child", err, zk.ErrNoAuth)
			if _, ok, err := other.Exists(ctx, "/p"); err != nil || !ok {
				t.Fatalf("exists: %v %v, want true, nil", ok, err)
			}
		})
	}
	_, err = owner.Create(ctx, "/p/c", nil, zk.ModePersistent)
	must(t, err)
	wantErr(t, "anonymous delete of a child", s.Connect().Delete(ctx, "/p/c", -1), zk.ErrNoAuth)
	must(t, owner.Delete(ctx, "/p/c", -1))
	_, _, err = owner.Get(ctx, "/p")
	must(t, err)
}

// TestAddAuthKept: a conn's identities stay across a reconnect and are
// its new session's after an expiry.
func TestAddAuthKept(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	c := authed(t, s, "u", "p")
	_, err := c.CreateACL(ctx, "/p", nil, zk.ModePersistent, zk.CreatorAll())
	must(t, err)
	s.Disconnect(c)
	s.Reconnect(c)
	_, err = c.Set(ctx, "/p", []byte("1"), -1)
	wantErr(t, "set after a reconnect", err, nil)
	old := c.SessionID()
	s.Expire(c)
	if c.SessionID() == old {
		t.Fatal("no new session after Expire")
	}
	_, err = c.Set(ctx, "/p", []byte("2"), -1)
	wantErr(t, "set in the new session", err, nil)
	_, err = c.CreateACL(ctx, "/q", nil, zk.ModePersistent, zk.CreatorAll())
	wantErr(t, "CreatorAll in the new session", err, nil)
}

// TestAddAuthRefused: a scheme the server has no provider for is
// refused with ErrAuthFailed and the connection is closed (the same
// session comes back at once); a malformed digest cred or an empty scheme
// is refused before anything is sent, even on a cut or closed conn.
func TestAddAuthRefused(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	c := s.Connect().(*simConn)
	var states []zk.SessionState
	cancel := c.Subscribe(func(e zk.SessionEvent) { states = append(states, e.State) })
	defer cancel()
	id := c.SessionID()
	for _, scheme := range []string{"sasl", "super", "world", "auth", "x509"} {
		wantErr(t, "AddAuth "+scheme, c.AddAuth(ctx, scheme, []byte("u:p")), zk.ErrAuthFailed)
	}
	if want := slices.Repeat([]zk.SessionState{zk.StateSuspended, zk.StateReconnected}, 5); !slices.Equal(states, want) {
		t.Fatalf("session states %v, want %v", states, want)
	}
	if c.SessionID() != id {
		t.Fatal("a refused authentication changed the session")
	}
	s.mu.Lock()
	n := len(c.digests)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d identities after refusals", n)
	}
	must(t, c.AddAuth(ctx, "ip", nil))
	s.Disconnect(c)
	ended, cancelEnded := context.WithCancel(ctx)
	cancelEnded()
	for _, bad := range []struct{ scheme, cred string }{{"digest", "user"}, {"digest", ":password"}, {"", "u:p"}} {
		err := c.AddAuth(ended, bad.scheme, []byte(bad.cred))
		wantErr(t, fmt.Sprintf("%q %q on a cut conn", bad.scheme, bad.cred), err, zk.ErrInvalidOption)
		wantErr(t, "the same", err, zk.ErrBadArguments)
	}
	s.Reconnect(c)
	must(t, c.Close())
	wantErr(t, "digest without ':' on a closed conn", c.AddAuth(ctx, "digest", []byte("user")), zk.ErrBadArguments)
	wantErr(t, "AddAuth on a closed conn", c.AddAuth(ctx, "digest", []byte("u:p")), zk.ErrClosed)
}

// TestFixupACL: the ACL a create gives, and the ones it refuses as
// InvalidACL (our ErrBadArguments), as the server's fixupACL decides them;
// the ACL is checked before the parent's existence.
func TestFixupACL(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	anon := s.Connect()
	two := authed(t, s, "a", "1")
	must(t, two.AddAuth(ctx, "digest", []byte("b:2")))
	must(t, two.AddAuth(ctx, "digest", []byte("a:1"))) // the same identity again
	cases := []struct {
		name string
		c    zk.Conn
		acl  []zk.ACL
		want []zk.ACL // nil: refused
	}{
		{"nil is world all", anon, nil, zk.WorldACL(zk.PermAll)},
		{"empty", anon, []zk.ACL{}, nil},
		{"auth without identity", anon, zk.CreatorAll(), nil},
		{"auth with two identities", two, []zk.ACL{{Perms: zk.PermRead | zk.PermWrite, Scheme: "auth", ID: "ignored"}},
			[]zk.ACL{{Perms: zk.PermRead | zk.PermWrite, Scheme: "digest", ID: zk.DigestID("a", "1")}, {Perms: zk.PermRead | zk.PermWrite, Scheme: "digest", ID: zk.DigestID("b", "2")}}},
		{"digest as given", anon, zk.DigestACL(zk.PermRead, "x", "y"), zk.DigestACL(zk.PermRead, "x", "y")},
		{"digest id without hash", anon, []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "user:"}}, nil},
		{"digest id with two colons", anon, []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "a:b:c"}}, nil},
		{"world someone", anon, []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "someone"}}, nil},
		{"unknown scheme", anon, []zk.ACL{{Perms: zk.PermAll, Scheme: "sasl", ID: "u"}}, nil},
		{"no permissions", anon, []zk.ACL{{Scheme: "world", ID: "anyone"}}, []zk.ACL{{Scheme: "world", ID: "anyone"}}},
		{"ip", anon, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "10.0.0.0/8"}}, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "10.0.0.0/8"}}},
		{"ip prefix too long", anon, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "10.0.0.0/33"}}, nil},
		{"ipv6", anon, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "::1"}}, nil},
		{"one bad entry", anon, append(zk.WorldACL(zk.PermRead), zk.ACL{Perms: zk.PermAll, Scheme: "x", ID: "y"}), nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := "/n" + string(rune('a'+i))
			_, err := tc.c.CreateACL(ctx, path, nil, zk.ModePersistent, tc.acl)
			if tc.want == nil {
				wantErr(t, "create", err, zk.ErrBadArguments)
				_, err = tc.c.CreateACL(ctx, "/missing/x", nil, zk.ModePersistent, tc.acl)
				wantErr(t, "create under a missing parent", err, zk.ErrBadArguments)
				return
			}
			must(t, err)
			s.mu.Lock()
			got := s.nodes[path].acl
			s.mu.Unlock()
			if !slices.Equal(got, tc.want) {
				t.Fatalf("stored %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPermissions: each request needs its own permission, on the node or
// (create, delete) on its parent, and only that one.
func TestPermissions(t *testing.T) {
	ctx := t.Context()
	type op struct {
		name string
		need int32 // 0: none
		run  func(c zk.Conn) error
	}
	ops := []op{
		{"create", zk.PermCreate, func(c zk.Conn) error { _, err := c.Create(ctx, "/p/new", nil, zk.ModePersistent); return err }},
		{"delete", zk.PermDelete, func(c zk.Conn) error { return c.Delete(ctx, "/p/c", -1) }},
		{"set", zk.PermWrite, func(c zk.Conn) error { _, err := c.Set(ctx, "/p", nil, -1); return err }},
		{"get", zk.PermRead, func(c zk.Conn) error { _, _, err := c.Get(ctx, "/p"); return err }},
		{"getW", zk.PermRead, func(c zk.Conn) error { _, _, _, err := c.GetW(ctx, "/p"); return err }},
		{"children", zk.PermRead, func(c zk.Conn) error { _, _, err := c.Children(ctx, "/p"); return err }},
		{"childrenW", zk.PermRead, func(c zk.Conn) error { _, _, _, err := c.ChildrenW(ctx, "/p"); return err }},
		{"check", zk.PermRead, func(c zk.Conn) error { _, err := c.Multi(ctx, &zk.CheckOp{Path: "/p", Version: -1}); return err }},
		{"exists", 0, func(c zk.Conn) error { _, _, err := c.Exists(ctx, "/p"); return err }},
		{"existsW", 0, func(c zk.Conn) error { _, _, _, err := c.ExistsW(ctx, "/p"); return err }},
		{"sync", 0, func(c zk.Conn) error { return c.Sync(ctx, "/p") }},
	}
	for _, o := range ops {
		for _, grant := range []int32{zk.PermRead, zk.PermWrite, zk.PermCreate, zk.PermDelete, zk.PermAdmin, zk.PermAll &^ o.need} {
			s := New()
			owner := authed(t, s, "o", "o")
			_, err := owner.CreateACL(ctx, "/p", nil, zk.ModePersistent, append(zk.CreatorAll(), zk.WorldACL(grant)...))
			must(t, err)
			_, err = owner.Create(ctx, "/p/c", nil, zk.ModePersistent)
			must(t, err)
			var want error
			if o.need != 0 && grant&o.need == 0 {
				want = zk.ErrNoAuth
			}
			wantErr(t, o.name+" granted "+permString(grant), o.run(s.Connect()), want)
			if want != nil {
				must(t, o.run(owner)) // the refusal changed nothing
			}
			s.Close()
		}
	}
}

func permString(p int32) string {
	var b strings.Builder
	for i, c := range "rwcda" {
		if p&(1<<i) != 0 {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// TestIPACL: every simulated session has the identity ip:127.0.0.1.
func TestIPACL(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	c := s.Connect()
	for _, tc := range []struct {
		id string
		ok bool
	}{{"127.0.0.1", true}, {"127.0.0.0/8", true}, {"0.0.0.0/0", true}, {"127.0.0.2", false}, {"10.0.0.0/8", false}, {"127.0.0.2/31", false}} {
		path := "/" + strings.NewReplacer(".", "_", "/", "-").Replace(tc.id)
		_, err := c.CreateACL(ctx, path, nil, zk.ModePersistent, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: tc.id}})
		must(t, err)
		var want error
		if !tc.ok {
			want = zk.ErrNoAuth
		}
		_, err = c.Set(ctx, path, nil, -1)
		wantErr(t, "set with ip:"+tc.id, err, want)
	}
}

// TestCheckOrder: where the ACL check falls among the other errors, as in
// PrepRequestProcessor and FinalRequestProcessor.
func TestCheckOrder(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	owner := authed(t, s, "o", "o")
	_, err := owner.CreateACL(ctx, "/locked", nil, zk.ModePersistent, zk.CreatorAll())
	must(t, err)
	_, err = owner.CreateACL(ctx, "/locked/c", nil, zk.ModePersistent, zk.CreatorAll())
	must(t, err)
	_, err = owner.Create(ctx, "/locked/c/g", nil, zk.ModePersistent)
	must(t, err)
	other := s.Connect()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"create of an existing node", func() error { _, err := other.Create(ctx, "/locked/c", nil, zk.ModePersistent); return err }(), zk.ErrNoAuth},
		{"create under a missing parent", func() error { _, err := other.Create(ctx, "/locked/x/y", nil, zk.ModePersistent); return err }(), zk.ErrNoNode},
		{"create with an invalid ACL", func() error {
			_, err := other.CreateACL(ctx, "/locked/c", nil, zk.ModePersistent, zk.CreatorAll())
			return err
		}(), zk.ErrBadArguments},
		{"delete of a missing node", other.Delete(ctx, "/locked/missing", -1), zk.ErrNoAuth},
		{"delete with a bad version", other.Delete(ctx, "/locked/c", 7), zk.ErrNoAuth},
		{"delete of a node with children", other.Delete(ctx, "/locked/c", -1), zk.ErrNoAuth},
		{"delete under a missing parent", other.Delete(ctx, "/missing/x", -1), zk.ErrNoNode},
		{"set of a missing node", func() error { _, err := other.Set(ctx, "/locked/missing", nil, -1); return err }(), zk.ErrNoNode},
		{"set with a bad version", func() error { _, err := other.Set(ctx, "/locked", nil, 7); return err }(), zk.ErrNoAuth},
		{"get of a missing node", func() error { _, _, err := other.Get(ctx, "/locked/missing"); return err }(), zk.ErrNoNode},
		{"check with a bad version", func() error { _, err := other.Multi(ctx, &zk.CheckOp{Path: "/locked", Version: 7}); return err }(), zk.ErrNoAuth},
		{"owner: delete with a bad version", owner.Delete(ctx, "/locked/c", 7), zk.ErrBadVersion},
	}
	for _, tc := range cases {
		wantErr(t, tc.name, tc.err, tc.want)
	}
}

// TestMultiRefused: an op the ACL refuses fails its multi at that op, with
// ErrNoAuth there, nil before and ErrRuntimeInconsistency after, and
// nothing applied; an op may act on a node an earlier op created, with
// that node's ACL.
func TestMultiRefused(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	owner := authed(t, s, "o", "o")
	_, err := owner.CreateACL(ctx, "/locked", nil, zk.ModePersistent, append(zk.CreatorAll(), zk.WorldACL(zk.PermRead)...))
	must(t, err)
	other := s.Connect()
	before := s.zxidNow()
	res, err := other.Multi(ctx,
		&zk.CreateOp{Path: "/free"},
		&zk.SetOp{Path: "/locked", Version: -1},
		&zk.CreateOp{Path: "/free2"},
	)
	wantErr(t, "multi", err, zk.ErrNoAuth)
	if len(res) != 3 || res[0].Err != nil || !errors.Is(res[1].Err, zk.ErrNoAuth) || !errors.Is(res[2].Err, zk.ErrRuntimeInconsistency) {
		t.Fatalf("results %+v", res)
	}
	if _, ok, _ := other.Exists(ctx, "/free"); ok {
		t.Fatal("a refused multi applied its first op")
	}
	if got := s.zxidNow(); got != before+1 {
		t.Fatalf("a refused multi took %d zxids, want 1", got-before)
	}
	_, err = other.Multi(ctx,
		&zk.CreateOp{Path: "/mine", ACL: zk.WorldACL(zk.PermRead)},
		&zk.SetOp{Path: "/mine", Version: -1},
	)
	wantErr(t, "set after a read-only create in one multi", err, zk.ErrNoAuth)
	_, err = owner.Multi(ctx,
		&zk.CreateOp{Path: "/locked/a", ACL: zk.CreatorAll()},
		&zk.SetOp{Path: "/locked/a", Data: []byte("x"), Version: -1},
		&zk.CheckOp{Path: "/locked", Version: -1},
	)
	wantErr(t, "owner's multi", err, nil)
}

func (s *Sim) zxidNow() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.zxid
}

// TestServerDeletesIgnoreACL: the ephemerals of a session that ends and a
// reaped container go even when no one may delete them.
func TestServerDeletesIgnoreACL(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	owner := authed(t, s, "o", "o")
	noDelete := []zk.ACL{{Perms: zk.PermAll &^ zk.PermDelete, Scheme: "world", ID: "anyone"}}
	_, err := owner.CreateACL(ctx, "/p", nil, zk.ModePersistent, noDelete)
	must(t, err)
	_, err = owner.CreateACL(ctx, "/p/c", nil, zk.ModeContainer, noDelete)
	must(t, err)
	_, err = owner.CreateACL(ctx, "/p/c/e", nil, zk.ModeEphemeral, zk.CreatorAll())
	must(t, err)
	wantErr(t, "client delete", owner.Delete(ctx, "/p/c/e", -1), zk.ErrNoAuth)
	must(t, owner.Close())
	if _, ok, _ := s.Connect().Exists(ctx, "/p/c/e"); ok {
		t.Fatal("the ephemeral outlived its session")
	}
	if n := s.ReapContainers(); n != 1 {
		t.Fatalf("reaped %d, want the container", n)
	}
}

// TestBuiltinACLs: /zookeeper/config is world-readable only, the other
// built-in nodes are open.
func TestBuiltinACLs(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	c := s.Connect()
	_, err := c.Set(ctx, "/zookeeper/config", nil, -1)
	wantErr(t, "set config", err, zk.ErrNoAuth)
	_, err = c.Create(ctx, "/zookeeper/config/x", nil, zk.ModePersistent)
	wantErr(t, "create under config", err, zk.ErrNoAuth)
	_, _, err = c.Get(ctx, "/zookeeper/config")
	wantErr(t, "get config", err, nil)
	_, err = c.Create(ctx, "/zookeeper/quota/x", nil, zk.ModePersistent)
	wantErr(t, "create under quota", err, nil)
}

// TestNoAuthReadLeavesNoWatch: a watching read the ACL refuses registers
// no watch.
func TestNoAuthReadLeavesNoWatch(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	owner := authed(t, s, "o", "o")
	_, err := owner.CreateACL(ctx, "/p", nil, zk.ModePersistent, zk.CreatorAll())
	must(t, err)
	other := s.Connect().(*simConn)
	_, _, ch, err := other.GetW(ctx, "/p")
	wantErr(t, "getW", err, zk.ErrNoAuth)
	_, _, ch2, err := other.ChildrenW(ctx, "/p")
	wantErr(t, "childrenW", err, zk.ErrNoAuth)
	s.mu.Lock()
	n := len(other.watches)
	s.mu.Unlock()
	if n != 0 || ch != nil || ch2 != nil {
		t.Fatalf("refused reads left %d watches", n)
	}
}

// TestFrameCountsACL: a create's frame holds its ACL as sent, so a longer
// ACL than the world's pushes a create that fits with it over
// jute.maxbuffer, alone or in a multi.
func TestFrameCountsACL(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	c := s.Connect()
	digest := zk.DigestACL(zk.PermAll, "user", "password")
	data := make([]byte, maxFrame-(frameHeader+frameCreate("/a", nil, nil)))
	_, err := c.CreateACL(ctx, "/a", data, zk.ModePersistent, digest)
	wantErr(t, "create whose ACL does not fit", err, zk.ErrConnectionLoss)
	_, err = c.CreateACL(ctx, "/a", data, zk.ModePersistent, nil)
	wantErr(t, "create with the world ACL", err, nil)
	data = make([]byte, maxFrame-frameMulti([]zk.Op{&zk.CreateOp{Path: "/b"}}))
	_, err = c.Multi(ctx, &zk.CreateOp{Path: "/b", Data: data, ACL: digest})
	wantErr(t, "multi whose ACL does not fit", err, zk.ErrConnectionLoss)
	_, err = c.Multi(ctx, &zk.CreateOp{Path: "/b", Data: data, ACL: zk.WorldACL(zk.PermAll)})
	wantErr(t, "multi with the world ACL", err, nil)
}

// Connect's options act as zk.Wrap's: the identity and the chroot hold,
// and a refused option panics (a test's own constant).
func TestConnectTakesOptions(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := t.Context()
	alice := s.Connect(zk.WithAuth("digest", []byte("alice:pw")), zk.WithChroot("/apps/a"))
	if _, err := alice.Create(ctx, "/x", nil, zk.ModePersistent); err != nil {
		t.Fatal(err)
	}
	bob := s.Connect(zk.WithAuth("digest", []byte("bob:pw")))
	if err := bob.Delete(ctx, "/apps/a/x", zk.AnyVersion); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("bob deleting alice's /apps/a/x: %v; want zk.ErrNoAuth", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Connect with a digest credential without a user did not panic")
		}
	}()
	s.Connect(zk.WithAuth("digest", []byte("no-colon")))
}

// Under a chroot the simulator rewrites a watch's path as it delivers the
// event (zk.RewriteWatchPath), as the real client does, so watch channels
// fill in the server's order: the chroot view starts no copying goroutine.
func TestChrootWatchDeliveredRelative(t *testing.T) {
	s := New()
	defer s.Close()
	c := s.Connect(zk.WithChroot("/r"))
	before := goleak.IgnoreCurrent()
	_, _, ch, err := c.ExistsW(t.Context(), "/x")
	if err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
	if _, err := c.Create(t.Context(), "/x", nil, zk.ModePersistent); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Type != zk.EventNodeCreated || ev.Path != "/x" {
		t.Fatalf("event %+v; want NodeCreated on /x", ev)
	}
}
