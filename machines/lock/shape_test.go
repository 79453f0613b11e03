package lock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// handle is the face every handle has.
type handle interface {
	Path() string
	ID() string
	State() events.State
	Subscribe(...events.SubscribeOption) *events.Subscription
	Close() error
}

// checkShape checks the face of h, released after a hold: Path, ID, State, a subscription starting
// with START, Close twice with one result, and then every call's error
// matching both ErrClosed and zkrecipes.ErrClosed.
func checkShape(t *testing.T, h handle, path, id string, calls map[string]func() error) {
	t.Helper()
	if h.Path() != path || h.ID() != id || h.State() != events.StateStop {
		t.Errorf("Path, ID, State = %q, %q, %v; want %q, %q, STOP", h.Path(), h.ID(), h.State(), path, id)
	}
	sub := h.Subscribe()
	if ev := <-sub.C; ev.Type != events.Start || ev.Instance != id {
		t.Errorf("first event %v, want START of %s", ev, id)
	}
	sub.Close()
	first := h.Close()
	if err := h.Close(); err != first {
		t.Errorf("second Close = %v, first %v", err, first)
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, lock.ErrClosed) || !errors.Is(err, zkrecipes.ErrClosed) {
			t.Errorf("%s after Close = %v", name, err)
		}
	}
}

func TestHandleShape(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := context.Background()
		l := newLock(t, tg.Connect(t), "/shape/lock", lock.WithID("l2"))
		g, err := l.Acquire(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Release(ctx); err != nil {
			t.Fatal(err)
		}
		checkShape(t, l, "/shape/lock", "l2", map[string]func() error{
			"Acquire":       func() error { _, err := l.Acquire(ctx); return err },
			"TryAcquire":    func() error { _, _, err := l.TryAcquire(ctx); return err },
			"Release":       func() error { return l.Release(ctx) },
			"Grant.Release": func() error { return g.Release(ctx) },
		})
		m := newMulti(t, tg.Connect(t), []string{"/shape/b", "/shape/a"}, lock.WithID("m2"))
		mg, err := m.Acquire(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if s := m.State(); s != events.StateLeader {
			t.Errorf("a held Multi's State = %v", s)
		}
		if err := mg.Release(ctx); err != nil {
			t.Fatal(err)
		}
		checkShape(t, m, "/shape/b,/shape/a", "m2", map[string]func() error{
			"Acquire":            func() error { _, err := m.Acquire(ctx); return err },
			"Release":            func() error { return m.Release(ctx) },
			"MultiGrant.Release": func() error { return mg.Release(ctx) },
		})
	})
}
