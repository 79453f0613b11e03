package twophase_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Every participant votes yes: the transaction commits, each participant's
// Commit gets the payload once, and the transaction is deleted after the
// retention period.
func TestCommitWhenAllVoteYes(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		ids := []string{"a", "b", "c"}
		recs := map[string]*rec{}
		for _, id := range ids {
			recs[id] = newRec()
			serve(t, connect(t, tg), id, recs[id])
		}
		cc := connect(t, tg)
		c := newCoordinator(t, cc, twophase.WithRetention(200*time.Millisecond), twophase.WithID("coord-1"))
		sub := c.Subscribe()
		defer sub.Close()
		out, err := c.Propose(ctx, "tx1", []byte("pay"), ids)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Committed || out.Reason != "" {
			t.Fatalf("outcome %+v, want committed", out)
		}
		for _, id := range ids {
			r := recs[id]
			if o := r.outcome(t, ctx, "tx1"); !o.Committed {
				t.Errorf("%s saw %+v", id, o)
			}
			r.mu.Lock()
			if r.payloads["tx1"] != "pay" || r.prepared["tx1"] != 1 {
				t.Errorf("%s: payload %q, %d prepares", id, r.payloads["tx1"], r.prepared["tx1"])
			}
			r.mu.Unlock()
		}
		if ev := <-sub.C; ev.Type != events.Start {
			t.Errorf("coordinator's first event %v, want START", ev)
		}
		select {
		case ev := <-sub.C:
			if ev.Type != events.Committed || ev.Instance != "coord-1" || ev.Node != root+"/tx/tx1" {
				t.Errorf("coordinator event %v", ev)
			}
		case <-ctx.Done():
			t.Fatal("no coordinator event")
		}
		waitGone(t, cc, root+"/tx/tx1")
		for _, id := range ids {
			waitGone(t, cc, root+"/inbox/"+id+"/tx1")
		}
	})
}

// One participant votes no: every participant aborts with its reason.
func TestAbortOnNoVote(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a, b := newRec(), newRec()
		b.vote = voteNo("out of stock")
		serve(t, connect(t, tg), "a", a)
		sb := serve(t, connect(t, tg), "b", b)
		sub := sb.p.Subscribe()
		defer sub.Close()
		c := newCoordinator(t, connect(t, tg))
		out, err := c.Propose(ctx, "tx1", nil, []string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Committed || !strings.Contains(out.Reason, "out of stock") || !strings.Contains(out.Reason, "b") {
			t.Fatalf("outcome %+v, want aborted for b's reason", out)
		}
		for name, r := range map[string]*rec{"a": a, "b": b} {
			if o := r.outcome(t, ctx, "tx1"); o != out {
				t.Errorf("%s saw %+v, the coordinator %+v", name, o, out)
			}
		}
		// b's events after START: its vote (a no, with the reason), then
		// the abort.
		var seen []events.Type
		for len(seen) < 3 {
			select {
			case ev := <-sub.C:
				if ev.Type == events.Start {
					continue
				}
				seen = append(seen, ev.Type)
				if (ev.Type == events.Aborted || ev.Type == events.Voted) && (!errors.Is(ev.Err, twophase.ErrAborted) || !strings.Contains(ev.Err.Error(), "out of stock")) {
					t.Errorf("%v with Err %v", ev.Type, ev.Err)
				}
			case <-ctx.Done():
				t.Fatalf("events so far %v", seen)
			}
		}
		if seen[0] != events.Prepared || seen[1] != events.Voted || seen[2] != events.Aborted {
			t.Errorf("events %v, want PREPARED VOTED ABORTED", seen)
		}
	})
}

// A participant that does not vote in time: the coordinator aborts on the
// vote timeout, and the late voter gets the abort too.
func TestAbortOnVoteTimeout(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a, b := newRec(), newRec()
		release := b.gate("tx1")
		defer release()
		serve(t, connect(t, tg), "a", a)
		serve(t, connect(t, tg), "b", b)
		c := newCoordinator(t, connect(t, tg), twophase.WithVoteTimeout(300*time.Millisecond))
		out, err := c.Propose(ctx, "tx1", nil, []string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Committed || out.Reason != twophase.ReasonVoteTimeout {
			t.Fatalf("outcome %+v, want a vote timeout", out)
		}
		if o := a.outcome(t, ctx, "tx1"); o != out {
			t.Errorf("a saw %+v", o)
		}
		release()
		if o := b.outcome(t, ctx, "tx1"); o != out {
			t.Errorf("b saw %+v", o)
		}
	})
}

