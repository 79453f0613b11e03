package election_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit"
)

// Once its last stream has ended the follower stops following; a stream
// opened later starts with the leader as it is then, not as it was when
// the follower stopped.
func TestObserveAfterTheLastStreamEnded(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a := newElection(t, tg.Connect(t), "/observe/idle", "a")
		b := newElection(t, tg.Connect(t), "/observe/idle", "b")
		if _, err := a.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		octx, cancel := context.WithCancel(ctx)
		first := b.Observe(octx)
		if l := <-first; l.ID != "a" {
			t.Fatalf("first leader %+v, want a", l)
		}
		cancel()
		for range first {
		}
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		if l := <-b.Observe(ctx); l.ID != "b" {
			t.Fatalf("a new stream's first leader %+v, want b", l)
		}
	})
}
