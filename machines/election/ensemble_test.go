package election_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestOneLeaderWhileTheEnsembleLeaderDies runs an election on a real 3-node
// ensemble while the ensemble's own leader is killed and restarted, and
// checks from the lifecycle events that no two terms overlap and that
// tokens grow from term to term.
func TestOneLeaderWhileTheEnsembleLeaderDies(t *testing.T) {
	ens := testkit.StartEnsemble(t)
	ctx := ctxT(t)
	const participants = 3
	var (
		mu    sync.Mutex
		terms []leaderTerm
		ended = make(chan struct{}, 10000)
		wg    sync.WaitGroup
	)
	runCtx, stop := context.WithCancel(ctx)
	for i := range participants {
		c, err := zk.Connect(ctx, ens.Addrs(), zk.WithSessionTimeout(4*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		id := fmt.Sprintf("p%d", i)
		e := newElection(t, c, "/election/ensemble", id)
		sub := e.Subscribe()
		wg.Add(2)
		go func() { // record terms from the events
			defer wg.Done()
			open := map[uint64]*leaderTerm{}
			for ev := range sub.C {
				switch ev.Type {
				case events.ElectedComplete:
					open[ev.Term] = &leaderTerm{who: id, start: ev.Time, token: ev.Token}
				case events.StopStart, events.Failed:
					if tm, ok := open[ev.Term]; ok {
						tm.end = ev.Time
						mu.Lock()
						terms = append(terms, *tm)
						mu.Unlock()
						delete(open, ev.Term)
						ended <- struct{}{}
					}
				}
			}
		}()
		go func() { // campaign, lead briefly, resign; again and again
			defer wg.Done()
			defer sub.Close()
			defer e.Close()
			for runCtx.Err() == nil {
				term, err := e.Campaign(runCtx)
				if err != nil {
					continue // lost while waiting: campaign again
				}
				select {
				case <-term.Lost():
				case <-time.After(20 * time.Millisecond): // lead for a while
				case <-runCtx.Done():
				}
				e.Resign(ctx)
			}
		}()
	}
	for round := range 2 {
		leader, err := ens.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitTerms(t, ended, 5)
		if err := ens.Kill(leader); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed the ensemble's leader, server %d", round, leader)
		waitTerms(t, ended, 5)
		// Empty: with its data it may sync wrongly (see RestartEmpty).
		if err := ens.RestartEmpty(ctx, leader); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	wg.Wait()
	slices.SortFunc(terms, func(a, b leaderTerm) int { return a.start.Compare(b.start) })
	t.Logf("%d terms", len(terms))
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		if cur.start.Before(prev.end) {
			t.Errorf("two leaders: %s from %v overlaps %s until %v", cur.who, cur.start.Format(time.StampMicro), prev.who, prev.end.Format(time.StampMicro))
		}
		if cur.token <= prev.token {
			t.Errorf("token %#x of %s not above %#x of %s", cur.token, cur.who, prev.token, prev.who)
		}
	}
}

type leaderTerm struct {
	who        string
	start, end time.Time
	token      int64
}

// waitTerms waits until n more terms ended.
func waitTerms(t *testing.T, ended <-chan struct{}, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case <-ended:
		case <-timeout:
			t.Fatalf("fewer than %d terms ended within 30s", n)
		}
	}
}
