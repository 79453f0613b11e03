package twophase_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Many transactions with random participants, random votes, and random
// session expiries (of participants and of the coordinator, a crash as
// the server sees it) and connection losses: every participant sees the
// coordinator's outcome, a transaction commits only when all of its votes
// are yes and, unless its coordinator's session ended under it, always
// then; after a crash no participant waits longer than the vote timeout
// plus the session timeout for the outcome. TWOPHASE_SEED replays a run; TWOPHASE_N sets the number of
// transactions (default 200).
func TestRandomized(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		seed := uint64(time.Now().UnixNano())
		if s := os.Getenv("TWOPHASE_SEED"); s != "" {
			seed, _ = strconv.ParseUint(s, 10, 64)
		}
		n := 200
		if s := os.Getenv("TWOPHASE_N"); s != "" {
			n, _ = strconv.Atoi(s)
		}
		t.Logf("seed %d (TWOPHASE_SEED=%d to replay), %d transactions", seed, seed, n)
		rng := rand.New(rand.NewPCG(seed, seed))
		ctx := ctxT(t)

		ids := []string{"p0", "p1", "p2", "p3", "p4"}
		type txPlan struct {
			id    string
			ps    []string
			votes map[string]bool
		}
		plans := make([]txPlan, n)
		votes := make(map[string]map[string]bool, n) // read-only once the participants serve
		for i := range plans {
			pl := txPlan{id: fmt.Sprintf("tx%04d", i), votes: map[string]bool{}}
			for _, j := range rng.Perm(len(ids))[:1+rng.IntN(3)] {
				pl.ps = append(pl.ps, ids[j])
				pl.votes[ids[j]] = rng.IntN(10) < 8
			}
			plans[i] = pl
			votes[pl.id] = pl.votes
		}
		conns := map[string]zk.Conn{}
		recs := map[string]*rec{}
		for _, id := range ids {
			r := newRec()
			r.vote = func(tx twophase.Tx) (bool, error) {
				if votes[tx.ID][id] {
					return true, nil
				}
				return false, errors.New("random no")
			}
			recs[id], conns[id] = r, connect(t, tg)
			serve(t, conns[id], id, r)
		}
		cc := connect(t, tg)
		const voteTimeout = 30 * time.Second
		c := newCoordinator(t, cc, twophase.WithVoteTimeout(voteTimeout))

		const (
			batch          = 10
			sessionTimeout = 2 * time.Second // testkit's real-server targets' (the simulator's sessions end at once)
		)
		outcomes := map[string]twophase.Outcome{}
		var unknown, expiries, disconnects, crashes, lateWrites int
		sim, onSim := testkit.SimOf(tg)
		var late []*testkit.ReplyFault
		crashed := map[string]time.Time{} // tx -> when its coordinator's session ended under it
		start := time.Now()
		for i := 0; i < n; i += batch {
			fault := rng.IntN(5)
			switch i / batch { // every run has both kinds of crash
			case 1:
				fault = 2
			case 2:
				fault = 0
			}
			// A coordinator's crash comes while the batch's first
			// transaction waits for a vote: its first participant's
			// Prepare is held until the coordinator has seen the outcome.
			first := plans[i]
			var release func()
			if fault == 2 {
				release = recs[first.ps[0]].gate(first.id)
			}
			chans := map[string]<-chan proposal{}
			for _, pl := range plans[i:min(i+batch, n)] {
				chans[pl.id] = proposeAsync(ctx, c, pl.id, []byte(pl.id), pl.ps...)
			}
			results := map[string]proposal{}
			var expired string
			switch fault {
			case 0:
				expired = ids[rng.IntN(len(ids))]
				tg.Expire(t, conns[expired])
				expiries++
			case 1: // a short connection loss: the session survives
				id := ids[rng.IntN(len(ids))]
				tg.Disconnect(t, conns[id])
				tg.Reconnect(t, conns[id])
				disconnects++
			case 3: // on the simulator, a write applied only after the next read
				if !onSim {
					break
				}
				conn := cc
				if k := rng.IntN(len(ids) + 1); k < len(ids) {
					conn = conns[ids[k]]
				}
				op := []testkit.OpKind{testkit.OpCreate, testkit.OpDelete, testkit.OpSet, testkit.OpMulti}[rng.IntN(4)]
				late = append(late, sim.LateNextWrite(conn, op, root))
			case 2: // the coordinator crashes: its session ends under the batch
				if p, ok := preparing(t, ctx, recs[first.ps[0]], first.id, chans[first.id]); !ok {
					results[first.id] = p // refused (a participant re-registering): not held
				}
				tg.Expire(t, cc)
				for tx := range chans {
					crashed[tx] = time.Now()
				}
				crashes++
				if _, ok := results[first.id]; !ok {
					results[first.id] = recv(t, ctx, chans[first.id])
				}
				release()
			}
			for tx, ch := range chans {
				p, ok := results[tx]
				if !ok {
					p = recv(t, ctx, ch)
				}
				switch {
				case errors.Is(p.err, twophase.ErrUnknownParticipant):
					unknown++ // proposed while an expired participant was re-registering
				case p.err != nil:
					t.Fatalf("%s: %v", tx, p.err)
				default:
					outcomes[tx] = p.out
				}
			}
			if expired != "" {
				waitExists(t, cc, root+"/participants/"+expired)
			}
			for _, f := range late {
				if !f.Disarm() {
					lateWrites++ // taken by a write
				}
			}
			late = nil
		}
		t.Logf("%d transactions decided in %v, %d refused for an unknown participant, %d participant expiries, %d disconnects, %d coordinator crashes, %d late writes",
			len(outcomes), time.Since(start), unknown, expiries, disconnects, crashes, lateWrites)
		if n > 3*batch && (crashes == 0 || expiries == 0) {
			t.Errorf("%d coordinator crashes and %d participant expiries: want some of each", crashes, expiries)
		}

		var commits, crashAborts int
		for _, pl := range plans {
			out, ok := outcomes[pl.id]
			if !ok {
				continue
			}
			all := true
			for _, v := range pl.votes {
				all = all && v
			}
			if out.Committed {
				commits++
			}
			crashAt, crash := crashed[pl.id]
			if crash && out.Reason == twophase.ReasonCoordinatorGone {
				crashAborts++
			}
			switch {
			case out.Committed && !all:
				t.Errorf("%s: committed with votes %v", pl.id, pl.votes)
			case !out.Committed && all && !(crash && out.Reason == twophase.ReasonCoordinatorGone):
				t.Errorf("%s: outcome %+v with votes %v (coordinator crashed: %v)", pl.id, out, pl.votes, crash)
			}
			for _, id := range pl.ps {
				r := recs[id]
				r.outcome(t, ctx, pl.id)
				r.mu.Lock()
				if at := r.at[pl.id]; crash && at.Sub(crashAt) > voteTimeout+sessionTimeout {
					t.Errorf("%s: %s saw the outcome %v after its coordinator's crash (vote timeout %v + session timeout %v)", pl.id, id, at.Sub(crashAt), voteTimeout, sessionTimeout)
				}
				for _, o := range r.outcomes[pl.id] {
					if o != out {
						t.Errorf("%s: %s saw %+v, the coordinator %+v", pl.id, id, o, out)
					}
				}
				r.mu.Unlock()
			}
		}
		t.Logf("%d commits, %d aborts (%d for a coordinator's crash)", commits, len(outcomes)-commits, crashAborts)
		if len(outcomes) < n/2 {
			t.Errorf("only %d of %d transactions were proposed", len(outcomes), n)
		}
	})
}

// preparing waits until r's Prepare of tx has begun, or tx's proposal
// returned first (it is then returned, with false).
func preparing(t *testing.T, ctx context.Context, r *rec, tx string, res <-chan proposal) (proposal, bool) {
	t.Helper()
	for {
		r.mu.Lock()
		in := r.entered[tx] > 0
		r.mu.Unlock()
		if in {
			return proposal{}, true
		}
		select {
		case p := <-res:
			return p, false
		case <-r.changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s to be prepared: %v", tx, ctx.Err())
		}
	}
}
