package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// config says what one run of the suite does.
type config struct {
	duration time.Duration // of the fault schedule
	seed     uint64
	// brokenLock makes the lock workers use brokenLock, which holds
	// without waiting for its predecessor.
	brokenLock bool
	// locksOnly runs the lock workers alone.
	locksOnly bool
	// requireAllFaults fails the run if a fault kind was never injected.
	requireAllFaults bool
}

// Recipe paths. Everything a recipe creates is under root; the guarded
// writes go to fence nodes outside it.
const (
	root       = "/chaos"
	fenceRoot  = "/fence"
	lockPaths  = 3
	lockHolds  = 4 // handles per lock path
	electors   = 5
	producers  = 4
	consumers  = 4
	fifoProds  = 2
	shardProds = 2
	shards     = 4 // of the sharded queue
	electionP  = root + "/election"
	queuePath  = root + "/queue"
	fifoPath   = root + "/fifo"
	shardPath  = root + "/sharded"
	lockPrefix = root + "/lock"
	maxBacklog = 200 // items offered and not yet acked, per queue
)

func lockPath(i int) string { return fmt.Sprintf("%s/%d", lockPrefix, i) }

// worker is one goroutine doing one recipe's operations in a loop.
type worker struct {
	name string
	ops  atomic.Int64
	last atomic.Int64 // UnixNano of the last completed operation
}

func (w *worker) progress() {
	w.ops.Add(1)
	w.last.Store(time.Now().UnixNano())
}

// report is what a run found.
type report struct {
	violations []string
	lockHist   *history // per lock path and the election
	fifoHist   *history
}

func (r *report) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// suite is one run: the cluster, the workers and what they recorded.
type suite struct {
	t   *testing.T
	cfg config
	c   *cluster
	sim *testkit.Sim // instead of c: connections are the simulator's
	rep *report

	workers []*worker
	wg      sync.WaitGroup

	countMu    sync.Mutex
	countsM    map[string]int
	intrusions []string // the intruder's writes the server let through

	fenceMu sync.Mutex
	fenced  []fencedWrite

	locks   []*lockHandle
	elect   []*electHandle
	queue   *queueSet
	fifo    *queueSet
	sharded *queueSet // the queue of shards: a layout of its own

	simClients []*client

	rws      []*rwHandle
	sems     []*semHandle
	barriers []*barrier.DoubleBarrier
	barrier  *barrierLedger
	// barrierWG: the barrier members, which stop between rounds once the
	// producers stop.
	barrierWG sync.WaitGroup
	// producers: the queues' producers and the 2PC proposer. drain and
	// settleTwoPhase wait for them first: an Offer or Propose still in
	// flight when they stop may land after the queue looked empty.
	producers sync.WaitGroup
	parts     []*twophase.Participant
	coord     *twophase.Coordinator
	tpc       *tpcLedger
}

// connect opens a worker's connection: through a proxy of its own to the
// ensemble, or to the simulator.
func (s *suite) connect(ctx context.Context, who, prefix string) *client {
	return s.connectAs(ctx, who, prefix, plainAccess)
}

// connectAs is connect with access a to the ensemble; the simulator's
// connections are all plain.
func (s *suite) connectAs(ctx context.Context, who, prefix string, a access) *client {
	if s.sim == nil {
		return s.c.connect(ctx, who, prefix, a)
	}
	cl := &client{name: who, conn: s.sim.Connect(), prefix: prefix}
	s.simClients = append(s.simClients, cl)
	s.t.Cleanup(func() { cl.conn.Close() })
	return cl
}

func (s *suite) count(what string) {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	s.countsM[what]++
}

func (s *suite) fence(w fencedWrite) {
	s.fenceMu.Lock()
	defer s.fenceMu.Unlock()
	s.fenced = append(s.fenced, w)
}

func (s *suite) newWorker(name string) *worker {
	w := &worker{name: name}
	s.workers = append(s.workers, w)
	return w
}

func (s *suite) rng(i int) *rand.Rand {
	return rand.New(rand.NewPCG(s.cfg.seed, uint64(i)+1))
}

