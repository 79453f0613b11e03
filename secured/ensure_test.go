package secured_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A directory an administrator made for a service, under a parent the
// service may not write, is used as it is: the server answers the create
// of an existing node under that parent with NoAuth, not NodeExists.
func TestRecipeInADirectoryMadeForIt(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := t.Context()
		admin := tg.Connect(t, zk.WithAuth("digest", []byte("admin:pw")))
		svc := tg.Connect(t, zk.WithAuth("digest", []byte("svc:pw")))
		// /ops is the admin's alone (anyone reads); /ops/locks is anyone's.
		if _, err := admin.Create(ctx, "/ops", nil, zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CreateACL(ctx, "/ops/locks", nil, zk.ModePersistent, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.Delete(ctx, "/ops/locks", zk.AnyVersion)
			_ = admin.Delete(ctx, "/ops", zk.AnyVersion)
		})
		if _, err := svc.Create(ctx, "/ops/other", nil, zk.ModePersistent); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("svc creating beside its directory: %v; want zk.ErrNoAuth", err)
		}
		if err := zk.EnsurePath(ctx, svc, "/ops/locks", zk.ModePersistent); err != nil {
			t.Fatalf("EnsurePath of the existing /ops/locks: %v", err)
		}
		if err := zk.EnsurePath(ctx, svc, "/ops/missing", zk.ModePersistent); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("EnsurePath of a missing /ops/missing: %v; want zk.ErrNoAuth", err)
		}
		l, err := lock.New(svc, "/ops/locks", lock.WithACL(zk.WorldACL(zk.PermAll)...))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatalf("lock in /ops/locks: %v", err)
		}
		if err := g.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
