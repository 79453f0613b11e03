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
		ctx, c, p, mk := onTarget(t, tg, "/app/2pc-decide")
		mk(p.tx("gone"), zk.ModePersistent)
		mk(p.tx("alive"), zk.ModePersistent)
		mk(p.coordinator("alive"), zk.ModeEphemeral)
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

// onTarget connects to tg and returns a ctx that ends within 30 s, the
// connection, the paths under root (made, with the transactions'
// directory), and mk, which makes a node with the mode given.
func onTarget(t *testing.T, tg testkit.Target, root string) (context.Context, zk.Conn, paths, func(string, zk.CreateMode)) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	c := tg.Connect(t)
	mk := func(n string, mode zk.CreateMode) {
		t.Helper()
		if _, err := c.Create(ctx, n, nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	p := paths{root: root}
	for _, n := range []string{zk.Parent(root), root, p.txs()} {
		mk(n, zk.ModePersistent)
	}
	return ctx, c, p, mk
}
