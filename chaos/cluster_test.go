package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
)

// sessionTimeout is every worker's session timeout. A client notices a
// silent connection after two thirds of it and the server expires the
// session after all of it (at most a 200 ms tick later): the third in
// between is what keeps a stalled holder's Lost ahead of the next grant.
const sessionTimeout = 3 * time.Second

// cluster is the ensemble under test and the clients connected to it, each
// through its own proxy.
type cluster struct {
	t   *testing.T
	ens *testkit.Ensemble

	mu      sync.Mutex
	clients []*client
}

// client is one worker's connection and the proxy it goes through.
type client struct {
	name   string
	px     *testkit.EnsembleProxy
	conn   zk.Conn
	access access
	// prefix is the path its recipes create and delete under: reply faults
	// are armed for requests on it.
	prefix string
	// recs record the contention handles on the connection (locks,
	// elections, ...): a session is closed on the server only once each
	// has handled the cut and none holds (see injector.expire).
	mu   sync.Mutex
	recs []*testkit.Recorder
	busy atomic.Bool // a fault is on it
}

func (c *client) addRecorder(r *testkit.Recorder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r)
}

// mark is where each recorder's transcript stands (see settled).
func (c *client) mark() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make([]int, len(c.recs))
	for i, r := range c.recs {
		m[i] = len(r.Events())
	}
	return m
}

// settled reports whether, since mark, every instance of every recorded
// handle has published SUSPENDED (its actor has handled the cut, so no
// reply read before it can grant anything any more) and no term is open.
func (c *client) settled(mark []int) bool {
	c.mu.Lock()
	recs := slices.Clone(c.recs)
	c.mu.Unlock()
	for i, r := range recs {
		evs := r.Events()
		seen := map[string]bool{} // instance → SUSPENDED since mark
		for j, ev := range evs {
			if _, ok := seen[ev.Instance]; !ok {
				seen[ev.Instance] = false
			}
			if j >= mark[i] && ev.Type == events.Suspended {
				seen[ev.Instance] = true
			}
		}
		for _, ok := range seen {
			if !ok {
				return false
			}
		}
		if hasOpenTerm(evs) {
			return false
		}
	}
	return true
}

