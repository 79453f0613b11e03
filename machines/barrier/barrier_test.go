package barrier_test

import (
	"context"
	"errors"
	"testing"
	"time"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Wait returns at once on a barrier that is not set, blocks on one that
// is, and returns when it is removed; Set and Remove are idempotent.
func TestBarrierSetWaitRemove(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/barrier/simple/deploy"
		owner, err := barrier.New(tg.Connect(t), path)
		if err != nil {
			t.Fatal(err)
		}
		wc := tg.Connect(t)
		waiter, err := barrier.New(wc, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := waiter.Wait(ctx); err != nil {
			t.Fatalf("Wait on a barrier not set: %v", err)
		}
		if ws := testkit.WatchedPaths(t, tg, wc); len(ws) != 0 {
			t.Fatalf("Wait on a barrier not set left watches on %v", ws)
		}
		for range 2 {
			if err := owner.Set(ctx); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- waiter.Wait(ctx) }()
		c := tg.Connect(t)
		testkit.AwaitNode(t, c, path)
		// Wait holds while the node exists; a cancelled Wait returns ctx's
		// error.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := waiter.Wait(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait with a cancelled ctx: %v", err)
		}
		select {
		case err := <-done:
			t.Fatalf("Wait returned with the barrier set: %v", err)
		default:
		}
		for range 2 {
			if err := owner.Remove(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// Wait goes on through a cut connection, and returns once the barrier is
// removed meanwhile and the connection is back.
func TestBarrierWaitThroughADisconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/barrier/simple/cut"
		c := tg.Connect(t)
		owner, _ := barrier.New(tg.Connect(t), path)
		waiter, _ := barrier.New(c, path)
		if err := owner.Set(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- waiter.Wait(ctx) }()
		tg.Disconnect(t, c)
		if err := owner.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		tg.Reconnect(t, c)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestBarrierBadInput(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c := tg.Connect(t)
		for _, p := range []string{"", "x", "/", "/a/"} {
			if _, err := barrier.New(c, p); !errors.Is(err, zk.ErrInvalidPath) {
				t.Errorf("New(%q): %v, want ErrInvalidPath", p, err)
			}
		}
		if _, err := barrier.New(nil, "/a"); !errors.Is(err, barrier.ErrClosed) {
			t.Errorf("nil conn: %v", err)
		}
		for _, o := range []barrier.Option{barrier.WithCloseTimeout(0), barrier.WithTracerProvider(nil), barrier.WithMeterProvider(nil)} {
			if _, err := barrier.New(c, "/a", o); !errors.Is(err, barrier.ErrInvalidOption) {
				t.Errorf("New with a bad option: %v, want ErrInvalidOption", err)
			}
		}
	})
}

// The package's sentinels match the ones every recipe shares.
func TestSentinelsMatchZkrecipes(t *testing.T) {
	for _, c := range []struct{ ours, shared error }{
		{barrier.ErrClosed, zkrecipes.ErrClosed}, {barrier.ErrSessionLost, zkrecipes.ErrSessionLost},
		{barrier.ErrInvalidOption, zkrecipes.ErrInvalidOption}, {barrier.ErrCleanupPending, zkrecipes.ErrCleanupPending},
	} {
		if !errors.Is(c.ours, c.shared) {
			t.Errorf("%v does not match %v", c.ours, c.shared)
		}
	}
}

// Both handles take the one Option type; ID is WithID's, or a UUID.
func TestHandleIDs(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		c := tg.Connect(t)
		b, err := barrier.New(c, "/barrier/id", barrier.WithID("b1"), barrier.WithCloseTimeout(time.Second))
		if err != nil || b.ID() != "b1" {
			t.Fatalf("New with WithID: %v, ID %q", err, b.ID())
		}
		if b, _ := barrier.New(c, "/barrier/id"); len(b.ID()) != 36 {
			t.Errorf("ID without WithID: %q, want a UUID", b.ID())
		}
		if d := newDouble(t, c, "/barrier/id", 2, barrier.WithID("d1")); d.ID() != "d1" {
			t.Errorf("DoubleBarrier ID %q, want d1", d.ID())
		}
	})
}
