package election_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
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
		{"STOP hold-mark delete", testkit.OpDelete, contention.HoldMarkDir(dir) + "/_c_"},
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
				for _, e := range []*election.Election{a, b} {
					if err := e.Close(); err != nil {
						t.Fatalf("Close after the fault: %v", err)
					}
				}
				awaitNoneUnder(t, cb, dir, contention.HoldMarkDir(dir))
			})
		})
	}
}

// TestLostReplyWhileWaiting loses the reply to each request a participant
// makes while it waits behind a leader (READY): the watch of the leader's
// hold mark, the watch of its node, and the recheck (a child watch on each of the
// nodes below) after a participant ahead gave up. The waiter leads once
// the leader resigns, is never told its node was deleted, the other
// participant leads after it, and nothing is left once all are closed.
func TestLostReplyWhileWaiting(t *testing.T) {
	const dir = "/lost/election-ready"
	for _, tc := range []struct {
		name    string
		op      testkit.OpKind
		prefix  func(leader string) string // of the request to lose, given the leader's node
		between bool                       // a participant waits between the leader and the victim, and gives up
	}{
		{"hold-mark watch", testkit.OpExists, contention.HoldMark, false},
		{"predecessor watch", testkit.OpChildren, func(leader string) string { return leader }, false},
		{"recheck of the nodes below", testkit.OpChildren, func(leader string) string { return leader }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
				ctx := ctxT(t)
				ca, cb := tg.Connect(t), tg.Connect(t)
				a, b := newElection(t, ca, dir, "a"), newElection(t, cb, dir, "b")
				bTerm, err := b.Campaign(ctx)
				if err != nil {
					t.Fatal(err)
				}
				f := tg.LoseNextReply(t, ca, tc.op, tc.prefix(bTerm.Node()))
				var w *election.Election
				var wres <-chan campaigned
				wctx, wcancel := context.WithCancel(ctx)
				defer wcancel()
				if tc.between {
					w = newElection(t, tg.Connect(t), dir, "w")
					wres = campaignWaiting(t, wctx, w)
				}
				res := campaignWaiting(t, ctx, a)
				if tc.between {
					wcancel()
					if r := <-wres; !errors.Is(r.err, context.Canceled) {
						t.Fatalf("w's Campaign = %v, want context.Canceled", r.err)
					}
				}
				select {
				case <-f.Fired():
				case <-time.After(10 * time.Second):
					t.Fatal("the fault never fired: the test tested nothing")
				}
				if err := b.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				r := <-res
				if errors.Is(r.err, election.ErrNodeDeleted) {
					t.Fatalf("a's Campaign = %v: a lost reply taken for the node's deletion", r.err)
				}
				if r.err != nil {
					t.Fatalf("a's Campaign: %v", r.err)
				}
				if err := a.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := b.Campaign(ctx); err != nil {
					t.Fatalf("b's Campaign after the fault: %v", err)
				}
				for _, e := range []*election.Election{a, b, w} {
					if e == nil {
						continue
					}
					if err := e.Close(); err != nil {
						t.Fatalf("Close after the fault: %v", err)
					}
				}
				awaitNoneUnder(t, cb, dir, contention.HoldMarkDir(dir))
			})
		})
	}
}

// campaignWaiting starts e's Campaign and returns once e waits (READY).
func campaignWaiting(t *testing.T, ctx context.Context, e *election.Election) <-chan campaigned {
	t.Helper()
	sub := e.Subscribe()
	defer sub.Close()
	res := campaignAsync(ctx, e)
	testkit.WaitEvent(t, sub, events.ReadyStart)
	return res
}

// awaitNoneUnder waits until each of paths has no child (or is gone), as
// c sees it; it fails the test after 10 s.
func awaitNoneUnder(t *testing.T, c zk.Conn, paths ...string) {
	t.Helper()
	ctx := ctxT(t)
	for _, p := range paths {
		deadline := time.Now().Add(10 * time.Second)
		for {
			kids, _, err := c.Children(ctx, p)
			if errors.Is(err, zk.ErrNoNode) || (err == nil && len(kids) == 0) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				slices.Sort(kids)
				t.Fatalf("left under %s once all are closed: %v", p, kids)
			}
			_, _, ch, err := c.ChildrenW(ctx, p)
			if err == nil {
				select {
				case <-ch:
				case <-time.After(time.Until(deadline)):
				}
			}
		}
	}
}
