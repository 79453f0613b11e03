package sim_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestMain stops the real server ForEachTarget starts, then checks for
// leaked goroutines.
func TestMain(m *testing.M) { testkit.Main(m) }

// TestACLConformance runs the ACL and authentication rules the simulator
// implements on the simulator and on a real ZooKeeper 3.8, with the same
// expectations: a refusal on one target and not on the other is a bug in
// the simulator. (It has the shape of a row of testkit's conformance
// table.)
func TestACLConformance(t *testing.T) {
	testkit.ForEachTarget(t, aclConformance)
}

// authenticator is a Conn that can add an identity: the simulator's and
// the adapter's.
type authenticator interface {
	AddAuth(ctx context.Context, scheme string, cred []byte) error
}

func addAuth(t *testing.T, c zk.Conn, scheme, cred string) error {
	t.Helper()
	a, ok := zk.Underlying[authenticator](c)
	if !ok {
		t.Fatalf("%T has no AddAuth", c)
	}
	return a.AddAuth(t.Context(), scheme, []byte(cred))
}

func aclConformance(t *testing.T, tg testkit.Target) {
	ctx := t.Context()
	check := func(what string, err, want error) {
		t.Helper()
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	owner := tg.Connect(t)
	if err := addAuth(t, owner, "digest", "owner:pw"); err != nil {
		t.Fatal(err)
	}
	// The nodes only the owner may delete go at the end, before the conns
	// close, so that the next test's tree can be emptied.
	t.Cleanup(func() {
		for _, p := range []string{"/acl/c/g", "/acl/c", "/acl/own", "/acl", "/ip-local", "/ip-other", "/nodel"} {
			_ = owner.Delete(context.Background(), p, -1)
		}
	})
	anon := tg.Connect(t)
	wrong := tg.Connect(t)
	if err := addAuth(t, wrong, "digest", "owner:guess"); err != nil {
		t.Fatalf("a wrong digest password: %v, want accepted (it is another identity)", err)
	}
	create := func(c zk.Conn, path string, mode zk.CreateMode, acl []zk.ACL) error {
		_, err := c.CreateACL(ctx, path, nil, mode, acl)
		return err
	}
	mine := zk.CreatorAll()
	mineWorldRead := append(zk.CreatorAll(), zk.WorldACL(zk.PermRead)...)
	check("owner creates /acl", create(owner, "/acl", zk.ModePersistent, mineWorldRead), nil)
	check("owner creates /acl/c", create(owner, "/acl/c", zk.ModePersistent, mine), nil)
	check("owner creates /acl/c/g", create(owner, "/acl/c/g", zk.ModePersistent, mine), nil)

	for name, c := range map[string]zk.Conn{"anonymous": anon, "wrong password": wrong} {
		try := func(what string, err, want error) { t.Helper(); check(name+": "+what, err, want) }
		_, _, err := c.Get(ctx, "/acl")
		try("get a world-readable node", err, nil)
		_, _, err = c.Children(ctx, "/acl")
		try("children of a world-readable node", err, nil)
		_, _, err = c.Get(ctx, "/acl/c")
		try("get", err, zk.ErrNoAuth)
		_, _, _, err = c.GetW(ctx, "/acl/c")
		try("getW", err, zk.ErrNoAuth)
		_, _, err = c.Children(ctx, "/acl/c")
		try("children", err, zk.ErrNoAuth)
		_, ok, err := c.Exists(ctx, "/acl/c")
		try("exists", err, nil)
		if !ok {
			t.Errorf("%s: exists says /acl/c is missing", name)
		}
		_, err = c.Set(ctx, "/acl", []byte("x"), -1)
		try("set", err, zk.ErrNoAuth)
		try("create a child", create(c, "/acl/x", zk.ModePersistent, nil), zk.ErrNoAuth)
		try("delete a child", c.Delete(ctx, "/acl/c", -1), zk.ErrNoAuth)
		try("sync", c.Sync(ctx, "/acl/c"), nil)
		// Where the ACL check falls among the other errors.
		try("delete a missing child", c.Delete(ctx, "/acl/missing", -1), zk.ErrNoAuth)
		try("delete with a bad version", c.Delete(ctx, "/acl/c", 99), zk.ErrNoAuth)
		_, err = c.Set(ctx, "/acl/missing", nil, -1)
		try("set a missing node", err, zk.ErrNoNode)
		_, err = c.Set(ctx, "/acl", nil, 99)
		try("set with a bad version", err, zk.ErrNoAuth)
		try("create an existing node", create(c, "/acl/c", zk.ModePersistent, nil), zk.ErrNoAuth)
		try("create under a missing parent", create(c, "/acl/missing/x", zk.ModePersistent, nil), zk.ErrNoNode)
		res, err := c.Multi(ctx,
			&zk.CreateOp{Path: "/free", ACL: zk.WorldACL(zk.PermAll)},
			&zk.SetOp{Path: "/acl", Version: -1},
			&zk.CheckOp{Path: "/acl/c", Version: -1},
		)
		try("multi", err, zk.ErrNoAuth)
		if len(res) != 3 || res[0].Err != nil || !errors.Is(res[1].Err, zk.ErrNoAuth) || !errors.Is(res[2].Err, zk.ErrRuntimeInconsistency) {
			t.Errorf("%s: multi results %+v", name, res)
		}
		_, err = c.Multi(ctx, &zk.CheckOp{Path: "/acl/c", Version: -1})
		try("multi check", err, zk.ErrNoAuth)
		if _, ok, _ := c.Exists(ctx, "/free"); ok {
			t.Errorf("%s: a refused multi applied its first op", name)
		}
	}
	// InvalidACL, before the parent's existence.
	check("anonymous CreatorAll", create(anon, "/mine", zk.ModePersistent, mine), zk.ErrBadArguments)
	check("anonymous CreatorAll under a missing parent", create(anon, "/missing/mine", zk.ModePersistent, mine), zk.ErrBadArguments)
	check("empty ACL", create(owner, "/empty", zk.ModePersistent, []zk.ACL{}), zk.ErrBadArguments)
	check("unknown scheme", create(owner, "/sasl", zk.ModePersistent, []zk.ACL{{Perms: zk.PermAll, Scheme: "sasl", ID: "u"}}), zk.ErrBadArguments)
	check("malformed digest id", create(owner, "/bad", zk.ModePersistent, []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "user"}}), zk.ErrBadArguments)
	check("world someone", create(owner, "/bad", zk.ModePersistent, []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "someone"}}), zk.ErrBadArguments)
	// The owner's identity, another session's: a DigestACL names it too.
	_, err := anon.CreateACL(ctx, "/acl/own", nil, zk.ModePersistent, nil)
	check("anonymous create under /acl", err, zk.ErrNoAuth)
	_, err = owner.CreateACL(ctx, "/acl/own", nil, zk.ModePersistent, zk.DigestACL(zk.PermAll, "owner", "pw"))
	check("owner creates with DigestACL", err, nil)
	_, err = owner.Set(ctx, "/acl/own", []byte("x"), -1)
	check("owner sets a DigestACL node", err, nil)

	// Every client has the identity ip:127.0.0.1.
	check("ip:127.0.0.0/8 node", create(owner, "/ip-local", zk.ModePersistent, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.0/8"}}), nil)
	check("ip:10.0.0.1 node", create(owner, "/ip-other", zk.ModePersistent, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "10.0.0.1"}}), nil)
	check("ip prefix too long", create(owner, "/bad", zk.ModePersistent, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "10.0.0.0/33"}}), zk.ErrBadArguments)
	check("AddAuth ip", addAuth(t, anon, "ip", ""), nil)
	check("AddAuth digest without a password", addAuth(t, anon, "digest", "user"), zk.ErrBadArguments)
	_, err = anon.Set(ctx, "/ip-local", nil, -1)
	check("set an ip:127.0.0.0/8 node", err, nil)
	_, err = anon.Set(ctx, "/ip-other", nil, -1)
	check("set an ip:10.0.0.1 node", err, zk.ErrNoAuth)

	// A session's end deletes its ephemerals whatever the ACL says.
	noDelete := []zk.ACL{{Perms: zk.PermAll &^ zk.PermDelete, Scheme: "world", ID: "anyone"}}
	eph := tg.Connect(t)
	check("create /nodel", create(eph, "/nodel", zk.ModePersistent, noDelete), nil)
	check("create /nodel/e", create(eph, "/nodel/e", zk.ModeEphemeral, nil), nil)
	check("delete /nodel/e", eph.Delete(ctx, "/nodel/e", -1), zk.ErrNoAuth)
	check("close", eph.Close(), nil)
	if _, ok, err := anon.Exists(ctx, "/nodel/e"); ok || err != nil {
		t.Errorf("the ephemeral of a closed session: exists %v, %v", ok, err)
	}

	// The identity survives a reconnect and an expiry (go-zookeeper sends
	// it again before any other request).
	tg.Disconnect(t, owner)
	tg.Reconnect(t, owner)
	_, err = owner.Set(ctx, "/acl/c", []byte("1"), -1)
	check("owner's set after a reconnect", err, nil)
	tg.Expire(t, owner)
	_, err = owner.Set(ctx, "/acl/c", []byte("2"), -1)
	check("owner's set in its new session", err, nil)

	// An unknown scheme is refused and the server closes the connection;
	// the session stays, and so do the identities the conn had.
	states := make(chan zk.SessionState, 16)
	cancel := owner.Subscribe(func(e zk.SessionEvent) {
		select {
		case states <- e.State:
		default:
		}
	})
	defer cancel()
	id := owner.SessionID()
	check("AddAuth with an unknown scheme", addAuth(t, owner, "nosuch", "x"), zk.ErrAuthFailed)
	wait, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	var seen []zk.SessionState
	for len(seen) == 0 || seen[len(seen)-1] != zk.StateReconnected {
		select {
		case s := <-states:
			seen = append(seen, s)
		case <-wait.Done():
			t.Fatalf("after a refused authentication: states %v, want SUSPENDED, RECONNECTED", seen)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint([]zk.SessionState{zk.StateSuspended, zk.StateReconnected}) || owner.SessionID() != id {
		t.Errorf("after a refused authentication: states %v, session %#x (was %#x)", seen, owner.SessionID(), id)
	}
	_, err = owner.Set(ctx, "/acl/c", []byte("3"), -1)
	check("owner's set after a refused authentication", err, nil)
}
