package twophase_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A participant has the handle shape every recipe has: Path, ID, State,
// Subscribe (START first), and a Close whose result every later call repeats, after
// which Serve returns ErrClosed (matching zkrecipes.ErrClosed).
func TestParticipantShape(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		p, err := twophase.NewParticipant(connect(t, tg), root, "a", newRec())
		if err != nil {
			t.Fatal(err)
		}
		if p.Path() != root || p.ID() != "a" || p.State() != events.StateStart {
			t.Errorf("Path %q, ID %q, State %s", p.Path(), p.ID(), p.State())
		}
		sub := p.Subscribe()
		defer sub.Close()
		if ev := <-sub.C; ev.Type != events.Start || ev.Instance != "a" {
			t.Errorf("first event %v, want START", ev)
		}
		first := p.Close()
		if err := p.Close(); err != first {
			t.Errorf("Close again: %v, first %v", err, first)
		}
		if err := p.Serve(ctx); !errors.Is(err, twophase.ErrClosed) || !errors.Is(err, zkrecipes.ErrClosed) {
			t.Errorf("Serve after Close: %v", err)
		}
		if p.State() != events.StateStop {
			t.Errorf("State after Close: %s", p.State())
		}
		for range sub.C { // ended by Close
		}
	})
}

// Close with the connection down waits WithCloseTimeout for the
// deregistration, returns ErrCleanupPending, and the registration node
// goes once the same session is back.
func TestParticipantCloseWhileDisconnected(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		conn, obs := connect(t, tg), connect(t, tg)
		p, err := twophase.NewParticipant(conn, root, "a", newRec(), twophase.WithCloseTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Serve(ctx) }()
		waitExists(t, obs, root+"/participants/a")
		tg.Disconnect(t, conn)
		first := p.Close()
		if !errors.Is(first, twophase.ErrCleanupPending) || !errors.Is(first, zkrecipes.ErrCleanupPending) {
			t.Errorf("Close while disconnected: %v, want ErrCleanupPending", first)
		}
		if err := <-done; !errors.Is(err, twophase.ErrClosed) {
			t.Errorf("Serve: %v, want ErrClosed", err)
		}
		if err := p.Close(); err != first {
			t.Errorf("Close again: %v, first %v", err, first)
		}
		tg.Reconnect(t, conn)
		waitGone(t, obs, root+"/participants/a")
	})
}

// A coordinator has the handle shape too: Path, ID, State, Subscribe
// (START first), a Close whose result every later call repeats, after
// which Propose returns ErrClosed.
func TestCoordinatorShape(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c, err := twophase.NewCoordinator(connect(t, tg), root, twophase.WithID("c1"))
		if err != nil {
			t.Fatal(err)
		}
		if c.Path() != root || c.ID() != "c1" || c.State() != events.StateStart {
			t.Errorf("Path %q, ID %q, State %s", c.Path(), c.ID(), c.State())
		}
		sub := c.Subscribe()
		defer sub.Close()
		if ev := <-sub.C; ev.Type != events.Start || ev.Instance != "c1" {
			t.Errorf("first event %v, want START", ev)
		}
		first := c.Close()
		if err := c.Close(); err != first {
			t.Errorf("Close again: %v, first %v", err, first)
		}
		if _, err := c.Propose(ctx, "tx", nil, []string{"a"}); !errors.Is(err, twophase.ErrClosed) || !errors.Is(err, zkrecipes.ErrClosed) {
			t.Errorf("Propose after Close: %v", err)
		}
		if c.State() != events.StateStop {
			t.Errorf("State after Close: %s", c.State())
		}
		for range sub.C { // ended by Close
		}
	})
}

// Close with the connection down, while a Propose waits for a vote:
// the Propose returns ErrClosed, Close waits WithCloseTimeout for the
// abort and returns ErrCleanupPending; once the same session is back,
// our node of the transaction is deleted, and the transaction aborts.
func TestCoordinatorCloseWhileDisconnected(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a := newRec()
		release := a.gate("tx")
		defer release()
		serve(t, connect(t, tg), "a", a)
		conn, obs := connect(t, tg), connect(t, tg)
		c, err := twophase.NewCoordinator(conn, root, twophase.WithCloseTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		res := proposeAsync(ctx, c, "tx", nil, "a")
		a.waitFor(t, ctx, "a preparing", func() bool { return a.entered["tx"] == 1 })
		tg.Disconnect(t, conn)
		first := c.Close()
		if !errors.Is(first, twophase.ErrCleanupPending) {
			t.Errorf("Close while disconnected: %v, want ErrCleanupPending", first)
		}
		if p := recv(t, ctx, res); !errors.Is(p.err, twophase.ErrClosed) {
			t.Errorf("Propose: %+v %v, want ErrClosed", p.out, p.err)
		}
		tg.Reconnect(t, conn)
		waitGone(t, obs, root+"/tx/tx/coordinator")
		release()
		if o := a.outcome(t, ctx, "tx"); o.Committed {
			t.Errorf("a saw %+v, want an abort", o)
		}
	})
}
