package testkit_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Connect's options apply on both targets: an identity with the
// default ACL (CreatorAll plus world read) keeps another identity out, and
// a chroot keeps two connections apart, through the fault verbs.
func TestConnectWithAuthAndChroot(t *testing.T) {
	// Twice on the shared server: the second run's tree must have been
	// emptied of the first's nodes, which only their identity may delete.
	for range 2 {
		connectWithAuthAndChroot(t)
	}
}

func connectWithAuthAndChroot(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := t.Context()
		alice := tg.Connect(t, zk.WithAuth("digest", []byte("alice:a-pw")), zk.WithChroot("/apps/a"))
		bob := tg.Connect(t, zk.WithAuth("digest", []byte("bob:b-pw")), zk.WithChroot("/apps/a"))
		other := tg.Connect(t, zk.WithAuth("digest", []byte("alice:a-pw")), zk.WithChroot("/apps/b"))

		name, err := alice.Create(ctx, "/lock-", []byte("x"), zk.ModeEphemeralSequential)
		if err != nil {
			t.Fatal(err)
		}
		if zk.Parent(name) != "/" {
			t.Fatalf("created %q, want a name relative to the chroot", name)
		}
		if d, _, err := bob.Get(ctx, name); err != nil || string(d) != "x" {
			t.Fatalf("bob reads %q, %v", d, err)
		}
		if err := bob.Delete(ctx, name, zk.AnyVersion); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("bob deletes alice's node: %v, want ErrNoAuth", err)
		}
		if kids, _, err := other.Children(ctx, "/"); err != nil || len(kids) != 0 {
			t.Fatalf("the /apps/b chroot sees %v, %v", kids, err)
		}

		// Watch events and multi results are relative to the chroot.
		_, _, w, err := other.ExistsW(ctx, "/later")
		if err != nil {
			t.Fatal(err)
		}
		res, err := other.Multi(ctx, &zk.CreateOp{Path: "/later"}, &zk.CreateOp{Path: "/later/s-", Mode: zk.ModePersistentSequential})
		if err != nil || res[0].Path != "/later" || zk.Parent(res[1].Path) != "/later" {
			t.Fatalf("multi under a chroot: %+v, %v", res, err)
		}
		select {
		case ev := <-w:
			if ev.Type != zk.EventNodeCreated || ev.Path != "/later" {
				t.Fatalf("watch event under a chroot: %+v", ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event")
		}

		// The identity survives a reconnect and an expiry.
		if _, err := alice.Create(ctx, "/data", nil, zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		tg.Disconnect(t, alice)
		tg.Reconnect(t, alice)
		if _, err := alice.Set(ctx, "/data", []byte("1"), zk.AnyVersion); err != nil {
			t.Fatalf("set after a reconnect: %v", err)
		}
		tg.Expire(t, alice)
		if _, err := alice.Set(ctx, "/data", []byte("2"), zk.AnyVersion); err != nil {
			t.Fatalf("set on the new session: %v", err)
		}
		kids, _, err := alice.Children(ctx, "/")
		slices.Sort(kids)
		if err != nil || !slices.Equal(kids, []string{"data"}) {
			t.Fatalf("after the expiry the chroot has %v, %v (the ephemeral should be gone)", kids, err)
		}
	})
}