// connect opens a session through a new proxy, with access a: a secured
// client's proxy terminates TLS in front of the members' secure ports,
// and its prefix, which reply faults match in the proxy, is named as the
// server names it, under the chroot. The test's cleanup closes both (the
// suite closes them itself before its final checks).
func (c *cluster) connect(ctx context.Context, name, prefix string, a access) *client {
	c.t.Helper()
	var (
		px  *testkit.EnsembleProxy
		err error
	)
	if a == securedAccess {
		px, err = testkit.NewTLSEnsembleProxy(c.ens)
		prefix = securedChroot + prefix
	} else {
		px, err = testkit.NewEnsembleProxy(c.ens.Addrs())
	}
	if err != nil {
		c.t.Fatalf("proxy for %s: %v", name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := zk.Connect(cctx, px.Addrs(), append(c.options(a), zk.WithSessionTimeout(sessionTimeout))...)
	if err != nil {
		px.Close()
		c.t.Fatalf("connect %s: %v", name, err)
	}
	cl := &client{name: name, px: px, conn: conn, prefix: prefix, access: a}
	c.t.Cleanup(cl.close)
	c.mu.Lock()
	c.clients = append(c.clients, cl)
	c.mu.Unlock()
	return cl
}

// close closes the connection (through an unblocked proxy, so that the
// server ends the session at once) and then the proxy. Idempotent.
func (cl *client) close() {
	cl.px.Unblock()
	cl.conn.Close()
	cl.px.Close()
}

// observer opens a plain connection, not through a proxy, for the
// checks.
func (c *cluster) observer(ctx context.Context) zk.Conn {
	c.t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := zk.Connect(cctx, c.ens.Addrs(), zk.WithSessionTimeout(10*time.Second))
	if err != nil {
		c.t.Fatalf("observer: %v", err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// faultKind is a kind of fault the schedule injects.
type faultKind int

const (
	fCut           faultKind = iota // every connection of a client cut
	fStallShort                     // a client's traffic held, shorter than the session timeout
	fStallLong                      // ... longer: the session expires
	fLoseCreate                     // the reply to a create lost (applied, connection cut)
	fLoseDelete                     // the reply to a delete lost
	fLoseMulti                      // the reply to a multi lost (a queue's ack, a lock's release, a barrier's join)
	fDelay                          // a reply held back for a while
	fKillLeader                     // the ensemble's leader killed, then restarted
	fKillFollower                   // a follower killed, then restarted
	fExpire                         // a session closed on the server
	fSecuredCut                     // a secured client's connections cut (see securedLock)
	fSecuredExpire                  // a secured client's session closed on the server
	numFaultKinds
)

var faultNames = [numFaultKinds]string{
	fCut: "cut", fStallShort: "stall<timeout", fStallLong: "stall>timeout", fLoseCreate: "lost-create-reply",
	fLoseDelete: "lost-delete-reply", fLoseMulti: "lost-multi-reply", fDelay: "delayed-reply", fKillLeader: "kill-leader",
	fKillFollower: "kill-follower", fExpire: "session-closed",
	fSecuredCut: "secured-cut", fSecuredExpire: "secured-session-closed",
}

func (k faultKind) String() string { return faultNames[k] }

// injector runs the seeded fault schedule: it picks a fault kind (the
// least injected first, ties at random), a target and the fault's
// parameters from its rng, launches the fault and waits a random gap
// before the next. A fault whose precondition does not hold (a client
// busy with another fault, a reply fault that no request matched in time)
// is not counted; its kind comes up again.
type injector struct {
	t       *testing.T
	c       *cluster
	rng     *rand.Rand
	targets []*client
	secured []*client // the targets of the secured group (fSecuredCut, fSecuredExpire)

	counts  [numFaultKinds]atomic.Int64
	tried   [numFaultKinds]int
	ensBusy atomic.Bool // a member is down, or a session is being closed (which needs the member that knows it)
	active  atomic.Int32
	skipped atomic.Int64 // session closes given up: the handles did not settle in time
	wg      sync.WaitGroup

	errMu sync.Mutex
	errs  []string
	// divergences: the kills after which ZooKeeper's digest mismatch
	// count had grown (the servers' copies of the data differ).
	divergences []string
	mismatches  int64
}

func newInjector(t *testing.T, c *cluster, seed uint64, targets []*client) *injector {
	in := &injector{t: t, c: c, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), targets: targets}
	for _, cl := range targets {
		if cl.access == securedAccess {
			in.secured = append(in.secured, cl)
		}
	}
	return in
}

func (in *injector) fail(format string, args ...any) {
	in.errMu.Lock()
	defer in.errMu.Unlock()
	in.errs = append(in.errs, fmt.Sprintf(format, args...))
}

// between returns a random duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// wait waits d or until ctx ends; it reports whether d passed.
func wait(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// run injects faults until the deadline, and past it (for up to grace
// more) until every kind was injected at least once: a short run can draw
// a fault that finds nothing to act on (no delete in flight to lose) every
// time it comes up. Then it waits for the faults in progress to end
// (stalls lifted, members restarted, held replies let go).
func (in *injector) run(ctx context.Context, until time.Time, grace time.Duration) {
	for ctx.Err() == nil && (time.Now().Before(until) || (!in.allInjected() && time.Now().Before(until.Add(grace)))) {
		kind := in.pick()
		in.tried[kind]++
		in.launch(ctx, kind)
		if !wait(ctx, between(in.rng, 50*time.Millisecond, 400*time.Millisecond)) {
			break
		}
	}
	in.wg.Wait()
}

// allInjected reports whether every kind was injected at least once.
func (in *injector) allInjected() bool {
	for k := range numFaultKinds {
		if in.counts[k].Load() == 0 {
			return false
		}
	}
	return true
}

// pick returns the kind injected least so far (ties: the least tried, then
// at random), so that every kind comes up early and often.
func (in *injector) pick() faultKind {
	best, bestN := []faultKind{}, int64(-1)
	for k := range numFaultKinds {
		n := in.counts[k].Load()*1000 + int64(in.tried[k])
		switch {
		case bestN < 0 || n < bestN:
			best, bestN = []faultKind{k}, n
		case n == bestN:
			best = append(best, k)
		}
	}
	return best[in.rng.IntN(len(best))]
}

// launch starts one fault of kind in the background, its parameters drawn
// now from the schedule's rng.
func (in *injector) launch(ctx context.Context, kind faultKind) {
	// Every draw is made first, whatever happens next, so that a seed
	// always yields the same sequence of decisions.
	var (
		target       = in.targets[in.rng.IntN(len(in.targets))]
		securedPick  = in.rng.IntN(max(len(in.secured), 1))
		down         = between(in.rng, 300*time.Millisecond, 1500*time.Millisecond)
		pickFollower = in.rng.IntN(2)
		short        = between(in.rng, 200*time.Millisecond, sessionTimeout*5/6)
		long         = between(in.rng, sessionTimeout+300*time.Millisecond, sessionTimeout+1500*time.Millisecond)
		delayOps     = []testkit.OpKind{testkit.OpCreate, testkit.OpDelete, testkit.OpChildren, testkit.OpGet, testkit.OpExists}
		delayOp      = delayOps[in.rng.IntN(len(delayOps))]
		held         = between(in.rng, 50*time.Millisecond, 1200*time.Millisecond)
	)
	if in.active.Load() >= 4 {
		return // enough at once; the kind comes up again
	}
	switch kind {
	case fKillLeader, fKillFollower:
		if !in.ensBusy.CompareAndSwap(false, true) {
			return
		}
		in.goFault(func() {
			defer in.ensBusy.Store(false)
			in.kill(ctx, kind, pickFollower, down)
		})
		return
	}
	cl := target
	switch kind {
	case fSecuredCut, fSecuredExpire:
		if len(in.secured) == 0 {
			return
		}
		cl = in.secured[securedPick]
	}
	if !cl.busy.CompareAndSwap(false, true) {
		return
	}
	var do func()
	switch kind {
	case fCut, fSecuredCut:
		do = func() { cl.px.Cut(); in.counts[kind].Add(1) }
	case fStallShort:
		do = func() { in.stall(ctx, cl, kind, short) }
	case fStallLong:
		do = func() { in.stall(ctx, cl, kind, long) }
	case fLoseCreate:
		do = func() { in.loseReply(ctx, cl, kind, testkit.OpCreate) }
	case fLoseDelete:
		do = func() { in.loseReply(ctx, cl, kind, testkit.OpDelete) }
	case fLoseMulti:
		do = func() { in.loseReply(ctx, cl, kind, testkit.OpMulti) }
	case fDelay:
		do = func() { in.delay(ctx, cl, delayOp, held) }
	case fExpire, fSecuredExpire:
		if !in.ensBusy.CompareAndSwap(false, true) {
			cl.busy.Store(false)
			return
		}
		do = func() {
			defer in.ensBusy.Store(false)
			in.expire(ctx, kind, cl)
		}
	}
	in.goFault(func() {
		defer cl.busy.Store(false)
		do()
	})
}

func (in *injector) goFault(f func()) {
	in.active.Add(1)
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer in.active.Add(-1)
		f()
	}()
}

// stall turns the client's proxies into a black hole for d: the client
// hears nothing (it gives the connection up after two thirds of the
// session timeout), and after a long stall the server expires the session.
func (in *injector) stall(ctx context.Context, cl *client, kind faultKind, d time.Duration) {
	cl.px.Block()
	in.counts[kind].Add(1)
	wait(ctx, d)
	cl.px.Unblock()
}

// loseReply arms a lost reply on the member carrying the client's session,
// for its next request of kind op under its recipe's path, and counts it
// once the server applied the request. It disarms it if nothing matched
// within 3 s.
func (in *injector) loseReply(ctx context.Context, cl *client, kind faultKind, op testkit.OpKind) {
	m, ok := cl.px.Carrier(cl.conn.SessionID())
	if !ok {
		return
	}
	f := cl.px.Member(m).LoseNextReply(op, cl.prefix)
	if in.fired(ctx, f) {
		in.counts[kind].Add(1)
	}
}

// fired waits up to 3 s for f to fire; if it did not, it disarms it (or,
// when a request took it meanwhile, waits a little longer for its reply).
func (in *injector) fired(ctx context.Context, f *testkit.ReplyFault) bool {
	tm := time.NewTimer(3 * time.Second)
	defer tm.Stop()
	select {
	case <-f.Fired():
		return true
	case <-ctx.Done():
		f.Release()
		return false
	case <-tm.C:
	}
	if f.Disarm() {
		return false
	}
	tm.Reset(sessionTimeout)
	select {
	case <-f.Fired():
		return true
	case <-tm.C: // the connection ended between the request and its reply
		return false
	case <-ctx.Done():
		return false
	}
}

// delay holds the reply to the client's next request of kind op (and
// everything behind it on that connection) for d.
func (in *injector) delay(ctx context.Context, cl *client, op testkit.OpKind, d time.Duration) {
	m, ok := cl.px.Carrier(cl.conn.SessionID())
	if !ok {
		return
	}
	f := cl.px.Member(m).HoldNextReply(op, cl.prefix)
	defer f.Release()
	if in.fired(ctx, f) {
		in.counts[fDelay].Add(1)
		wait(ctx, d)
	}
}

// expire closes the client's session on the server, as the ensemble does
// when a client has been away for the session timeout: the client is cut
// off first (it sees SUSPENDED at once, and its holds end), and once each
// of its handles has handled that and none holds, the session is closed; then the client may
// reconnect and learns it is gone. Closing a session behind the back of a
// client that still trusts its holds would be a fault no client library
// can survive, and is what fencing tokens are for (the guarded writes are
// checked for it).
func (in *injector) expire(ctx context.Context, kind faultKind, cl *client) {
	id := cl.conn.SessionID()
	if id == 0 {
		return
	}
	mark := cl.mark()
	cl.px.Block()
	defer cl.px.Unblock()
	cl.px.Cut()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for cl.conn.State() != zk.StateSuspended || !cl.settled(mark) {
		if time.Now().After(deadline) {
			// Not injected: the precondition did not come in time (on a
			// loaded machine); the kind comes up again.
			in.skipped.Add(1)
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
	ectx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := cl.px.ExpireSession(ectx, id)
	switch {
	case err == nil:
		in.counts[kind].Add(1)
	case errors.Is(err, proxy.ErrSessionGone), ctx.Err() != nil:
	default:
		in.fail("expire %s: %v", cl.name, err)
	}
}

// kill kills a member (the leader, or a follower picked by pick), waits
// down, and restarts it.
func (in *injector) kill(ctx context.Context, kind faultKind, pick int, down time.Duration) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	leader, err := in.c.ens.Leader(lctx)
	if err != nil {
		return // between leaders: try again later
	}
	victim := leader
	if kind == fKillFollower {
		victim = (leader + 1 + pick) % 3
	}
	if err := in.c.ens.Kill(victim); err != nil {
		in.fail("kill server %d: %v", victim, err)
		return
	}
	in.counts[kind].Add(1)
	wait(ctx, down)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer rcancel()
	// Without its data: restarted with it, a member syncs by a DIFF that
	// ZooKeeper 3.8.0 can get wrong, and then serves nodes deleted long
	// before (testkit.Ensemble.RestartEmpty). A barrier member that counted
	// such a node let the others through early.
	if err := in.c.ens.RestartEmpty(rctx, victim); err != nil {
		in.fail("restart server %d: %v", victim, err)
		return
	}
	// The next kill waits until every member has synced with the leader,
	// and a second more for the synced transactions to reach the members'
	// logs: ZooKeeper 3.8 loses committed transactions when a member is
	// killed during its sync or just after (ZOOKEEPER-4646, -4643, -4785).
	// Killing members that fast found no bug of ours, only resurrected
	// nodes (see testkit.Ensemble.WaitSynced).
	if err := in.c.ens.WaitSynced(rctx); err != nil {
		in.fail("sync after restarting server %d: %v", victim, err)
		return
	}
	wait(ctx, time.Second)
	if n, err := in.c.ens.DigestMismatches(rctx); err == nil && n > in.mismatches {
		in.errMu.Lock()
		in.divergences = append(in.divergences, fmt.Sprintf("%s of server %d (mismatches %d → %d)", kind, victim, in.mismatches, n))
		in.errMu.Unlock()
		in.mismatches = n
	}
}

// report logs the counts and fails the test for a kind never injected.
func (in *injector) report(t *testing.T, requireAll bool) {
	t.Helper()
	var b strings.Builder
	for k := range numFaultKinds {
		fmt.Fprintf(&b, " %s=%d", k, in.counts[k].Load())
	}
	t.Logf("faults injected:%s (session closes given up: %d)", b.String(), in.skipped.Load())
	in.errMu.Lock()
	for _, e := range in.errs {
		t.Errorf("fault injection: %s", e)
	}
	if len(in.divergences) > 0 {
		t.Logf("ZooKeeper's servers diverged (digest mismatches, a server bug; see testkit.Ensemble.WaitSynced) after: %s",
			strings.Join(in.divergences, "; "))
	}
	in.errMu.Unlock()
	if !requireAll {
		return
	}
	for k := range numFaultKinds {
		if in.counts[k].Load() == 0 {
			t.Errorf("fault kind %s was never injected (tried %d times)", k, in.tried[k])
		}
	}
}
