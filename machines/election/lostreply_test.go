package election_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestLostReplyInEachState loses the reply to each kind of request a
// participant makes on its way to leading and back: no false
// ErrNodeDeleted, the participant leads, another one leads after it, and
// no node or hold mark is left once both are closed.
func TestLostReplyInEachState(t *testing.T) {
	const dir = "/lost/election"
	for _, tc := range []struct {
		name   string
		op     testkit.OpKind
		prefix string
	}{
		{"OFFER create", testkit.OpCreate, dir + "/_c_"},
		{"DETERMINE own-node read", testkit.OpChildren, dir + "/_c_"},
		{"DETERMINE either read", testkit.OpChildren, dir},
		{"LEADER hold-mark announce", testkit.OpMulti, dir + "/_c_"},
		{"STOP resign delete", testkit.OpDelete, dir + "/_c_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
				ctx := ctxT(t)
				ca, cb := tg.Connect(t), tg.Connect(t)
				a, b := newElection(t, ca, dir, "a"), newElection(t, cb, dir, "b")
				f := tg.LoseNextReply(t, ca, tc.op, tc.prefix)
				term, err := a.Campaign(ctx)
				if errors.Is(err, election.ErrNodeDeleted) {
					t.Fatalf("Campaign = %v: a lost reply taken for the node's deletion", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if tc.op == testkit.OpMulti {
					// The announce follows the grant; its lost reply
					// suspends the connection, which ends the term
					// (SUSPENDED counts as lost by default).
					<-f.Fired()
					<-term.Lost()
				}
				err = a.Resign(ctx)
				if errors.Is(err, election.ErrNodeDeleted) {
					t.Fatalf("Resign = %v: a lost reply taken for the node's deletion", err)
				}
				select {
				case <-f.Fired():
				case <-time.After(10 * time.Second):
					t.Fatal("the fault never fired: the test tested nothing")
				}
				if _, err := b.Campaign(ctx); err != nil {
					t.Fatalf("b's Campaign after the fault: %v", err)
				}
				a.Close()
				b.Close()
				for _, p := range []string{dir, contention.HoldMarkDir(dir)} {
					deadline := time.Now().Add(10 * time.Second)
					for {
						kids, _, err := cb.Children(ctx, p)
						if errors.Is(err, zk.ErrNoNode) || (err == nil && len(kids) == 0) {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						if time.Now().After(deadline) {
							slices.Sort(kids)
							t.Fatalf("left under %s once both are closed: %v", p, kids)
						}
						_, _, ch, err := cb.ChildrenW(ctx, p)
						if err == nil {
							select {
							case <-ch:
							case <-time.After(time.Until(deadline)):
							}
						}
					}
				}
			})
		})
	}
}