// runSuite runs the suite and returns what it found; it fails t itself
// only when it cannot run.
func runSuite(t *testing.T, cfg config) *report {
	// Every member has a secure client port beside its plain one, for the
	// secured group (see securedLock).
	ens := testkit.StartEnsemble(t, testkit.WithContainerCheckInterval(200*time.Millisecond), zkserver.WithTLS(true))
	ctx := t.Context()
	s := &suite{t: t, cfg: cfg, c: &cluster{t: t, ens: ens}, rep: &report{lockHist: newHistory(), fifoHist: newHistory()},
		countsM: map[string]int{}}
	obs := s.c.observer(ctx)
	for i := range lockPaths {
		mustCreate(t, ctx, obs, fmt.Sprintf("%s/lock%d", fenceRoot, i))
	}
	mustCreate(t, ctx, obs, fenceRoot+"/election")
	mustCreate(t, ctx, obs, fenceRoot+"/rw")
	// The queue's node is persistent, as the queue itself now makes it
	// (a reaped container reused item names: see the package doc).
	mustCreate(t, ctx, obs, queuePath)
	s.c.createSecuredFence(ctx)

	runCtx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	prodCtx, stopProducers := context.WithCancel(runCtx)
	defer stopProducers()

	s.startLocks(runCtx)
	s.startIntruder(runCtx)
	if !cfg.locksOnly {
		s.startElection(runCtx)
		s.queue = s.startQueue(runCtx, prodCtx, queuePath, producers, consumers, 1, false)
		s.fifo = s.startQueue(runCtx, prodCtx, fifoPath, fifoProds, 1, 1, true)
		s.sharded = s.startQueue(runCtx, prodCtx, shardPath, shardProds, consumers, shards, false)
		s.startRWLock(runCtx)
		s.startSemaphore(runCtx)
		s.startBarrier(runCtx, prodCtx)
		s.startTwoPhase(runCtx, prodCtx)
	}
	targets := slices.Clone(s.c.clients)
	if !s.waitProgress(ctx, time.Now(), 30*time.Second) {
		s.rep.violate("the workers did not all make progress within 30 s of their start, before any fault")
	}

	// The faults.
	in := newInjector(t, s.c, cfg.seed, targets)
	start := time.Now()
	var grace time.Duration
	if cfg.requireAllFaults {
		grace = 30 * time.Second
	}
	in.run(ctx, start.Add(cfg.duration), grace)
	quiet := time.Now()
	t.Logf("faults for %v, the last one over %v later (past the duration only until every kind was injected)",
		cfg.duration, quiet.Sub(start.Add(cfg.duration)).Round(time.Millisecond))
	in.report(t, cfg.requireAllFaults)

	// Liveness: every worker makes progress again within the session
	// timeout + 2 s of the faults' end.
	if !s.waitProgress(ctx, quiet, sessionTimeout+2*time.Second) {
		for _, w := range s.workers {
			if w.last.Load() <= quiet.UnixNano() {
				s.rep.violate("liveness: %s made no progress within %v after the faults stopped (%d operations before)",
					w.name, sessionTimeout+2*time.Second, w.ops.Load())
			}
		}
		s.logStuck(ctx, obs)
	}

	// Drain the queues, then stop everything.
	s.stopProducers(ctx, stopProducers)
	if !cfg.locksOnly {
		for _, q := range s.queues() {
			s.drain(ctx, obs, q)
		}
		s.settleTwoPhase(ctx, obs)
		s.finishBarrier(ctx)
	}
	stopWorkers()
	s.wg.Wait()
	closed := time.Now()
	s.closeHandles()
	for _, cl := range s.c.clients {
		cl.close()
	}
	s.checkNoNodesLeft(ctx, obs)
	if s.c != nil {
		// The checks below assume the servers kept what they committed:
		// a digest mismatch says their copies diverged, which is
		// ZooKeeper's fault, not the recipes'. It is reported beside any
		// violation, not as one.
		n, err := s.c.ens.DigestMismatches(ctx)
		s.t.Logf("ZooKeeper digest mismatches at the end: %d (%v)", n, err)
	}

	// The checks.
	var holds, terms []hold
	for _, h := range s.locks {
		hs, problems := h.l.Holds(h.resource, h.who, closed)
		holds = append(holds, hs...)
		for _, p := range problems {
			s.rep.violate("%s", p)
		}
		h.history(s.rep.lockHist, hs)
	}
	for _, e := range s.elect {
		hs, problems := holdsFromEvents(electionP, e.who, exclusive, e.rec.Events(), closed)
		terms = append(terms, hs...)
		for _, p := range problems {
			s.rep.violate("%s", p)
		}
		e.history(s.rep.lockHist, hs)
	}
	for _, h := range s.rws {
		r, p1 := holdsFromEvents(rwPath, h.who, readHold, h.rrec.Events(), closed)
		w, p2 := holdsFromEvents(rwPath, h.who, writeHold, h.wrec.Events(), closed)
		holds = append(append(holds, r...), w...)
		for _, p := range append(p1, p2...) {
			s.rep.violate("%s", p)
		}
	}
	for _, h := range s.sems {
		l, problems := holdsFromEvents(semPath, h.who, leaseHold, h.rec.Events(), closed)
		holds = append(holds, l...)
		for _, p := range problems {
			s.rep.violate("%s", p)
		}
	}
	for _, v := range checkExclusion(append(slices.Clone(holds), terms...), semMax) {
		s.rep.violate("%s", v)
	}
	for _, v := range checkTermTokens(terms) {
		s.rep.violate("election: %s", v)
	}
	for _, v := range checkFencing(s.fenced) {
		s.rep.violate("%s", v)
	}
	for _, v := range s.intrusions {
		s.rep.violate("%s", v)
	}
	if n := s.countsM["intruder.more-intrusions"]; n > 0 {
		s.rep.violate("intruder: %d more writes let through", n)
	}
	if s.queue != nil {
		for _, q := range s.queues() {
			for _, v := range q.ledger.check() {
				s.rep.violate("%s: %s", q.path, v)
			}
		}
		s.fifo.history(s.rep.fifoHist)
		for _, v := range s.barrier.check() {
			s.rep.violate("barrier: %s", v)
		}
		for _, v := range s.tpc.check() {
			s.rep.violate("2pc: %s", v)
		}
	}
	s.logCounts(in, holds, terms)
	return s.rep
}

