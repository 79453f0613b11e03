package rwlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// The participant and its two locks have the face every handle has: Path,
// ID, State and a subscription starting with START; Close twice gives one
// result, and then every call's error matches both ErrClosed and
// zkrecipes.ErrClosed.
func TestHandleShape(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := context.Background()
		rw := newRW(t, tg.Connect(t), "/shape/rw", rwlock.WithID("p"))
		if rw.Path() != "/shape/rw" || rw.ID() != "p" {
			t.Errorf("Path, ID = %q, %q", rw.Path(), rw.ID())
		}
		var grants []*rwlock.Grant
		for _, l := range []*rwlock.Lock{rw.ReadLock(), rw.WriteLock()} {
			g := acq(t, ctxT(t), l)
			rel(t, ctxT(t), l)
			grants = append(grants, g)
			if l.Path() != "/shape/rw" || l.State() != events.StateStop {
				t.Errorf("Path, State = %q, %v", l.Path(), l.State())
			}
			sub := l.Subscribe()
			if ev := <-sub.C; ev.Type != events.Start || ev.Instance != l.ID() {
				t.Errorf("first event %v, want START of %s", ev, l.ID())
			}
			sub.Close()
		}
		if rw.ReadLock().ID() != "p/read" || rw.WriteLock().ID() != "p/write" {
			t.Errorf("IDs %q, %q", rw.ReadLock().ID(), rw.WriteLock().ID())
		}
		first := rw.Close()
		if err := rw.Close(); err != first {
			t.Errorf("second Close = %v, first %v", err, first)
		}
		for i, l := range []*rwlock.Lock{rw.ReadLock(), rw.WriteLock()} {
			for name, call := range map[string]func() error{
				"Acquire":       func() error { _, err := l.Acquire(ctx); return err },
				"TryAcquire":    func() error { _, _, err := l.TryAcquire(ctx); return err },
				"Release":       func() error { return l.Release(ctx) },
				"Grant.Release": func() error { return grants[i].Release(ctx) },
			} {
				if err := call(); !errors.Is(err, rwlock.ErrClosed) || !errors.Is(err, zkrecipes.ErrClosed) {
					t.Errorf("%s %s after Close = %v", l.ID(), name, err)
				}
			}
		}
	})
}
