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
// State says STOP, Path is still the path (and a subscriber made before
// Close got START first), a new subscription is closed already, and Close is
// idempotent.
func TestEveryCallAfterClose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		e := newElection(t, tg.Connect(t), "/closed/election", "a")
		term, err := e.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		late := e.Subscribe()
		if ev := <-late.C; ev.Type != events.Start || ev.Instance != "a" {
			t.Errorf("a late subscriber's first event = %v, want START", ev)
		}
		late.Close()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := term.Release(ctx); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Term.Release = %v", err)
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
		if e.Path() != "/closed/election" {
			t.Errorf("Path = %q", e.Path())
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

// When Close returns, every Observe stream's channel is closed already,
// also a stream whose reader stopped reading while a change was waiting
// for it (our own resignation by Close is such a change).
func TestCloseEndsEveryStream(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		e := newElection(t, tg.Connect(t), "/closed/streams", "a")
		if _, err := e.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		var streams []<-chan election.Leader
		for range 3 {
			s := e.Observe(ctx)
			if l := <-s; l.ID != "a" {
				t.Fatalf("first leader %+v, want a", l)
			}
			streams = append(streams, s)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		for i, s := range streams {
			select {
			case l, open := <-s:
				if open {
					t.Errorf("stream %d delivered %+v after Close returned", i, l)
				}
			default:
				t.Errorf("stream %d is still open after Close returned", i)
			}
		}
	})
}

// The first Observe racing Close (the follower not started yet): no race,
// and every stream is closed once both have returned, whichever won.
func TestFirstObserveRacingClose(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := tg.Connect(t)
		for round := range 20 {
			e := newElection(t, c, fmt.Sprintf("/closed/first%d", round), "a")
			streams := make(chan (<-chan election.Leader), 4)
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					streams <- e.Observe(ctx)
				}()
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(streams)
			for s := range streams {
				for range s { // a stream opened before Close may have delivered the vacant leader
				}
			}
			if ctx.Err() != nil {
				t.Fatal("a stream ended with ctx, not with Close")
			}
		}
	})
}
