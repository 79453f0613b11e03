package twophase_test

import (
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
// participant session expiries and connection losses: every participant sees the coordinator's
// outcome, and a transaction commits exactly when all of its votes are
// yes. TWOPHASE_SEED replays a run; TWOPHASE_N sets the number of
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
		c := newCoordinator(t, cc, twophase.WithVoteTimeout(30*time.Second))

		const batch = 10
		outcomes := map[string]twophase.Outcome{}
		var unknown, expiries, disconnects int
		start := time.Now()
		for i := 0; i < n; i += batch {
			chans := map[string]<-chan proposal{}
			for _, pl := range plans[i:min(i+batch, n)] {
				chans[pl.id] = proposeAsync(ctx, c, pl.id, []byte(pl.id), pl.ps...)
			}
			var expired string
			switch rng.IntN(4) {
			case 0:
				expired = ids[rng.IntN(len(ids))]
				tg.Expire(t, conns[expired])
				expiries++
			case 1: // a short connection loss: the session survives
				id := ids[rng.IntN(len(ids))]
				tg.Disconnect(t, conns[id])
				tg.Reconnect(t, conns[id])
				disconnects++
			}
			for tx, ch := range chans {
				p := recv(t, ctx, ch)
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
		}
		t.Logf("%d transactions decided in %v, %d refused for an unknown participant, %d expiries, %d disconnects",
			len(outcomes), time.Since(start), unknown, expiries, disconnects)

		var commits int
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
			if out.Committed != all {
				t.Errorf("%s: outcome %+v with votes %v", pl.id, out, pl.votes)
			}
			for _, id := range pl.ps {
				r := recs[id]
				r.outcome(t, ctx, pl.id)
				r.mu.Lock()
				for _, o := range r.outcomes[pl.id] {
					if o != out {
						t.Errorf("%s: %s saw %+v, the coordinator %+v", pl.id, id, o, out)
					}
				}
				r.mu.Unlock()
			}
		}
		t.Logf("%d commits, %d aborts", commits, len(outcomes)-commits)
		if len(outcomes) < n/2 {
			t.Errorf("only %d of %d transactions were proposed", len(outcomes), n)
		}
	})
}
