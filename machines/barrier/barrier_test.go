package barrier_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
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

// handle is the shape both handles have.
type handle interface {
	Path() string
	ID() string
	State() events.State
	Subscribe(opts ...events.SubscribeOption) *events.Subscription
	Close() error
}

// Both handles have one shape: Path; ID (WithID's, or a UUID); State,
// START until Close and STOP after; Subscribe; Close, whose first result
// every later call returns. A call waiting at Close, and every call after,
// returns ErrClosed, which matches zkrecipes.ErrClosed.
func TestHandleShape(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/barrier/shape"
		c := tg.Connect(t)
		owner, err := barrier.New(c, path, barrier.WithCloseTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer owner.Close()
		if err := owner.Set(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := barrier.New(c, path, barrier.WithID("b1"))
		if err != nil {
			t.Fatal(err)
		}
		if anon, _ := barrier.New(c, path); len(anon.ID()) != 36 || anon.Close() != nil {
			t.Errorf("ID without WithID: %q, want a UUID", anon.ID())
		}
		d := newDouble(t, c, path+"/double", 1, barrier.WithID("d1"))
		waiting := make(chan error, 1)
		go func() { waiting <- b.Wait(ctx) }()
		for !slices.Contains(testkit.WatchedPaths(t, tg, c), path) {
			waitAny(t)
		}
		if err := d.Enter(ctx); err != nil {
			t.Fatal(err)
		}
		calls := map[string][]func() error{
			"b1": {func() error { return b.Set(ctx) }, func() error { return b.Remove(ctx) }, func() error { return b.Wait(ctx) }},
			"d1": {func() error { return d.Enter(ctx) }, func() error { return d.Leave(ctx) }},
		}
		for _, h := range []handle{b, d} {
			if h.Path() != path && h.Path() != path+"/double" || h.State() == events.StateStop {
				t.Errorf("%s: path %q, state %s", h.ID(), h.Path(), h.State())
			}
			sub := h.Subscribe()
			if err := h.Close(); err != nil {
				t.Fatalf("%s: Close = %v", h.ID(), err)
			}
			testkit.WaitEvent(t, sub, events.StopComplete)
			if err := h.Close(); err != nil || h.State() != events.StateStop {
				t.Errorf("%s: second Close = %v, state %s", h.ID(), err, h.State())
			}
			for i, f := range calls[h.ID()] {
				if err := f(); !errors.Is(err, barrier.ErrClosed) || !errors.Is(err, zkrecipes.ErrClosed) {
					t.Errorf("%s: call %d after Close = %v, want ErrClosed", h.ID(), i, err)
				}
			}
		}
		if err := <-waiting; !errors.Is(err, barrier.ErrClosed) {
			t.Errorf("Wait at Close = %v, want ErrClosed", err)
		}
		// A handle whose connection is closed stops by itself.
		c2 := tg.Connect(t)
		b2, _ := barrier.New(c2, path)
		go func() { waiting <- b2.Wait(ctx) }()
		for !slices.Contains(testkit.WatchedPaths(t, tg, c2), path) {
			waitAny(t)
		}
		c2.Close()
		if err := <-waiting; !errors.Is(err, barrier.ErrClosed) {
			t.Errorf("Wait as its connection closed = %v, want ErrClosed", err)
		}
		for b2.State() != events.StateStop {
			waitAny(t)
		}
		if err := b2.Set(ctx); !errors.Is(err, barrier.ErrClosed) || b2.Close() != nil {
			t.Errorf("Set after the connection closed = %v, want ErrClosed", err)
		}
	})
}

// Wait goes on through the end of its session: its watch is made again on
// the next, and it returns once the barrier is removed.
func TestBarrierWaitThroughAnExpiry(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/barrier/simple/expiry"
		c := tg.Connect(t)
		owner, _ := barrier.New(tg.Connect(t), path)
		waiter, _ := barrier.New(c, path)
		sub := waiter.Subscribe()
		defer sub.Close()
		if err := owner.Set(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- waiter.Wait(ctx) }()
		for !slices.Contains(testkit.WatchedPaths(t, tg, c), path) {
			waitAny(t)
		}
		tg.Expire(t, c)
		testkit.WaitEvent(t, sub, events.Lost)
		for !slices.Contains(testkit.WatchedPaths(t, tg, c), path) {
			waitAny(t) // the watch, made again on the new session
		}
		select {
		case err := <-done:
			t.Fatalf("Wait returned with the barrier set: %v", err)
		default:
		}
		if err := owner.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
