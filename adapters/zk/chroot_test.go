package zk

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseConnectString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		servers []string
		chroot  string
		err     error
	}{
		{"zk1:2181", []string{"zk1:2181"}, "", nil},
		{"zk1:2181,zk2:2182", []string{"zk1:2181", "zk2:2182"}, "", nil},
		{"zk1:2181,zk2:2182/apps/billing", []string{"zk1:2181", "zk2:2182"}, "/apps/billing", nil},
		{"zk1:2181/", []string{"zk1:2181"}, "", nil},
		{"zk1, zk2 /a", []string{"zk1", "zk2"}, "/a", nil},
		{"[::1]:2181,127.0.0.1:2181/x", []string{"[::1]:2181", "127.0.0.1:2181"}, "/x", nil},
		{"", nil, "", ErrNoServers},
		{"/apps", nil, "", ErrNoServers},
		{"zk1:2181,,zk2:2181", nil, "", ErrNoServers},
		{"zk1:2181/apps/", nil, "", ErrInvalidOption},
		{"zk1:2181/apps//x", nil, "", ErrInvalidOption},
		{"zk1:2181/apps/../x", nil, "", ErrInvalidOption},
	} {
		t.Run(tc.in, func(t *testing.T) {
			servers, chroot, err := ParseConnectString(tc.in)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || servers != nil || chroot != "" {
					t.Fatalf("= %q, %q, %v; want error %v", servers, chroot, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(servers, tc.servers) || chroot != tc.chroot {
				t.Fatalf("= %q, %q, %v; want %q, %q", servers, chroot, err, tc.servers, tc.chroot)
			}
		})
	}
}

func TestRelText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"zk: node does not exist: /r/a/b", "zk: node does not exist: /a/b"},
		{"zk: node does not exist: /r", "zk: node does not exist: /"},
		{`invalid path "/r/x/": trailing slash`, `invalid path "/x/": trailing slash`},
		{"/r/a and /r/b", "/a and /b"},
		{"/rx/a /x/r/a", "/rx/a /x/r/a"}, // not the chroot, or not at a path's start
	} {
		if got := relText(tc.in, "/r"); got != tc.want {
			t.Errorf("relText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestChroot(t *testing.T) {
	addr := needServer(t)
	ctx := testCtx(t, 30*time.Second)
	plain := connect(t, addr)
	base := testRoot(t, plain)
	servers, chroot, err := ParseConnectString(addr + base + "/a")
	if err != nil {
		t.Fatal(err)
	}
	a := connect(t, servers[0], WithChroot(chroot))
	b := connect(t, addr, WithChroot(base+"/b"))

	// The chroots were made; each is "/" to its connection.
	for _, p := range []string{base + "/a", base + "/b"} {
		if _, ok, err := plain.Exists(ctx, p); err != nil || !ok {
			t.Fatalf("chroot %s: exists %v, %v", p, ok, err)
		}
	}
	// The "same" path in both, at once.
	for _, c := range []Conn{a, b} {
		if _, err := c.Create(ctx, "/lock", nil, ModePersistent); err != nil {
			t.Fatal(err)
		}
	}
	name, err := a.Create(ctx, "/lock/m-", []byte("a"), ModeEphemeralSequential)
	if err != nil || !strings.HasPrefix(name, "/lock/m-") {
		t.Fatalf("created %q, %v; want a chroot-relative name", name, err)
	}
	if kids, _, err := b.Children(ctx, "/lock"); err != nil || len(kids) != 0 {
		t.Fatalf("b sees %v, %v under its /lock", kids, err)
	}
	if d, _, err := plain.Get(ctx, base+"/a"+name); err != nil || string(d) != "a" {
		t.Fatalf("the server has %q, %v at %s", d, err, base+"/a"+name)
	}
	if kids, _, err := a.Children(ctx, "/"); err != nil || !slices.Equal(kids, []string{"lock"}) {
		t.Fatalf("a's root has %v, %v", kids, err)
	}

	// Watch events carry chroot-relative paths.
	_, _, dataW, err := a.GetW(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_, _, kidsW, err := a.ChildrenW(ctx, "/lock")
	if err != nil {
		t.Fatal(err)
	}
	_, _, existW, err := a.ExistsW(ctx, "/later")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, name, AnyVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Create(ctx, base+"/a/later", nil, ModePersistent); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		ch   <-chan WatchEvent
		want WatchEvent
	}{
		{dataW, WatchEvent{Type: EventNodeDeleted, Path: name}},
		{kidsW, WatchEvent{Type: EventNodeChildrenChanged, Path: "/lock"}},
		{existW, WatchEvent{Type: EventNodeCreated, Path: "/later"}},
	} {
		if ev := waitWatch(t, w.ch, eventWait); ev != w.want {
			t.Fatalf("watch event %+v, want %+v", ev, w.want)
		}
	}

	// Multi: paths in, created names out.
	res, err := a.Multi(ctx,
		&CreateOp{Path: "/lock/s-", Mode: ModePersistentSequential},
		&SetOp{Path: "/lock", Data: []byte("x"), Version: AnyVersion},
		&CheckOp{Path: "/later", Version: AnyVersion})
	if err != nil || !strings.HasPrefix(res[0].Path, "/lock/s-") {
		t.Fatalf("multi = %+v, %v", res, err)
	}
	if d, _, err := plain.Get(ctx, base+"/a/lock"); err != nil || string(d) != "x" {
		t.Fatalf("the multi's set: %q, %v", d, err)
	}
	// A failed multi's error names chroot-relative paths only.
	_, err = a.Multi(ctx, &DeleteOp{Path: "/missing", Version: AnyVersion})
	if !errors.Is(err, ErrNoNode) || strings.Contains(err.Error(), base) {
		t.Fatalf("failed multi: %v", err)
	}

	// Sync and the root itself.
	if err := a.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Exists(ctx, "/"); err != nil || !ok {
		t.Fatalf("a's / exists: %v, %v", ok, err)
	}
	// The client rewrote the watch paths itself: no goroutine copies them
	// (which would lose the order across watches).
	cl, _ := Underlying[*client](a)
	ctx2, m := a.(*chrootView).mapWatch(ctx)
	_, _, w, err := cl.ExistsW(ctx2, base+"/a/nothing")
	if err != nil || !m.taken || m.channel(w) != w {
		t.Fatalf("the client did not take the rewrite: taken %v, err %v", m.taken, err)
	}
}

func TestChrootAndACLTogether(t *testing.T) {
	addr := needServer(t)
	ctx := testCtx(t, 30*time.Second)
	plain := connect(t, addr)
	base := testRoot(t, plain)
	var asked []string
	c := connect(t, addr, WithAuth("digest", []byte("c:pw")), WithChroot(base+"/svc"),
		WithACLProvider(func(p string) []ACL { asked = append(asked, p); return nil }))
	if _, err := c.Create(ctx, "/x", nil, ModePersistent); err != nil {
		t.Fatal(err)
	}
	// The provider sees chroot-relative paths: "/" for the chroot itself.
	if !slices.Equal(asked, []string{"/", "/x"}) {
		t.Fatalf("provider asked for %q", asked)
	}
	want := append([]ACL{{Perms: PermAll, Scheme: "digest", ID: DigestID("c", "pw")}}, WorldACL(PermRead)...)
	for _, p := range []string{base + "/svc", base + "/svc/x"} {
		// (ZooKeeper shows a digest's hash only to a reader with PermAdmin.)
		if got := nodeACL(t, c, p); !slices.Equal(got, want) {
			t.Fatalf("ACL of %s = %v, want %v", p, got, want)
		}
	}
	// A chroot that exists is used as it is, even by an identity that could
	// not create it.
	other := connect(t, addr, WithAuth("digest", []byte("other:pw")), WithChroot(base+"/svc"))
	if _, err := other.Create(ctx, "/y", nil, ModePersistent); !errors.Is(err, ErrNoAuth) {
		t.Fatalf("another identity creates in the chroot: %v, want ErrNoAuth", err)
	}
}
