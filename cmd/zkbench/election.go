package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
)

// win is a participant's Campaign returning: it leads from then on.
type win struct {
	id string
	at time.Time
}

// electionRun is the state of one election bench: participants by id, the
// wins they report, and the errors met on the way.
type electionRun struct {
	ctx  context.Context
	path string
	wins chan win

	mu     sync.Mutex
	errs   []string
	byID   map[string]*election.Election
	closer []func()
}

// electionBench is the peers' ElectionBench, latch style. Participants p0,
// p1, ... (one session each) campaign on one path:
//   - first_leader_ms: from starting every campaign to the first win;
//   - failover_ms: in each round the leader resigns, and the time runs until
//     another participant's Campaign returns; the one that resigned campaigns
//     again, at the back of the queue, before the next round, and the next
//     round starts once it waits (READY_START) and 2 ms have passed for its
//     watch requests, so that every round starts from a quiet server;
//   - delete_notify_ms (not in the peers' lines): what failover_ms is
//     compared with, measured in the same rounds: right before each resign,
//     a plain delete by one more session, timed to the NodeDeleted event at
//     another that watches the node (rtt's delete_notify_us, but under the
//     same load and pauses as the hand-overs); a resign is that same plain
//     delete (the next leader knows from our hold mark that we held, see
//     contention.HoldMark), so failover_over_delete_notify, the ratio of
//     the two p50s, is what the participants' own code adds;
//   - kill_rounds: a participant "victim" is made to lead (by hand-overs),
//     then its session is lost without a resign, as when its process is
//     killed: its connection, which goes through a proxy.Ensemble, is
//     black-holed (the server expires the session after the victim's
//     timeout); on the simulator, its session is expired at once. The time
//     runs until another participant leads.
func electionBench(ctx context.Context, args []string) (obj, error) {
	c := newCommon("election")
	n := c.fs.Int("participants", 5, "participants (sessions)")
	rounds := c.fs.Int("rounds", 20, "graceful failover rounds")
	killRounds := c.fs.Int("kill-rounds", 1, "rounds where the leader's session is lost without resigning")
	victimSession := c.fs.Duration("victim-session", 4*time.Second, "session timeout of the victim of a kill round")
	if err := c.parse(args); err != nil {
		return nil, err
	}
	defer c.done()
	if *n < 2 {
		return nil, errors.New("-participants must be at least 2")
	}
	tg := c.target()
	r := &electionRun{ctx: ctx, path: c.path, wins: make(chan win, *n+*rounds+3**killRounds), byID: map[string]*election.Election{}}
	defer r.close()
	admin, err := tg.connect(ctx) // reads and cleans up; never campaigns
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	watcher, err := tg.connect(ctx) // watches the baseline's nodes
	if err != nil {
		return nil, err
	}
	defer watcher.Close()
	baseDir := c.path + "-delete-notify"
	if err := createParents(ctx, admin, baseDir); err != nil {
		return nil, err
	}
	defer func() {
		if err := deleteTree(ctx, admin, baseDir); err != nil {
			fmt.Fprintf(os.Stderr, "zkbench election: cleanup %s: %v\n", baseDir, err)
		}
	}()
	for i := range *n {
		conn, err := tg.connect(ctx)
		if err != nil {
			return nil, err
		}
		r.onClose(func() { conn.Close() })
		if _, err := r.join(conn, fmt.Sprintf("p%d", i)); err != nil {
			return nil, err
		}
	}
	params := obj{{"participants", *n}, {"rounds", *rounds}, {"kill_rounds", *killRounds},
		{"session_ms", c.session.Milliseconds()}, {"victim_session_ms", victimSession.Milliseconds()}, {"path", c.path}}
	out := append(c.header("election", params), field{"participants", *n})

	t0 := time.Now()
	for id := range r.byID {
		r.campaign(id)
	}
	w, ok := r.next("", 30*time.Second)
	if !ok {
		return nil, errors.New("no leader within 30 s")
	}
	out = append(out, field{"first_leader_ms", round(float64(w.at.Sub(t0))/1e6, 3)})
	current := w.id

	var failovers, baseline []time.Duration
	for i := range *rounds {
		b, err := timeDeleteNotify(ctx, admin, watcher, fmt.Sprintf("%s/n%d", baseDir, i))
		if err != nil {
			r.fail("round %d: delete_notify: %v", i, err)
			break
		}
		baseline = append(baseline, b)
		next, d, err := r.handOver(current)
		if err != nil {
			r.fail("round %d: %v", i, err)
			break
		}
		failovers = append(failovers, d)
		current = next
	}
	out = append(out, field{"rounds", len(failovers)}, field{"failover_ms", summary(failovers, millis)},
		field{"delete_notify_ms", summary(baseline, millis)})
	if len(failovers) > 0 && len(baseline) > 0 && median(baseline) > 0 {
		out = append(out, field{"failover_over_delete_notify", round(float64(median(failovers))/float64(median(baseline)), 3)})
	}

	kills := []obj{}
	for k := range *killRounds {
		kr, next, err := r.killRound(tg, current, *victimSession, *n)
		if err != nil {
			r.fail("kill round %d: %v", k, err)
			break
		}
		kills = append(kills, kr)
		current = next
	}
	out = append(out, field{"kill_rounds", kills})
	r.close()
	for _, p := range []string{c.path, contention.HoldMarkDir(c.path)} {
		if err := deleteTree(ctx, admin, p); err != nil {
			fmt.Fprintf(os.Stderr, "zkbench election: cleanup %s: %v\n", p, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(out, field{"errors", append([]string{}, r.errs...)}, field{"ok", len(r.errs) == 0}), nil
}

func (r *electionRun) fail(format string, a ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
	r.mu.Unlock()
}

// onClose registers f to run at the end, after what was registered later.
func (r *electionRun) onClose(f func()) { r.closer = append(r.closer, f) }

func (r *electionRun) close() {
	for i := len(r.closer) - 1; i >= 0; i-- {
		r.closer[i]()
	}
	r.closer = nil
}

// join makes a participant named id on conn.
func (r *electionRun) join(conn zk.Conn, id string) (*election.Election, error) {
	e, err := election.New(conn, r.path, election.WithID(id))
	if err != nil {
		return nil, err
	}
	r.byID[id] = e
	r.onClose(func() { e.Close() })
	return e, nil
}

// campaign starts id's campaign; its win goes to r.wins. It returns our
// node once id waits in the queue (READY_START) or leads.
func (r *electionRun) campaign(id string) (node string) {
	e := r.byID[id]
	sub := e.Subscribe()
	defer sub.Close()
	go func() {
		if _, err := e.Campaign(r.ctx); err != nil {
			if !errors.Is(err, election.ErrClosed) && !errors.Is(err, election.ErrSessionLost) && r.ctx.Err() == nil {
				r.fail("%s: campaign: %v", id, err)
			}
			return
		}
		r.wins <- win{id, time.Now()}
	}()
	for ev := range sub.C {
		switch ev.Type {
		case events.OfferComplete:
			node = ev.Node
		case events.ReadyStart, events.ElectedComplete:
			return node
		case events.Failed:
			return ""
		}
	}
	return ""
}

// next waits for the next win by someone other than prev.
func (r *electionRun) next(prev string, timeout time.Duration) (win, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case w := <-r.wins:
			if w.id != prev {
				return w, true
			}
		case <-deadline:
			return win{}, false
		case <-r.ctx.Done():
			return win{}, false
		}
	}
}

// handOver makes leader resign and campaign again, and returns the next
// leader and the time from the resign to its win.
func (r *electionRun) handOver(leader string) (string, time.Duration, error) {
	start := time.Now()
	if err := r.byID[leader].Resign(r.ctx); err != nil {
		return "", 0, fmt.Errorf("%s: resign: %w", leader, err)
	}
	w, ok := r.next(leader, 30*time.Second)
	if !ok {
		return "", 0, errors.New("no new leader within 30 s")
	}
	r.campaign(leader)
	// Pacing, not a wait for a result: no event says its watch requests
	// are answered, and the next round should start from a quiet server.
	time.Sleep(2 * time.Millisecond)
	return w.id, w.at.Sub(start), nil
}

// killRound adds a victim participant, hands leadership over until it
// leads, loses its session without a resign and times the failover.
func (r *electionRun) killRound(tg *target, current string, session time.Duration, n int) (obj, string, error) {
	conn, kill, revive, err := tg.victim(r.ctx, session)
	if err != nil {
		return nil, "", err
	}
	r.onClose(func() { conn.Close() })
	if _, err := r.join(conn, "victim"); err != nil {
		return nil, "", err
	}
	node := r.campaign("victim")
	for guard := 0; current != "victim" && guard < n+2; guard++ {
		if current, _, err = r.handOver(current); err != nil {
			return nil, "", err
		}
	}
	if current != "victim" {
		return nil, "", errors.New("the victim never led")
	}
	start := time.Now()
	kill()
	w, ok := r.next("victim", 120*time.Second)
	revive() // the victim learns its session is gone, so closing it is quick
	if !ok {
		return nil, "", errors.New("no new leader within 120 s")
	}
	return obj{{"victim_node", node}, {"victim_requested_session_ms", session.Milliseconds()},
		{"failover_ms", round(float64(w.at.Sub(start))/1e6, 3)}, {"new_leader", w.id}}, w.id, nil
}

// victim opens a session that kill ends without closing it: on a server,
// through a proxy.Ensemble in front of the servers, black-holed by kill
// (revive lets the connection through again); on the simulator, expired by
// kill.
func (t *target) victim(ctx context.Context, session time.Duration) (conn zk.Conn, kill, revive func(), err error) {
	if t.sim != nil {
		conn := t.sim.Connect()
		return conn, func() { t.sim.Expire(conn) }, func() {}, nil
	}
	px, err := proxy.NewEnsemble(t.servers)
	if err != nil {
		return nil, nil, nil, err
	}
	through := *t
	through.session = session
	c, err := through.dial(ctx, px.Addrs())
	if err != nil {
		px.Close()
		return nil, nil, nil, err
	}
	return &proxiedConn{Conn: c, proxies: px}, px.Block, px.Unblock, nil
}

// proxiedConn closes its proxies after the connection.
type proxiedConn struct {
	zk.Conn
	proxies *proxy.Ensemble
}

func (c *proxiedConn) Close() error {
	err := c.Conn.Close()
	c.proxies.Close()
	return err
}