func (s *suite) logCounts(in *injector, holds, terms []hold) {
	var b strings.Builder
	s.countMu.Lock()
	for _, k := range slices.Sorted(maps.Keys(s.countsM)) {
		fmt.Fprintf(&b, " %s=%d", k, s.countsM[k])
	}
	s.countMu.Unlock()
	s.t.Logf("operations:%s", b.String())
	s.t.Logf("checked: %d lock holds, %d leadership terms, %d guarded writes", len(holds), len(terms), len(s.fenced))
	for _, q := range s.queues() {
		o, u, d, a := q.ledger.counts()
		s.t.Logf("%s: %d items offered (+%d with unknown outcome), %d deliveries, %d acked", q.path, o, u, d, a)
	}
}

// waitProgress waits until every worker completed an operation after
// since, polling; it reports whether they all did within d of since.
func (s *suite) waitProgress(ctx context.Context, since time.Time, d time.Duration) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := since.Add(d)
	for {
		all := true
		for _, w := range s.workers {
			if w.last.Load() <= since.UnixNano() {
				all = false
				break
			}
		}
		if all {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
}

func (s *suite) closeHandles() {
	for _, h := range s.locks {
		if err := h.l.Close(); err != nil {
			s.rep.violate("close %s: %v", h.who, err)
		}
	}
	for _, e := range s.elect {
		if err := e.e.Close(); err != nil {
			s.rep.violate("close %s: %v", e.who, err)
		}
	}
	for _, h := range s.rws {
		if err := h.rw.Close(); err != nil {
			s.rep.violate("close %s: %v", h.who, err)
		}
	}
	for _, h := range s.sems {
		if err := h.s.Close(); err != nil {
			s.rep.violate("close %s: %v", h.who, err)
		}
	}
	for i, d := range s.barriers {
		if err := d.Close(); err != nil {
			s.rep.violate("close barrier member %d: %v", i, err)
		}
	}
	for i, p := range s.parts {
		if err := p.Close(); err != nil {
			s.rep.violate("close 2pc participant %d: %v", i, err)
		}
	}
	if s.coord != nil {
		s.coord.Close()
	}
	for _, q := range s.queues() {
		for i, h := range q.handles {
			if err := h.Close(); err != nil {
				s.rep.violate("close %s handle %d: %v", q.path, i, err)
			}
		}
	}
}

// checkNoNodesLeft waits (up to 15 s) until nothing is left under root,
// and under the secured group's chroot, but the recipes' own directories
// and their parents (containers, which the server reaps), and reports what
// is.
func (s *suite) checkNoNodesLeft(ctx context.Context, obs zk.Conn) {
	dirs := []string{electionP, queuePath, fifoPath, shardPath, rwPath, semPath, semaphore.LeasesDir(semPath), barrierPath,
		tpcRoot + "/tx", tpcRoot + "/participants"}
	for i := range participants {
		dirs = append(dirs, fmt.Sprintf("%s/inbox/part%d", tpcRoot, i))
	}
	for i := range lockPaths {
		dirs = append(dirs, lockPath(i))
	}
	for k := range shards {
		dirs = append(dirs, shardDir(k))
	}
	allowed := func(p string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return d == p || strings.HasPrefix(d, p+"/") })
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		err := walk(ctx, obs, root, func(p string) {
			if !allowed(p) {
				left = append(left, p)
			}
		})
		if err == nil && s.sim == nil {
			// The secured group's, under its chroot (world-readable).
			err = walk(ctx, obs, securedChroot+root, func(p string) {
				if !allowed(strings.TrimPrefix(p, securedChroot)) {
					left = append(left, p)
				}
			})
		}
		if err == nil && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			if err != nil {
				s.rep.violate("listing what is left under %s: %v", root, err)
			}
			if len(left) > 20 {
				left = append(left[:20], fmt.Sprintf("... %d more", len(left)-20))
			}
			if len(left) > 0 {
				s.rep.violate("nodes left after every handle closed: %v", left)
			}
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// walk calls fn for every node under p (p excluded).
func walk(ctx context.Context, c zk.Conn, p string, fn func(string)) error {
	kids, _, err := c.Children(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		child := zk.Join(p, k)
		fn(child)
		if err := walk(ctx, c, child, fn); err != nil {
			return err
		}
	}
	return nil
}

func mustCreate(t *testing.T, ctx context.Context, c zk.Conn, path string) {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		if _, err := c.Create(ctx, p, nil, zk.ModePersistent); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

// ---- locks ----

type lockHandle struct {
	l        locker
	cl       *client
	w        *worker
	resource string
	fence    string
	who      string
	id       int // porcupine client id within the lock's path

	mu  sync.Mutex
	ops []lockRecord
}

// lockRecord is one acquire, the write under it and its release.
type lockRecord struct {
	token           int64
	acqCall, acqRet time.Time
	relCall, relRet time.Time
}

func (s *suite) startLocks(ctx context.Context) {
	for i := range lockPaths * lockHolds {
		p := i % lockPaths
		who := fmt.Sprintf("lock%d.%d", p, i/lockPaths)
		a := plainAccess
		if p == securedLock {
			a = securedAccess
		}
		cl := s.connectAs(ctx, who, lockPath(p), a)
		var l locker
		if s.cfg.brokenLock {
			l = newBrokenLock(cl.conn, lockPath(p))
		} else {
			l = newRealLock(s.t, cl.conn, lockPath(p), who)
		}
		if rl, ok := l.(*realLock); ok {
			cl.addRecorder(rl.rec)
		}
		h := &lockHandle{l: l, cl: cl, w: s.newWorker(who), resource: lockPath(p),
			fence: fmt.Sprintf("%s/lock%d", fenceRoot, p), who: who, id: i / lockPaths}
		s.locks = append(s.locks, h)
		rng := s.rng(i)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runLock(ctx, h, rng)
		}()
	}
}

func (s *suite) runLock(ctx context.Context, h *lockHandle, rng *rand.Rand) {
	for ctx.Err() == nil {
		acqCall := time.Now()
		g, err := h.l.Acquire(ctx)
		acqRet := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				s.count("lock.acquire-failed")
				wait(ctx, 10*time.Millisecond)
			}
			continue
		}
		s.count("lock.acquire")
		token := g.Token()
		s.guardedWrite(ctx, h.cl.conn, g.Guard(), h.fence, h.who, token, "lock")
		select {
		case <-g.Lost():
			s.count("lock.lost-while-holding")
		case <-time.After(time.Duration(rng.IntN(15)+1) * time.Millisecond):
		case <-ctx.Done():
		}
		relCall := time.Now()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := h.l.Release(rctx); err != nil && !isNotHeld(err) {
			s.count("lock.release-failed")
		}
		cancel()
		h.mu.Lock()
		h.ops = append(h.ops, lockRecord{token: token, acqCall: acqCall, acqRet: acqRet, relCall: relCall, relRet: time.Now()})
		h.mu.Unlock()
		h.w.progress()
	}
}