// The coordinator's session expires while a participant has not voted:
// the transaction aborts, for the coordinator and every participant.
func TestAbortWhenCoordinatorSessionEnds(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a, b := newRec(), newRec()
		release := b.gate("tx1")
		defer release()
		ca := connect(t, tg)
		serve(t, ca, "a", a)
		serve(t, connect(t, tg), "b", b)
		cc := connect(t, tg)
		c := newCoordinator(t, cc, twophase.WithVoteTimeout(time.Minute))
		res := proposeAsync(ctx, c, "tx1", nil, "a", "b")
		waitExists(t, ca, root+"/tx/tx1/votes/a")
		b.waitFor(t, ctx, "b preparing", func() bool { return b.entered["tx1"] == 1 })
		tg.Expire(t, cc)
		p := recv(t, ctx, res)
		if p.err != nil {
			t.Fatal(p.err)
		}
		if p.out.Committed || p.out.Reason != twophase.ReasonCoordinatorGone {
			t.Fatalf("outcome %+v, want the coordinator's end", p.out)
		}
		if o := a.outcome(t, ctx, "tx1"); o != p.out {
			t.Errorf("a saw %+v", o)
		}
		release()
		if o := b.outcome(t, ctx, "tx1"); o != p.out {
			t.Errorf("b saw %+v", o)
		}
	})
}

// A participant that stopped after voting, and one that stopped before,
// get Commit or Abort when they serve again on a new session.
func TestRestartedParticipantGetsTheDecision(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a, b1 := newRec(), newRec()
		releaseA := a.gate("tx1")
		defer releaseA()
		ca := connect(t, tg)
		serve(t, ca, "a", a)
		s1 := serve(t, connect(t, tg), "b", b1)
		c := newCoordinator(t, connect(t, tg))

		// tx1: b votes yes and stops; the commit is decided without it.
		res := proposeAsync(ctx, c, "tx1", []byte("one"), "a", "b")
		waitExists(t, ca, root+"/tx/tx1/votes/b")
		if err := s1.stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Serve after its ctx ended: %v", err)
		}
		releaseA()
		p := recv(t, ctx, res)
		if p.err != nil || !p.out.Committed {
			t.Fatalf("tx1: %+v %v", p.out, p.err)
		}
		b1.mu.Lock()
		missed := len(b1.outcomes["tx1"]) == 0
		b1.mu.Unlock()
		if !missed {
			t.Fatal("b saw tx1's outcome before it stopped")
		}
		b2 := newRec()
		releaseB2 := b2.gate("tx2")
		defer releaseB2()
		s2 := serve(t, connect(t, tg), "b", b2)
		if o := b2.outcome(t, ctx, "tx1"); !o.Committed {
			t.Errorf("restarted b saw %+v for tx1", o)
		}
		b2.mu.Lock()
		if b2.entered["tx1"] != 0 || b2.payloads["tx1"] != "one" {
			t.Errorf("restarted b: %d prepares of tx1, payload %q", b2.entered["tx1"], b2.payloads["tx1"])
		}
		b2.mu.Unlock()
		// Its inbox entry goes once Commit returned: stopped before that
		// delete is through, b would get tx1 again (at least once), and
		// b3 below would see it.
		waitGone(t, ca, root+"/inbox/b/tx1")

		// tx2: b stops while preparing; a votes no; b comes back to the abort.
		a.mu.Lock()
		a.vote = voteNo("no funds")
		a.mu.Unlock()
		releaseA2 := a.gate("tx2")
		defer releaseA2()
		res = proposeAsync(ctx, c, "tx2", nil, "a", "b")
		b2.waitFor(t, ctx, "b preparing tx2", func() bool { return b2.entered["tx2"] == 1 })
		a.waitFor(t, ctx, "a preparing tx2", func() bool { return a.entered["tx2"] == 1 })
		s2.stop()
		releaseA2()
		p = recv(t, ctx, res)
		if p.err != nil || p.out.Committed || !strings.Contains(p.out.Reason, "no funds") {
			t.Fatalf("tx2: %+v %v", p.out, p.err)
		}
		b3 := newRec()
		serve(t, connect(t, tg), "b", b3)
		if o := b3.outcome(t, ctx, "tx2"); o != p.out {
			t.Errorf("restarted b saw %+v for tx2, want %+v", o, p.out)
		}
		b3.mu.Lock()
		if b3.entered["tx2"] != 0 || len(b3.outcomes["tx1"]) != 0 {
			t.Errorf("b3: %d prepares of tx2, tx1 outcomes %v", b3.entered["tx2"], b3.outcomes["tx1"])
		}
		b3.mu.Unlock()
	})
}

