package zk

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zkrecipes/zkrecipes"
)

// listener accepts connections and counts them, answering none: the
// address of a server that must never be dialled.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), accepted
}

func TestBadOptionsAreRefusedBeforeAnythingIsSent(t *testing.T) {
	addr, accepted := countingListener(t)
	digest := WithAuth("digest", []byte("alice:pw"))
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"digest without a colon", []Option{WithAuth("digest", []byte("alice"))}},
		{"digest without a user", []Option{WithAuth("digest", []byte(":pw"))}},
		{"auth without a scheme", []Option{WithAuth("", []byte("x"))}},
		{"ACL without permissions", []Option{digest, WithACL(ACL{Scheme: "world", ID: "anyone"})}},
		{"ACL with unknown bits", []Option{WithACL(ACL{Perms: 64, Scheme: "world", ID: "anyone"})}},
		{"ACL without a scheme", []Option{WithACL(ACL{Perms: PermAll, ID: "anyone"})}},
		{"empty ACL", []Option{WithACL()}},
		{"relative chroot", []Option{WithChroot("apps/billing")}},
		{"chroot with a trailing slash", []Option{WithChroot("/apps/")}},
		{"CreatorAll without WithAuth", []Option{WithACL(CreatorAll()...)}},
		{"nil TLS config", []Option{WithTLS(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Connect(testCtx(t, 5*time.Second), []string{addr}, tc.opts...)
			if c != nil || !errors.Is(err, ErrInvalidOption) || !errors.Is(err, ErrBadArguments) ||
				!errors.Is(err, zkrecipes.ErrInvalidOption) {
				t.Fatalf("Connect = %v, %v; want ErrInvalidOption (ErrBadArguments, zkrecipes.ErrInvalidOption)", c, err)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Fatalf("error text %q shows the credential", err)
			}
			w, err := Wrap(testCtx(t, 5*time.Second), nopConn{}, tc.opts...)
			if w != nil || !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("Wrap = %v, %v; want ErrInvalidOption", w, err)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections were made", n)
	}
}

func TestWrapNeedsAConnThatCanAuthenticate(t *testing.T) {
	w, err := Wrap(t.Context(), nopConn{}, WithAuth("digest", []byte("u:p")))
	if w != nil || !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Wrap = %v, %v; want ErrInvalidOption", w, err)
	}
	if w, err := Wrap(t.Context(), nil); w != nil || !errors.Is(err, ErrClosed) {
		t.Fatalf("Wrap(nil) = %v, %v; want ErrClosed", w, err)
	}
}