// guardedWrite writes token to fence in a multi with guard, and records it
// if the server accepted it.
func (s *suite) guardedWrite(ctx context.Context, c zk.Conn, guard *zk.CheckOp, fence, who string, token int64, what string) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := c.Multi(wctx, guard, &zk.SetOp{Path: fence, Data: fmt.Appendf(nil, "%d", token), Version: zk.AnyVersion})
	switch {
	case err == nil:
		s.fence(fencedWrite{fence: fence, who: who, token: token, mzxid: res[1].Stat.Mzxid})
		s.count(what + ".guarded-write")
	case errors.Is(err, zk.ErrNoNode):
		s.count(what + ".guarded-write-refused")
	default:
		s.count(what + ".guarded-write-failed")
	}
}

// history adds the handle's acquires and releases to h: an acquire from
// its call to its return, a release from the hold's end as the handle
// reported it (or the Release call, if earlier) to Release's return.
func (h *lockHandle) history(hist *history, holds []hold) {
	ends := map[int64]time.Time{}
	for _, hd := range holds {
		ends[hd.token] = hd.end
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.ops {
		hist.add(h.resource, porcupine.Operation{ClientId: h.id, Input: lockInput{client: h.id},
			Call: hist.at(r.acqCall), Output: r.token, Return: hist.at(r.acqRet)})
		from := r.relCall
		if end, ok := ends[r.token]; ok && end.Before(from) {
			from = end
		}
		hist.add(h.resource, porcupine.Operation{ClientId: h.id, Input: lockInput{release: true, client: h.id},
			Call: hist.at(from), Return: max(hist.at(r.relRet), hist.at(r.acqRet))})
	}
}

// ---- election ----

type electHandle struct {
	e   *election.Election
	rec *testkit.Recorder
	cl  *client
	w   *worker
	who string
	id  int

	mu  sync.Mutex
	ops []lockRecord
}

func (s *suite) startElection(ctx context.Context) {
	for i := range electors {
		who := fmt.Sprintf("elect%d", i)
		cl := s.connect(ctx, who, electionP)
		e, err := election.New(cl.conn, electionP, election.WithID(who))
		if err != nil {
			s.t.Fatal(err)
		}
		h := &electHandle{e: e, rec: testkit.Record(s.t, e), cl: cl, w: s.newWorker(who), who: who, id: i}
		cl.addRecorder(h.rec)
		s.elect = append(s.elect, h)
		rng := s.rng(100 + i)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runElection(ctx, h, rng)
		}()
	}
}

