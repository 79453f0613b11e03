package twophase

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A commit is made only while the coordinator's node is there: a
// coordinator whose session ended may have read every vote yes on its new
// session, but the participants abort for the session's end, and its
// commit must not race theirs. Before the commit checked the node, the
// demo's crashed coordinator sometimes committed order-3.
func TestCommitNeedsTheCoordinatorsNode(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c := tg.Connect(t)
		p := paths{root: "/app/2pc-decide"}
		for _, n := range []string{"/app", p.root, p.txs(), p.tx("gone"), p.tx("alive")} {
			if _, err := c.Create(ctx, n, nil, zk.ModePersistent); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Create(ctx, p.coordinator("alive"), nil, zk.ModeEphemeral); err != nil {
			t.Fatal(err)
		}
		for tx, want := range map[string]Outcome{
			"gone":  {Reason: ReasonCoordinatorGone},
			"alive": {Committed: true},
		} {
			got, err := decide(ctx, c, p, tx, Outcome{Committed: true})
			if err != nil || got != want {
				t.Fatalf("%s: decide(commit) = %+v, %v; want %+v", tx, got, err, want)
			}
			data, _, err := c.Get(ctx, p.decision(tx))
			if err != nil || decodeDecision(data) != want {
				t.Fatalf("%s: the decision node says %q (%v), want %+v", tx, data, err, want)
			}
		}
	})
}
