package lock_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Holders shows the current holder only, never a waiter, with its id
// (WithID's, or the handle's random one); Curator's nodes count; a missing path has none, and nothing is created.
func TestHolders(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/holders/lock"
		c := tg.Connect(t)
		if hs, err := lock.Holders(ctx, c, path); err != nil || len(hs) != 0 {
			t.Fatalf("holders of a missing path: %v, %v", hs, err)
		}
		if _, ok, err := c.Exists(ctx, path); ok || err != nil {
			t.Fatalf("Holders created %s (%v)", path, err)
		}
		a, b := newLock(t, c, path, lock.WithID("a")), newLock(t, tg.Connect(t), path)
		ga, err := a.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bch := acquireAsync(ctx, b)
		eventually(t, c, path, "the waiter queued", func(k []string) bool { return len(k) == 2 })
		hs, err := lock.Holders(ctx, c, path)
		if err != nil || len(hs) != 1 || hs[0].Node != ga.Node() || hs[0].Token != ga.Token() || hs[0].ID != "a" {
			t.Fatalf("holders: %+v, %v (want %s)", hs, err, ga.Node())
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-bch
		if r.err != nil {
			t.Fatal(r.err)
		}
		if hs, err := lock.Holders(ctx, c, path); err != nil || len(hs) != 1 || hs[0].Node != r.g.Node() || hs[0].ID != b.ID() {
			t.Fatalf("holders after the hand-over: %+v, %v", hs, err)
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// A Curator participant's node, with its id as data, holds.
		// The lock's directory is a container: empty now, the server may
		// reap it at any moment, so make it again if the create finds it
		// gone (a new container is not reaped before its first child).
		cur := tg.Connect(t)
		node, err := cur.Create(ctx, path+"/_c_0f0f0f0f-1111-2222-3333-444444444444-lock-", []byte("curator-1"), zk.ModeEphemeralSequential)
		for errors.Is(err, zk.ErrNoNode) {
			ensureDir(t, cur, path)
			node, err = cur.Create(ctx, path+"/_c_0f0f0f0f-1111-2222-3333-444444444444-lock-", []byte("curator-1"), zk.ModeEphemeralSequential)
		}
		if err != nil {
			t.Fatal(err)
		}
		bch = acquireAsync(ctx, b)
		eventually(t, c, path, "ours queued behind Curator's", func(k []string) bool { return len(k) == 2 })
		hs, err = lock.Holders(ctx, c, path)
		if err != nil || len(hs) != 1 || hs[0].Node != node || hs[0].ID != "curator-1" || hs[0].Token == 0 {
			t.Fatalf("holders with Curator's node: %+v, %v (want %s)", hs, err, node)
		}
		if err := cur.Delete(ctx, node, zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if r := <-bch; r.err != nil {
			t.Fatal(r.err)
		}
	})
}

func TestHoldersBadInput(t *testing.T) {
	ctx := ctxT(t)
	sim := testkit.NewSim()
	defer sim.Close()
	c := sim.Connect()
	defer c.Close()
	for _, p := range []string{"", "rel", "/a/", "/"} {
		if _, err := lock.Holders(ctx, c, p); !errors.Is(err, zk.ErrInvalidPath) {
			t.Errorf("Holders(%q) = %v, want zk.ErrInvalidPath", p, err)
		}
	}
	if _, err := lock.Holders(ctx, nil, "/a"); !errors.Is(err, lock.ErrClosed) {
		t.Errorf("Holders on a nil conn = %v, want ErrClosed", err)
	}
}
