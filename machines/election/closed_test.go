package election_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// After Close every call returns ErrClosed (Observe: a closed channel),
// State says STOP, a new subscription is closed already, and Close is
// idempotent.
func TestEveryCallAfterClose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		e := newElection(t, tg.Connect(t), "/closed/election", "a")
		if _, err := e.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Campaign(ctx); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Campaign = %v", err)
		}
		if err := e.Resign(ctx); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Resign = %v", err)
		}
		if err := e.Run(ctx, func(context.Context) error { t.Error("fn called after Close"); return nil }); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Run = %v", err)
		}
		if _, err := e.Leader(ctx); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Leader = %v", err)
		}
		if _, err := e.Participants(ctx); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Participants = %v", err)
		}
		if _, open := <-e.Observe(ctx); open {
			t.Error("Observe after Close delivers")
		}
		if err := e.Err(); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Err = %v", err)
		}
		if s := e.State(); s != events.StateStop {
			t.Errorf("State = %v, want STOP", s)
		}
		if _, open := <-e.Subscribe().C; open {
			t.Error("a subscription made after Close delivers events")
		}
		if err := e.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
	})
}

// Close and Observe from many goroutines at once, while we lead and
// streams are running: no panic, no race (run under -race), every Close
// returns the same result (nil), and every stream ends, also those opened
// after Close.
func TestConcurrentCloseAndObserve(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		for round := range 5 {
			e := newElection(t, c, fmt.Sprintf("/closed/race%d", round), "a")
			if _, err := e.Campaign(ctx); err != nil {
				t.Fatal(err)
			}
			running := e.Observe(ctx)
			if l := <-running; l.ID != "a" {
				t.Fatalf("the first leader observed is %+v, want a", l)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i%2 == 0 {
						errs <- e.Close()
						return
					}
					for range e.Observe(ctx) {
					}
				}()
			}
			for range running {
			}
			wg.Wait() // every stream ended: Close ends them all
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("round %d: a concurrent Close = %v, want nil", round, err)
				}
			}
			if ctx.Err() != nil {
				t.Fatal("a stream ended with ctx, not with Close")
			}
		}
	})
}