func (s *suite) runElection(ctx context.Context, h *electHandle, rng *rand.Rand) {
	for ctx.Err() == nil {
		call := time.Now()
		term, err := h.e.Campaign(ctx)
		ret := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				s.count("election.campaign-failed")
				wait(ctx, 10*time.Millisecond)
			}
			continue
		}
		s.count("election.elected")
		s.guardedWrite(ctx, h.cl.conn, term.Guard(), fenceRoot+"/election", h.who, term.Token(), "election")
		select {
		case <-term.Lost():
			s.count("election.lost-while-leading")
		case <-time.After(time.Duration(rng.IntN(20)+1) * time.Millisecond):
		case <-ctx.Done():
		}
		relCall := time.Now()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := h.e.Resign(rctx); err != nil {
			s.count("election.resign-failed")
		}
		cancel()
		h.mu.Lock()
		h.ops = append(h.ops, lockRecord{token: term.Token(), acqCall: call, acqRet: ret, relCall: relCall, relRet: time.Now()})
		h.mu.Unlock()
		h.w.progress()
	}
}

func (h *electHandle) history(hist *history, holds []hold) {
	lh := &lockHandle{resource: electionP, id: h.id, ops: h.ops}
	lh.history(hist, holds)
}

// ---- queues ----

// queues are the queues the suite runs (nil ones left out).
func (s *suite) queues() []*queueSet {
	return slices.DeleteFunc([]*queueSet{s.queue, s.fifo, s.sharded}, func(q *queueSet) bool { return q == nil })
}

