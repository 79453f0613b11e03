package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// goneWithin bounds how long after the reconnect the closed leader's node
// may take to go: one round trip of the connection's janitor, with room
// for a loaded machine. Without the janitor the node stays as long as its
// session lives, which is for the rest of the test.
const goneWithin = 2 * time.Second

// TestCloseDuringDisconnect closes the leader while its connection is
// down: Close returns ErrCleanupPending within its timeout, and once the
// same session is back the connection deletes the node and its hold mark
// by itself, so the next participant is elected within goneWithin instead
// of waiting for the session's end.
func TestCloseDuringDisconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const dir = "/cleanup/election"
		c, other := tg.Connect(t), tg.Connect(t)
		const timeout = 200 * time.Millisecond
		a := newElection(t, c, dir, "a", election.WithCloseTimeout(timeout))
		b := newElection(t, other, dir, "b")
		term, err := a.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		testkit.AwaitNode(t, other, contention.HoldMark(term.Node())) // a announces its term once elected
		won := campaignAsync(ctx, b)
		tg.Disconnect(t, c)
		start := time.Now()
		if err := a.Close(); !errors.Is(err, election.ErrCleanupPending) {
			t.Fatalf("Close during a disconnect = %v, want ErrCleanupPending", err)
		}
		if took := time.Since(start); took > timeout+time.Second {
			t.Errorf("Close took %v with a %v close timeout", took, timeout)
		}
		select {
		case r := <-won:
			t.Fatalf("b's Campaign ended while a's session held its node: %v", r.err)
		default:
		}
		tg.Reconnect(t, c)
		back := time.Now()
		select {
		case r := <-won:
			if r.err != nil {
				t.Fatal(r.err)
			}
		case <-time.After(goneWithin):
			t.Fatalf("b not elected within %v of the closed leader's reconnect", goneWithin)
		}
		t.Logf("b elected %v after the reconnect", time.Since(back))
		testkit.AwaitNoNode(t, other, term.Node())
		testkit.AwaitNoNode(t, other, contention.HoldMark(term.Node()))
	})
}

// TestCloseDuringDisconnectThenConnClosed: closing the connection ends the
// deletes it still owed with the session (the server deletes the node and
// the hold mark), and the connection's janitor with them (TestMain's
// goleak check).
func TestCloseDuringDisconnectThenConnClosed(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const dir = "/cleanup/connclosed"
		c, other := tg.Connect(t), tg.Connect(t)
		a := newElection(t, c, dir, "a", election.WithCloseTimeout(100*time.Millisecond))
		term, err := a.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tg.Disconnect(t, c)
		if err := a.Close(); !errors.Is(err, election.ErrCleanupPending) {
			t.Fatalf("Close = %v, want ErrCleanupPending", err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		b := newElection(t, other, dir, "b")
		if _, err := b.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.AwaitNoNode(t, other, contention.HoldMark(term.Node()))
	})
}

func TestCloseTimeoutMustBePositive(t *testing.T) {
	sim := testkit.NewSim()
	c := sim.Connect()
	defer c.Close()
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := election.New(c, "/x", election.WithCloseTimeout(d)); !errors.Is(err, election.ErrInvalidOption) {
			t.Errorf("WithCloseTimeout(%v): New = %v, want ErrInvalidOption", d, err)
		}
	}
}

// TestCloseWaiterDuringDisconnect closes a participant that is not the
// leader while its connection is down: waiting behind the leader, or with
// its create's reply not yet come (the server made the node). Close
// returns ErrCleanupPending within its timeout and a's Campaign fails with
// ErrClosed; the node stays while the connection is down (its session
// lives), goes within goneWithin of the reconnect, and then the leader can
// resign and be elected again at once, where a's node would have put it
// behind a for the rest of a's session.
func TestCloseWaiterDuringDisconnect(t *testing.T) {
	for _, tc := range []struct {
		name string
		// campaign starts a's Campaign and returns once a's node is on
		// the server, with its path when a knows it ("" if it does not).
		campaign func(t *testing.T, tg testkit.Target, a *election.Election, ca zk.Conn, dir string) (<-chan campaigned, string)
	}{
		{"waiting", func(t *testing.T, _ testkit.Target, a *election.Election, _ zk.Conn, _ string) (<-chan campaigned, string) {
			sub := a.Subscribe()
			defer sub.Close()
			res := campaignAsync(ctxT(t), a)
			return res, testkit.WaitEvent(t, sub, events.ReadyStart).Node
		}},
		{"create in flight", func(t *testing.T, tg testkit.Target, a *election.Election, ca zk.Conn, dir string) (<-chan campaigned, string) {
			f := tg.HoldNextReply(t, ca, testkit.OpCreate, dir+"/_c_")
			res := campaignAsync(ctxT(t), a)
			<-f.Fired()
			return res, ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
				ctx := ctxT(t)
				const dir, timeout = "/cleanup/waiter", 200 * time.Millisecond
				ca, other := tg.Connect(t), tg.Connect(t)
				a := newElection(t, ca, dir, "a", election.WithCloseTimeout(timeout))
				b := newElection(t, other, dir, "b")
				lead, err := b.Campaign(ctx)
				if err != nil {
					t.Fatal(err)
				}
				res, node := tc.campaign(t, tg, a, ca, dir)
				tg.Disconnect(t, ca)
				if node == "" {
					kids, _, err := other.Children(ctx, dir)
					if err != nil {
						t.Fatal(err)
					}
					for _, k := range kids {
						if p := zk.Join(dir, k); p != lead.Node() {
							node = p
						}
					}
				}
				if _, ok, err := other.Exists(ctx, node); err != nil || !ok || node == "" {
					t.Fatalf("a's node %q before Close: exists %t, %v", node, ok, err)
				}
				start := time.Now()
				err = a.Close()
				if took := time.Since(start); took > timeout+time.Second {
					t.Errorf("Close took %v with a %v close timeout", took, timeout)
				}
				if !errors.Is(err, election.ErrCleanupPending) {
					t.Fatalf("Close during a disconnect = %v, want ErrCleanupPending", err)
				}
				if r := within(t, res, "a's Campaign after Close"); !errors.Is(r.err, election.ErrClosed) {
					t.Fatalf("a's Campaign = %v, want ErrClosed", r.err)
				}
				if _, ok, err := other.Exists(ctx, node); err != nil || !ok {
					t.Fatalf("while disconnected a's node stays (its session lives): exists %t, %v", ok, err)
				}
				tg.Reconnect(t, ca)
				back := time.Now()
				testkit.AwaitNoNode(t, other, node)
				if took := time.Since(back); took > goneWithin {
					t.Errorf("a's node went %v after the reconnect, want within %v", took, goneWithin)
				}
				if err := b.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				again, cancel := context.WithTimeout(ctx, goneWithin)
				defer cancel()
				if _, err := b.Campaign(again); err != nil {
					t.Fatalf("b's Campaign after a's node went: %v", err)
				}
			})
		})
	}
}
