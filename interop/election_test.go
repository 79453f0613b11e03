package interop

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func newElection(t *testing.T, c zk.Conn, path, id string) *election.Election {
	t.Helper()
	e, err := election.New(c, path, election.WithID(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// leaderID reads the leader's id through e.
func leaderID(t *testing.T, ctx context.Context, e *election.Election) string {
	t.Helper()
	l, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return l.ID
}

// participantIDs reads the participants' ids, in queue order, through e.
func participantIDs(t *testing.T, ctx context.Context, e *election.Election) []string {
	t.Helper()
	ps, err := e.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	return ids
}

type campaigned struct {
	term *election.Term
	err  error
}

func campaignAsync(ctx context.Context, e *election.Election) <-chan campaigned {
	ch := make(chan campaigned, 1)
	go func() {
		term, err := e.Campaign(ctx)
		ch <- campaigned{term, err}
	}()
	return ch
}

// A Curator LeaderLatch and two of our participants: one leader at a time,
// in queue order, each side reading the other's participant id.
func TestElectionWithCuratorLeaderLatch(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const dir = "/interop/latch"
	connA, connC := connect(t, srv.Addr()), connect(t, srv.Addr())
	a := newElection(t, connA, dir, "go-a")
	c := newElection(t, connC, dir, "go-c")
	conn := connect(t, srv.Addr())
	cur := startCurator(t, t0, srv.Addr(), "latch", dir, "curator-b")

	// Curator's latch leads; go-a queues second, go-c third.
	cur.ask("start", "STARTED")
	cur.await("LEADER")
	kids := awaitChildren(t, ctx, conn, dir, 1)
	checkName(t, "Curator's", kids[0], "latch-")
	subA, subC := a.Subscribe(), c.Subscribe()
	defer subA.Close()
	defer subC.Close()
	campA := campaignAsync(ctx, a)
	testkit.WaitEvent(t, subA, events.ReadyStart)
	campC := campaignAsync(ctx, c)
	testkit.WaitEvent(t, subC, events.ReadyStart)
	kids = children(t, ctx, conn, dir)
	if len(kids) != 3 {
		t.Fatalf("latch nodes %v, want Curator's, go-a's, go-c's", kids)
	}
	checkName(t, "go-a's", kids[1], "latch-")
	checkName(t, "go-c's", kids[2], "latch-")
	awaitWatch(t, ctx, srv.Addr(), dir+"/"+kids[0], sessionHex(connA))
	awaitWatch(t, ctx, srv.Addr(), dir+"/"+kids[1], sessionHex(connC))
	want := []string{"curator-b", "go-a", "go-c"}
	if ids := participantIDs(t, ctx, c); !slices.Equal(ids, want) {
		t.Errorf("our Participants = %v, want %v", ids, want)
	}
	if ids := cur.ask("participants", "PARTICIPANTS"); ids != "curator-b,go-a,go-c" {
		t.Errorf("Curator's getParticipants = %s, want curator-b,go-a,go-c", ids)
	}
	if id := leaderID(t, ctx, c); id != "curator-b" {
		t.Errorf("our Leader().ID = %q, want curator-b", id)
	}

	// Curator's latch closes: go-a, next in queue, leads; go-c still waits.
	start := time.Now()
	cur.send("close")
	var r campaigned
	select {
	case r = <-campA:
	case <-time.After(step):
		t.Fatalf("go-a did not lead within %v of Curator's close", step)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("failover Curator close -> go-a elected: %s (command to Curator included)", ms(time.Since(start)))
	cur.await("CLOSED")
	if n := cur.saw("NOTLEADER"); n != 1 {
		t.Errorf("Curator's latch said notLeader %d times on close, want once", n)
	}
	select {
	case r := <-campC:
		t.Fatalf("go-c won (%v, %v) while go-a leads", r.term, r.err)
	default:
	}
	termA := r.term

	// A new Curator latch queues behind go-c and reads go-a as the leader.
	cur.ask("start", "STARTED")
	kids = awaitChildren(t, ctx, conn, dir, 3)
	checkName(t, "Curator's new", kids[2], "latch-")
	if id := cur.ask("leader", "LEADERID"); id != "go-a" {
		t.Errorf("Curator's getLeader().getId() = %q, want go-a", id)
	}
	if ids := cur.ask("participants", "PARTICIPANTS"); ids != "go-a,go-c,curator-b" {
		t.Errorf("Curator's getParticipants = %s, want go-a,go-c,curator-b", ids)
	}

	// go-a resigns: go-c leads, and Curator reads it; Curator still follows.
	// go-c has waited on go-a's node since before go-a led (its watch was
	// seen above); go-a's hold mark, whose creation fired go-c's exists
	// watch, tells go-c that go-a holds.
	testkit.AwaitNode(t, conn, contention.HoldMark(termA.Node()))
	start = time.Now()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r = <-campC:
	case <-time.After(step):
		t.Fatalf("go-c did not lead within %v of go-a's Resign", step)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("failover go-a Resign -> go-c elected: %s", ms(time.Since(start)))
	if r.term.Token() <= termA.Token() {
		t.Errorf("go-c's token %#x is not above go-a's %#x", r.term.Token(), termA.Token())
	}
	if id := cur.ask("leader", "LEADERID"); id != "go-c" {
		t.Errorf("Curator's getLeader().getId() = %q, want go-c", id)
	}
	if st := cur.ask("status", "STATUS"); st != "false" || cur.saw("LEADER") != 1 {
		t.Errorf("Curator's latch leads (hasLeadership %s) while go-c leads", st)
	}
}

// A Curator LeaderSelector and our Run on one path: only one runs its
// leadership function at a time, and leadership passes both ways.
func TestElectionWithCuratorLeaderSelector(t *testing.T) {
	needCurator(t)
	srv := testkit.StartServer(t)
	t0 := time.Now()
	ctx := testCtx(t)
	const dir = "/interop/selector"
	conn := connect(t, srv.Addr())
	e := newElection(t, conn, dir, "go-r")
	cur := startCurator(t, t0, srv.Addr(), "selector", dir, "curator-s")

	// Curator leads; our Run queues behind it and does not run.
	cur.ask("start", "STARTED")
	cur.await("LEADING")
	kids := awaitChildren(t, ctx, conn, dir, 1)
	checkName(t, "Curator's", kids[0], "lock-")
	sub := e.Subscribe()
	defer sub.Close()
	var running atomic.Bool
	started, stop := make(chan struct{}), make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- e.Run(ctx, func(ctx context.Context) error {
			running.Store(true)
			defer running.Store(false)
			close(started)
			select {
			case <-stop:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	testkit.WaitEvent(t, sub, events.ReadyStart)
	kids = children(t, ctx, conn, dir)
	if len(kids) != 2 {
		t.Fatalf("selector nodes %v, want Curator's and ours", kids)
	}
	checkName(t, "our", kids[1], "lock-")
	awaitWatch(t, ctx, srv.Addr(), dir+"/"+kids[0], sessionHex(conn))
	if running.Load() {
		t.Fatal("our leadership function runs while Curator's does")
	}
	if id := leaderID(t, ctx, e); id != "curator-s" {
		t.Errorf("our Leader().ID = %q, want curator-s", id)
	}
	if ids := participantIDs(t, ctx, e); !slices.Equal(ids, []string{"curator-s", "go-r"}) {
		t.Errorf("our Participants = %v, want [curator-s go-r]", ids)
	}
	if id := cur.ask("leader", "LEADERID"); id != "curator-s" {
		t.Errorf("Curator's getLeader().getId() = %q, want curator-s", id)
	}

	// Curator's function returns: ours runs.
	start := time.Now()
	cur.send("yield")
	select {
	case <-started:
	case <-time.After(step):
		t.Fatalf("our leadership function did not start within %v of Curator's yield", step)
	}
	t.Logf("handover Curator yield -> our function runs: %s (command to Curator included)", ms(time.Since(start)))
	cur.await("YIELDED")
	if st := cur.ask("status", "STATUS"); st != "false" {
		t.Errorf("Curator hasLeadership = %s while our function runs", st)
	}
	if id := cur.ask("leader", "LEADERID"); id != "go-r" {
		t.Errorf("Curator's getLeader().getId() = %q, want go-r", id)
	}
	if id := leaderID(t, ctx, e); id != "go-r" {
		t.Errorf("our Leader().ID = %q, want go-r", id)
	}

	// Curator queues again behind us; our function returns: Curator's runs.
	if ok := cur.ask("requeue", "REQUEUED"); ok != "true" {
		t.Fatalf("Curator requeue() = %s", ok)
	}
	kids = awaitChildren(t, ctx, conn, dir, 2)
	awaitWatch(t, ctx, srv.Addr(), dir+"/"+kids[0], cur.session)
	if n := cur.saw("LEADING"); n != 1 {
		t.Fatalf("Curator's function started %d times, want once so far", n)
	}
	start = time.Now()
	close(stop)
	cur.await("LEADING")
	if running.Load() {
		t.Error("Curator's function started while ours still runs")
	}
	t.Logf("handover our function returns -> Curator's runs: %s (stdout pipe included)", ms(time.Since(start)))
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(step):
		t.Fatalf("Run did not return within %v of its function", step)
	}
	cur.send("yield")
	cur.await("YIELDED")
	cur.ask("close", "CLOSED")
}