func shardDir(k int) string { return fmt.Sprintf("%s/shard-%d", shardPath, k) }

// queueSet is one queue with its producers and consumers.
type queueSet struct {
	path    string
	shards  int  // WithShards: above 1, producers offer with OfferKey
	fifo    bool // checked with the FIFO model
	ledger  *queueLedger
	handles []*queue.Queue

	mu  sync.Mutex
	ops []queueRecord
}

// queueRecord is one offer or one delivery (with its ack's outcome).
type queueRecord struct {
	take     bool
	client   int // porcupine client id: producers first, then consumers
	value    string
	got      time.Time // TakeItem's return
	seq      int64     // the item's sequence number (takes)
	call     time.Time
	ret      time.Time
	certain  bool // the offer or ack returned nil
	claimEnd bool // the ack found the claim lost: no take happened
}

func (s *suite) startQueue(runCtx, prodCtx context.Context, path string, nProd, nCons, shards int, fifo bool) *queueSet {
	qs := &queueSet{path: path, shards: shards, fifo: fifo, ledger: newQueueLedger()}
	name := strings.TrimPrefix(path, root+"/")
	open := func(who string) (*queue.Queue, *client, *worker) {
		cl := s.connect(runCtx, who, path)
		q, err := queue.New(cl.conn, path, queue.WithID(who), queue.WithShards(shards))
		if err != nil {
			s.t.Fatal(err)
		}
		qs.handles = append(qs.handles, q)
		return q, cl, s.newWorker(who)
	}
	for i := range nProd {
		who := fmt.Sprintf("%s.producer%d", name, i)
		q, _, w := open(who)
		s.wg.Add(1)
		s.producers.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.producers.Done()
			s.runProducer(prodCtx, qs, q, w, who, i)
		}()
	}
	for i := range nCons {
		who := fmt.Sprintf("%s.consumer%d", name, i)
		q, _, w := open(who)
		qs.ledger.record(who, q)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runConsumer(runCtx, qs, q, w, who, nProd+i, s.rng(200+i))
		}()
	}
	return qs
}