// A coordinator closed before its transactions' retention was over leaves
// them; the next coordinator on the root deletes each once its decision is
// retention old (the chaos suite found decided transactions left for good).
func TestNextCoordinatorDeletesWhatTheLastLeft(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		r := newRec()
		serve(t, connect(t, tg), "a", r)
		cc := connect(t, tg)
		first, err := twophase.NewCoordinator(cc, root, twophase.WithRetention(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.Propose(ctx, "tx1", nil, []string{"a"}); err != nil {
			t.Fatal(err)
		}
		r.outcome(t, ctx, "tx1")
		first.Close()
		waitExists(t, cc, root+"/tx/tx1") // kept: its hour is not over
		newCoordinator(t, cc, twophase.WithRetention(300*time.Millisecond))
		waitGone(t, cc, root+"/tx/tx1")
	})
}

// A decided transaction is kept past its retention while a participant has
// not had its call (it was down): it gets its Commit when it serves again,
// and only then is the transaction deleted.
func TestTransactionKeptUntilEveryParticipantHadItsCall(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a, b1 := newRec(), newRec()
		ca := connect(t, tg)
		serve(t, ca, "a", a)
		s1 := serve(t, connect(t, tg), "b", b1)
		c := newCoordinator(t, connect(t, tg), twophase.WithRetention(time.Millisecond))

		// tx1: b votes yes and stops before the decision reaches it.
		releaseA := a.gate("tx1")
		defer releaseA()
		res := proposeAsync(ctx, c, "tx1", nil, "a", "b")
		waitExists(t, ca, root+"/tx/tx1/votes/b")
		s1.stop()
		releaseA()
		if p := recv(t, ctx, res); p.err != nil || !p.out.Committed {
			t.Fatalf("tx1: %+v %v", p.out, p.err)
		}
		// A later transaction of a alone is deleted after its retention:
		// the janitor has been past tx1's by then, and kept it.
		if p := recv(t, ctx, proposeAsync(ctx, c, "probe", nil, "a")); p.err != nil {
			t.Fatal(p.err)
		}
		waitGone(t, ca, root+"/tx/probe")
		waitExists(t, ca, root+"/tx/tx1")

		b2 := newRec()
		serve(t, connect(t, tg), "b", b2)
		if o := b2.outcome(t, ctx, "tx1"); !o.Committed {
			t.Errorf("b, back, saw %+v for tx1", o)
		}
		waitGone(t, ca, root+"/tx/tx1")
	})
}

// Finished transactions leave no watch behind: one committed, one aborted
// on a no vote, one aborted on the vote timeout (its late voter's watch of
// the coordinator's node is set once that node is gone). Once each is
// deleted (retention), no session watches anything under it. (A
// participant's exists on a coordinator node found gone once waited for a
// creation that never comes, until its session ended.)
func TestNoWatchLeftAfterTransactions(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		ids := []string{"a", "b", "c"}
		conns := map[string]zk.Conn{}
		recs := map[string]*rec{}
		for _, id := range ids {
			recs[id] = newRec()
			conns[id] = connect(t, tg)
			serve(t, conns[id], id, recs[id])
		}
		recs["c"].vote = voteNo("no")
		cc := connect(t, tg)
		conns["coordinator"] = cc
		c := newCoordinator(t, cc, twophase.WithRetention(100*time.Millisecond), twophase.WithVoteTimeout(300*time.Millisecond))
		for _, tx := range []struct {
			id    string
			parts []string
		}{{"tx1", []string{"a", "b"}}, {"tx2", ids}} {
			if _, err := c.Propose(ctx, tx.id, nil, tx.parts); err != nil {
				t.Fatal(err)
			}
		}
		release := recs["b"].gate("tx3")
		out, err := c.Propose(ctx, "tx3", nil, []string{"a", "b"})
		release()
		if err != nil || out.Committed {
			t.Fatalf("tx3: %+v, %v; want an abort on the vote timeout", out, err)
		}
		obs := connect(t, tg) // its waits leave watches of their own
		for _, tx := range []string{"tx1", "tx2", "tx3"} {
			waitGone(t, obs, root+"/tx/"+tx)
			for _, r := range []*rec{recs["a"], recs["b"]} {
				r.outcome(t, ctx, tx)
			}
		}
		for name, cn := range conns {
			for _, p := range testkit.WatchedPaths(t, tg, cn) {
				if strings.HasPrefix(p, root+"/tx/") {
					t.Errorf("%s still watches %s", name, p)
				}
			}
		}
	})
}