func TestValidateACL(t *testing.T) {
	for _, tc := range []struct {
		name string
		acl  []ACL
		ok   bool
	}{
		{"world all", WorldACL(PermAll), true},
		{"creator all and world read", append(CreatorAll(), WorldACL(PermRead)...), true},
		{"digest", DigestACL(PermRead|PermWrite, "u", "p"), true},
		{"ip", []ACL{{Perms: PermRead, Scheme: "ip", ID: "10.0.0.0/8"}}, true},
		{"nil", nil, false},
		{"no permissions", []ACL{{Scheme: "world", ID: "anyone"}}, false},
		{"unknown bits", []ACL{{Perms: PermAll | 1<<5, Scheme: "world", ID: "anyone"}}, false},
		{"no scheme", []ACL{{Perms: PermRead, ID: "anyone"}}, false},
		{"world someone", []ACL{{Perms: PermRead, Scheme: "world", ID: "someone"}}, false},
		{"digest without hash", []ACL{{Perms: PermRead, Scheme: "digest", ID: "u"}}, false},
		{"second entry bad", append(WorldACL(PermRead), ACL{Scheme: "auth"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateACL(tc.acl)
			if tc.ok != (err == nil) || (err != nil && (!errors.Is(err, ErrBadArguments) || !errors.Is(err, zkrecipes.ErrInvalidOption))) {
				t.Fatalf("ValidateACL(%v) = %v, want ok=%v", tc.acl, err, tc.ok)
			}
		})
	}
}

// nodeACL reads path's ACL with go-zookeeper (Conn has no GetACL).
func nodeACL(t *testing.T, c Conn, path string) []ACL {
	t.Helper()
	cl, ok := Underlying[*client](c)
	if !ok {
		t.Fatalf("%T has no client under it", c)
	}
	acl, _, err := cl.gz.GetACL(path)
	if err != nil {
		t.Fatalf("GetACL(%s): %v", path, err)
	}
	out := make([]ACL, len(acl))
	for i, a := range acl {
		out[i] = ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out
}

func TestAuthCreatorAllByDefault(t *testing.T) {
	addr := needServer(t)
	ctx := testCtx(t, 30*time.Second)
	alice := connect(t, addr, WithAuth("digest", []byte("alice:alice-pw")))
	bob := connect(t, addr, WithAuth("digest", []byte("bob:bob-pw")))
	anon := connect(t, addr)

	root := testRoot(t, alice)
	node := root + "/n"
	if _, err := alice.Create(ctx, node, []byte("a"), ModePersistent); err != nil {
		t.Fatal(err)
	}
	want := []ACL{
		{Perms: PermAll, Scheme: "digest", ID: DigestID("alice", "alice-pw")},
		{Perms: PermRead, Scheme: "world", ID: "anyone"},
	}
	for _, p := range []string{root, node} {
		if got := nodeACL(t, alice, p); !slices.Equal(got, want) {
			t.Fatalf("ACL of %s = %v, want %v", p, got, want)
		}
	}

	for name, other := range map[string]Conn{"bob": bob, "anonymous": anon} {
		if d, _, err := other.Get(ctx, node); err != nil || string(d) != "a" {
			t.Fatalf("%s reads %q, %v; want world read", name, d, err)
		}
		if _, err := other.Set(ctx, node, []byte("b"), AnyVersion); !errors.Is(err, ErrNoAuth) {
			t.Fatalf("%s sets: %v, want ErrNoAuth", name, err)
		}
		if err := other.Delete(ctx, node, AnyVersion); !errors.Is(err, ErrNoAuth) {
			t.Fatalf("%s deletes: %v, want ErrNoAuth", name, err)
		}
		if _, err := other.Create(ctx, node+"/child", nil, ModePersistent); !errors.Is(err, ErrNoAuth) {
			t.Fatalf("%s creates a child: %v, want ErrNoAuth", name, err)
		}
		if _, err := other.Multi(ctx, &SetOp{Path: node, Data: []byte("m"), Version: AnyVersion}); !errors.Is(err, ErrNoAuth) {
			t.Fatalf("%s multi: %v, want ErrNoAuth", name, err)
		}
	}
	// The same identity on another session may do everything.
	alice2 := connect(t, addr, WithAuth("digest", []byte("alice:alice-pw")))
	if _, err := alice2.Set(ctx, node, []byte("c"), AnyVersion); err != nil {
		t.Fatalf("alice's second session sets: %v", err)
	}
	if _, err := alice2.Create(ctx, node+"/child", nil, ModePersistent); err != nil {
		t.Fatalf("alice's second session creates a child: %v", err)
	}
}

func TestConnectRetriesAnAuthLostWithTheConnection(t *testing.T) {
	p := newProxy(t, needServer(t))
	p.DropAndCut(wireOpSetAuth)
	c := connect(t, p.Addr(), WithAuth("digest", []byte("retry:pw")))
	root := testRoot(t, c)
	if got := nodeACL(t, c, root); got[0] != (ACL{Perms: PermAll, Scheme: "digest", ID: DigestID("retry", "pw")}) {
		t.Fatalf("ACL %v: the session has not the identity", got)
	}
}

func TestWrongDigestPasswordIsAnotherIdentity(t *testing.T) {
	addr := needServer(t)
	ctx := testCtx(t, 30*time.Second)
	alice := connect(t, addr, WithAuth("digest", []byte("alice:right")))
	root := testRoot(t, alice)
	// Connect succeeds: ZooKeeper does not refuse a digest, whatever the password.
	wrong := connect(t, addr, WithAuth("digest", []byte("alice:wrong")))
	if _, err := wrong.Set(ctx, root, nil, AnyVersion); !errors.Is(err, ErrNoAuth) {
		t.Fatalf("set with the wrong password: %v, want ErrNoAuth", err)
	}
}

func TestACLOptions(t *testing.T) {
	addr := needServer(t)
	ctx := testCtx(t, 30*time.Second)
	readOnly := WorldACL(PermRead | PermCreate | PermDelete)
	t.Run("WithACL", func(t *testing.T) {
		c := connect(t, addr, WithACL(readOnly...))
		root := testRoot(t, c)
		if got := nodeACL(t, c, root); !slices.Equal(got, readOnly) {
			t.Fatalf("ACL %v, want %v", got, readOnly)
		}
		// A CreateOp with no ACL takes the connection's, one with an ACL its own.
		res, err := c.Multi(ctx, &CreateOp{Path: root + "/a"}, &CreateOp{Path: root + "/b", ACL: WorldACL(PermAll)})
		if err != nil {
			t.Fatal(err)
		}
		if got := nodeACL(t, c, res[0].Path); !slices.Equal(got, readOnly) {
			t.Fatalf("multi create: ACL %v, want %v", got, readOnly)
		}
		if got := nodeACL(t, c, res[1].Path); !slices.Equal(got, WorldACL(PermAll)) {
			t.Fatalf("multi create with its ACL: %v", got)
		}
	})
	t.Run("WithACLProvider", func(t *testing.T) {
		var asked []string
		c := connect(t, addr, WithACL(readOnly...), WithACLProvider(func(path string) []ACL {
			asked = append(asked, path)
			if strings.HasSuffix(path, "/open") {
				return WorldACL(PermAll)
			}
			return nil // WithACL's
		}))
		root := testRoot(t, c)
		if _, err := c.Create(ctx, root+"/open", nil, ModePersistent); err != nil {
			t.Fatal(err)
		}
		if got := nodeACL(t, c, root+"/open"); !slices.Equal(got, WorldACL(PermAll)) {
			t.Fatalf("provided ACL: %v", got)
		}
		if got := nodeACL(t, c, root); !slices.Equal(got, readOnly) {
			t.Fatalf("nil from the provider: %v, want WithACL's %v", got, readOnly)
		}
		if !slices.Equal(asked, []string{"/t-", root + "/open"}) {
			t.Fatalf("provider asked for %q", asked)
		}
	})
	t.Run("provider's bad ACL", func(t *testing.T) {
		p := newProxy(t, addr)
		c := connect(t, p.Addr(), WithACLProvider(func(string) []ACL { return []ACL{{Scheme: "world", ID: "anyone"}} }))
		before := p.Requests()
		if _, err := c.Create(ctx, "/bad", nil, ModePersistent); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("create with a provider's empty perms: %v", err)
		}
		if n := p.Requests() - before; n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})
}

func TestAuthRefusedByTheServerFailsConnectFast(t *testing.T) {
	addr := needServer(t)
	t0 := time.Now()
	c, err := Connect(testCtx(t, 20*time.Second), []string{addr}, WithAuth("no-such-scheme", []byte("x")))
	if c != nil || !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Connect = %v, %v; want ErrAuthFailed", c, err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("Connect took %v", d)
	}
	// TestMain's goleak check verifies that the connection's goroutines ended.
}