func (s *suite) runProducer(ctx context.Context, qs *queueSet, q *queue.Queue, w *worker, who string, id int) {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ctx.Err() == nil; n++ {
		// Offer at most every 25 ms, and only while the consumers keep
		// up: a backlog of thousands of items makes every listing slow.
		for qs.ledger.backlog() > maxBacklog && ctx.Err() == nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		v := fmt.Sprintf("%s-%05d", who, n)
		call := time.Now()
		var err error
		if qs.shards > 1 {
			// Three keys a producer: a key's items go to one shard.
			err = q.OfferKey(ctx, fmt.Sprintf("%s.%d", who, n%3), []byte(v))
		} else {
			err = q.Offer(ctx, []byte(v))
		}
		ret := time.Now()
		qs.ledger.offer(v, who, err)
		qs.record(queueRecord{client: id, value: v, call: call, ret: ret, certain: err == nil})
		if err != nil {
			s.count("queue.offer-uncertain")
		} else {
			s.count("queue.offer")
			w.progress()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

func (s *suite) runConsumer(ctx context.Context, qs *queueSet, q *queue.Queue, w *worker, who string, id int, rng *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		call := time.Now()
		// Every other TakeItem gives up after a few milliseconds, often
		// just as its item comes: the claim is then given back, and the
		// item must come again (to this consumer or another), in order.
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if n%2 == 1 {
			tctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(3000))*time.Microsecond)
		}
		it, err := q.TakeItem(tctx)
		cancel()
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, context.DeadlineExceeded):
				s.count("queue.take-timeout")
			default:
				s.count("queue.take-failed")
				wait(ctx, 10*time.Millisecond)
			}
			continue
		}
		got := time.Now()
		v := string(it.Data())
		seq := itemSeq(it.Node())
		qs.ledger.deliver(v, who, it.Node())
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = it.Ack(actx)
		cancel()
		ret := time.Now()
		qs.ledger.ack(v, who, err)
		switch {
		case err == nil:
			s.count("queue.ack")
			w.progress()
		case errors.Is(err, queue.ErrClaimLost):
			s.count("queue.claim-lost")
		default:
			s.count("queue.ack-uncertain")
		}
		qs.record(queueRecord{take: true, client: id, value: v, seq: seq, call: call, got: got, ret: ret, certain: err == nil, claimEnd: errors.Is(err, queue.ErrClaimLost)})
	}
}

func (qs *queueSet) record(r queueRecord) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.ops = append(qs.ops, r)
}

// history adds the queue's operations to h: every offer and every take
// that removed its item (its claim acked). An offer of unknown outcome
// whose item was delivered took effect before its first delivery; one
// whose item never was did not take effect (the queue was drained empty),
// and is left out. A take of unknown outcome (its ack's reply lost) counts
// for an item never acked for sure, and may take effect any time after
// its call.
func (qs *queueSet) history(h *history) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	lastMaybe := map[string]int{}
	acked := map[string]bool{}
	delivered := map[string]time.Time{}
	seqs := map[string]int64{}
	for i, r := range qs.ops {
		if !r.take {
			continue
		}
		seqs[r.value] = r.seq
		if d, ok := delivered[r.value]; !ok || r.got.Before(d) {
			delivered[r.value] = r.got
		}
		if r.certain {
			acked[r.value] = true
		} else if !r.claimEnd {
			lastMaybe[r.value] = i
		}
	}
	for i, r := range qs.ops {
		ret := h.at(r.ret)
		switch {
		case !r.take:
			d, ok := delivered[r.value]
			if !ok {
				continue // never applied, or lost (the ledger says which)
			}
			if !r.certain {
				ret = h.at(d)
			}
			h.add(qs.path, porcupine.Operation{ClientId: r.client, Input: queueInput{value: r.value, seq: seqs[r.value]},
				Call: h.at(r.call), Return: ret})
		case r.certain:
			h.add(qs.path, porcupine.Operation{ClientId: r.client, Input: queueInput{take: true}, Call: h.at(r.call), Output: r.value, Return: ret})
		case !r.claimEnd && !acked[r.value] && lastMaybe[r.value] == i:
			h.add(qs.path, porcupine.Operation{ClientId: r.client, Input: queueInput{take: true}, Call: h.at(r.call), Output: r.value, Return: never})
		}
	}
}