// behindOnce answers the first read of a decision NoNode, as a server
// behind the one that sent the decision's event would.
type behindOnce struct {
	zk.Conn
	mu     sync.Mutex
	missed bool
}

func (b *behindOnce) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	b.mu.Lock()
	miss := !b.missed && strings.HasSuffix(path, "/decision")
	b.missed = b.missed || miss
	b.mu.Unlock()
	if miss {
		return nil, zk.Stat{}, zk.ErrNoNode
	}
	return b.Conn.Get(ctx, path)
}

// A participant woken by its decision's creation reads it alone; a
// server behind the event's that does not have it yet makes it look again,
// not take the transaction for one deleted after its retention.
func TestDecisionReadFromAServerBehindItsEvent(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		r := newRec()
		behind := &behindOnce{Conn: connect(t, tg)}
		serve(t, behind, "a", r)
		c := newCoordinator(t, connect(t, tg))
		out, err := c.Propose(ctx, "tx1", []byte("pay"), []string{"a"})
		if err != nil || !out.Committed {
			t.Fatalf("Propose: %+v, %v", out, err)
		}
		if o := r.outcome(t, ctx, "tx1"); !o.Committed {
			t.Errorf("a saw %+v", o)
		}
		behind.mu.Lock()
		defer behind.mu.Unlock()
		if !behind.missed {
			t.Error("the decision was never read alone")
		}
	})
}

// The directories that are emptied in normal use stay: the transactions'
// and each participant's inbox are persistent (a coordinator's multi
// creates in them, and would take a reaped one for an unregistered
// participant); the participants' directory, emptied when the last one
// stops, is a container, reaped and made again.
func TestDirectoriesSurviveTheReaper(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		conn := connect(t, tg)
		s := serve(t, connect(t, tg), "a", newRec())
		c := newCoordinator(t, conn, twophase.WithRetention(time.Millisecond))
		if p := recv(t, ctx, proposeAsync(ctx, c, "tx1", nil, "a")); p.err != nil || !p.out.Committed {
			t.Fatalf("tx1: %+v %v", p.out, p.err)
		}
		waitGone(t, conn, root+"/tx/tx1")
		waitGone(t, conn, root+"/inbox/a/tx1")
		s.stop()
		if sim, ok := testkit.SimOf(tg); ok {
			sim.ReapContainers()
		}
		waitGone(t, conn, root+"/participants") // the real server reaps every 200 ms
		for _, dir := range []string{root + "/tx", root + "/inbox/a"} {
			if _, ok, err := conn.Exists(ctx, dir); err != nil || !ok {
				t.Errorf("%s reaped (%v)", dir, err)
			}
		}
		serve(t, connect(t, tg), "a", newRec())
		if p := recv(t, ctx, proposeAsync(ctx, c, "tx2", nil, "a")); p.err != nil || !p.out.Committed {
			t.Fatalf("tx2: %+v %v", p.out, p.err)
		}
	})
}

// A coordinator keeps decided transactions for their retention with no
// goroutine of its own each: its timers are timers, and the watches it
// set while collecting votes are given up once it decided. (The
// connection's adapter has one per watch left on the server, such as the
// last one on a transaction's votes, until the transaction is deleted.)
func TestKeptTransactionsCostNoGoroutine(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		a := newRec()
		serve(t, connect(t, tg), "a", a)
		c := newCoordinator(t, connect(t, tg), twophase.WithRetention(time.Hour))
		const n = 40
		for i := range n {
			if _, err := c.Propose(ctx, fmt.Sprintf("tx%d", i), nil, []string{"a"}); err != nil {
				t.Fatal(err)
			}
		}
		a.waitFor(t, ctx, "every outcome", func() bool { return len(a.outcomes) == n })
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			buf := make([]byte, 1<<22)
			stacks := string(buf[:runtime.Stack(buf, true)])
			g := 0
			for _, st := range strings.Split(stacks, "\n\n") {
				if strings.Contains(st, "machines/twophase.") && !strings.Contains(st, "twophase_test.") {
					g++
				}
			}
			if g < n/4 { // the participant's watches of its inbox and its registration
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%d goroutines of twophase with %d transactions kept:\n%s", g, n, stacks)
			}
		}
	})
}