func TestDefaultACLWarnsOnceWithoutAuth(t *testing.T) {
	addr := needServer(t)
	for _, tc := range []struct {
		name string
		opts []Option
		warn bool
	}{
		{"no options", nil, true},
		{"auth", []Option{WithAuth("digest", []byte("u:p"))}, false},
		{"acl", []Option{WithACL(WorldACL(PermAll)...)}, false},
		{"provider", []Option{WithACLProvider(func(string) []ACL { return nil })}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := connect(t, addr, append(tc.opts, WithLogger(zerolog.New(zerolog.SyncWriter(&buf))))...)
			testRoot(t, c)
			testRoot(t, c)
			c.Close()
			n := strings.Count(buf.String(), "writable by anyone")
			if tc.warn && n != 1 || !tc.warn && n != 0 {
				t.Fatalf("%d warnings, want warn=%v:\n%s", n, tc.warn, buf.String())
			}
		})
	}
}

func TestAuthSurvivesConnectionLossAndExpiry(t *testing.T) {
	addr := needServer(t)
	p := newProxy(t, addr)
	var logs bytes.Buffer
	const password = "survivor-s3cret"
	c := connect(t, p.Addr(), WithAuth("digest", []byte("survivor:"+password)), WithSessionTimeout(time.Second),
		WithReconnectBackoff(5*time.Millisecond, 50*time.Millisecond), WithLogger(zerolog.New(zerolog.SyncWriter(&logs))))
	ctx := testCtx(t, 60*time.Second)
	root := testRoot(t, c)
	rec := record(t, c)
	var errs []error

	p.Cut()
	rec.expect(t, eventWait, StateSuspended, StateReconnected)
	if _, err := c.Set(ctx, root, []byte("after the cut"), AnyVersion); err != nil {
		t.Fatalf("set after a reconnect: %v", err)
	}

	observer := connect(t, addr)
	e, err := c.Create(ctx, root+"/e", nil, ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := observer.ExistsW(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	rec.expect(t, eventWait, StateSuspended)
	// The server expires the session: its ephemeral goes.
	if ev := waitWatch(t, gone, eventWait); ev.Type != EventNodeDeleted {
		t.Fatalf("observer saw %+v", ev)
	}
	p.Restore()
	rec.expect(t, eventWait, StateLost, StateConnected)
	if _, err := c.Set(ctx, root, []byte("after the expiry"), AnyVersion); err != nil {
		t.Fatalf("set on the new session: %v", err)
	}
	// A node the new session creates is the same identity's.
	if _, err := c.Create(ctx, root+"/new", nil, ModePersistent); err != nil {
		t.Fatal(err)
	}
	if got := nodeACL(t, c, root+"/new"); got[0].ID != DigestID("survivor", password) {
		t.Fatalf("new session's node ACL %v", got)
	}
	// Errors carry no credential either.
	bad := connect(t, addr, WithAuth("digest", []byte("survivor:wrong-"+password)))
	_, err = bad.Set(ctx, root, nil, AnyVersion)
	errs = append(errs, err)
	_, err = Connect(ctx, []string{addr}, WithAuth("unknown", []byte(password)))
	errs = append(errs, err)
	c.Close()
	for _, err := range errs {
		if err == nil || strings.Contains(err.Error(), password) {
			t.Fatalf("error %v: want one, without the password", err)
		}
	}
	if out := logs.String(); strings.Contains(out, password) || !strings.Contains(out, "recv loop terminated") {
		t.Fatalf("log shows the password, or is not the session's:\n%s", out)
	}
}

// nopConn is a Conn that must not be used.
type nopConn struct{ Conn }