// drain waits (up to 30 s) until every item offered has been acked and the
// queue is empty, with the consumers still running.
func (s *suite) drain(ctx context.Context, obs zk.Conn, qs *queueSet) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := qs.ledger.unacked()
		n, err := qs.items(ctx, obs)
		if err == nil && len(left) == 0 && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.rep.violate("%s not drained 30 s after the producers stopped: %d offered items unacked, %d nodes in it (%v)",
				qs.path, len(left), n, err)
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// items is the number of items in the queue: its children, or its
// shards'.
func (qs *queueSet) items(ctx context.Context, obs zk.Conn) (int, error) {
	dirs := []string{qs.path}
	if qs.shards > 1 {
		dirs = dirs[:0]
		for k := range qs.shards {
			dirs = append(dirs, fmt.Sprintf("%s/shard-%d", qs.path, k))
		}
	}
	n := 0
	for _, d := range dirs {
		kids, _, err := obs.Children(ctx, d)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return 0, err
		}
		n += len(kids)
	}
	return n, nil
}

// itemSeq is the sequence number at the end of a queue item's node name.
func itemSeq(node string) int64 {
	if len(node) < 10 {
		return -1
	}
	n, err := strconv.ParseInt(node[len(node)-10:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// settleTwoPhase waits (up to 20 s) until every participant has applied
// every decided transaction and the coordinator's janitor has deleted
// them (their retention is 1 s), with everything still running.
func (s *suite) settleTwoPhase(ctx context.Context, obs zk.Conn) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		missing := s.tpc.unapplied()
		kids, _, err := obs.Children(ctx, tpcRoot+"/tx")
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
		if err == nil && len(missing) == 0 && len(kids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			if len(missing) > 5 {
				missing = append(missing[:5], fmt.Sprintf("... %d more", len(missing)-5))
			}
			s.rep.violate("2pc: not settled 20 s after the faults: decided but not applied: %v; transactions left: %d (%v)", missing, len(kids), err)
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// stopProducers stops the producers and waits (up to the session timeout
// + 2 s) until their last Offer or Propose has returned: its ctx ended, so
// it must return promptly, applied or not.
func (s *suite) stopProducers(ctx context.Context, stop context.CancelFunc) {
	stop()
	if !waitWithin(ctx, &s.producers, sessionTimeout+2*time.Second) && ctx.Err() == nil {
		s.rep.violate("a producer's Offer or Propose had not returned %v after its ctx ended", sessionTimeout+2*time.Second)
	}
}

// finishBarrier waits (up to the session timeout + 2 s) for the barrier
// members to stop between rounds. A member waiting in Enter for a round
// the others will not join is stopped by the end of the run.
func (s *suite) finishBarrier(ctx context.Context) {
	if !waitWithin(ctx, &s.barrierWG, sessionTimeout+2*time.Second) && ctx.Err() == nil {
		s.t.Logf("barrier: some members did not finish their round; they are stopped inside it")
	}
}

// waitWithin waits for wg until d has passed or ctx ends, and reports
// whether wg was done.
func waitWithin(ctx context.Context, wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-done:
		return true
	case <-tm.C:
	case <-ctx.Done():
	}
	return false
}

// logStuck logs, for a liveness failure, the lock handles' states and
// sessions and what their directories hold.
func (s *suite) logStuck(ctx context.Context, obs zk.Conn) {
	for _, h := range s.locks {
		if rl, ok := h.l.(*realLock); ok {
			s.t.Logf("stuck? %s: state %s, session %#x (%v)", h.who, rl.State(), h.cl.conn.SessionID(), h.cl.conn.State())
		}
	}
	dirs := []string{electionP, rwPath, semaphore.LeasesDir(semPath)}
	for i := range lockPaths {
		dirs = append(dirs, lockPath(i))
	}
	for _, d := range dirs {
		kids, _, err := obs.Children(ctx, d)
		var desc []string
		for _, k := range kids {
			st, ok, _ := obs.Exists(ctx, zk.Join(d, k))
			desc = append(desc, fmt.Sprintf("%s(owner %#x, exists %t)", k, st.EphemeralOwner, ok))
		}
		s.t.Logf("stuck? %s: %v %v", d, desc, err)
	}
}
