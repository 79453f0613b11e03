package election_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestCloseDuringDisconnect closes the leader while its connection is
// down: Close returns ErrCleanupPending within its timeout, and once the
// same session is back the connection deletes the node by itself, so the
// next participant is elected instead of waiting for the session's end.
func TestCloseDuringDisconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const dir = "/cleanup/election"
		c, other := tg.Connect(t), tg.Connect(t)
		const timeout = 200 * time.Millisecond
		a := newElection(t, c, dir, "a", election.WithCloseTimeout(timeout))
		b := newElection(t, other, dir, "b")
		if _, err := a.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		won := campaignAsync(ctx, b)
		tg.Disconnect(t, c)
		start := time.Now()
		if err := a.Close(); !errors.Is(err, election.ErrCleanupPending) {
			t.Fatalf("Close during a disconnect = %v, want ErrCleanupPending", err)
		}
		if took := time.Since(start); took > timeout+time.Second {
			t.Errorf("Close took %v with a %v close timeout", took, timeout)
		}
		tg.Reconnect(t, c)
		select {
		case r := <-won:
			if r.err != nil {
				t.Fatal(r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("b not elected within 5s of the closed leader's reconnect")
		}
	})
}

func TestCloseTimeoutMustBePositive(t *testing.T) {
	sim := testkit.NewSim()
	c := sim.Connect()
	defer c.Close()
	if _, err := election.New(c, "/x", election.WithCloseTimeout(0)); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("WithCloseTimeout(0): New = %v, want ErrInvalidOption", err)
	}
}
