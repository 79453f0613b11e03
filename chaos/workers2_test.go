package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/barrier"
	"github.com/zkrecipes/zkrecipes/machines/rwlock"
	"github.com/zkrecipes/zkrecipes/machines/semaphore"
	"github.com/zkrecipes/zkrecipes/machines/twophase"
	"github.com/zkrecipes/zkrecipes/testkit"
)

const (
	rwPath       = root + "/rw"
	rwHandles    = 4
	semPath      = root + "/sem"
	semHandles   = 4
	semMax       = 2
	barrierPath  = root + "/barrier"
	barrierSize  = 4
	tpcRoot      = root + "/2pc"
	participants = 3
)

// hasOpenTerm reports whether a handle's events leave a term open: it
// holds, or believes it does.
func hasOpenTerm(evs []events.Event) bool {
	type key struct {
		inst string
		term uint64
	}
	open := map[key]bool{}
	for _, ev := range evs {
		k := key{ev.Instance, ev.Term}
		switch ev.Type {
		case events.ElectedComplete:
			open[k] = true
		case events.Failed, events.Lost, events.StopStart:
			delete(open, k)
		}
	}
	return len(open) > 0
}

// ---- read/write lock ----

type rwHandle struct {
	rw         *rwlock.RWLock
	rrec, wrec *testkit.Recorder
	who        string
}

func (s *suite) startRWLock(ctx context.Context) {
	for i := range rwHandles {
		who := fmt.Sprintf("rw%d", i)
		cl := s.connect(ctx, who, rwPath)
		rw, err := rwlock.New(cl.conn, rwPath, rwlock.WithID(who))
		if err != nil {
			s.t.Fatal(err)
		}
		h := &rwHandle{rw: rw, rrec: testkit.Record(s.t, rw.ReadLock()), wrec: testkit.Record(s.t, rw.WriteLock()), who: who}
		cl.addRecorder(h.rrec)
		cl.addRecorder(h.wrec)
		s.rws = append(s.rws, h)
		w, rng := s.newWorker(who), s.rng(200+i)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runRW(ctx, h, cl, w, rng)
		}()
	}
}

func (s *suite) runRW(ctx context.Context, h *rwHandle, cl *client, w *worker, rng *rand.Rand) {
	for ctx.Err() == nil {
		write := rng.IntN(3) == 0
		l, what := h.rw.ReadLock(), "rwlock.read"
		if write {
			l, what = h.rw.WriteLock(), "rwlock.write"
		}
		g, err := l.Acquire(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.count(what + "-failed")
				wait(ctx, 10*time.Millisecond)
			}
			continue
		}
		s.count(what)
		if write {
			s.guardedWrite(ctx, cl.conn, g.Guard(), fenceRoot+"/rw", h.who, g.Token(), "rwlock")
		}
		select {
		case <-g.Lost():
		case <-time.After(time.Duration(rng.IntN(15)+1) * time.Millisecond):
		case <-ctx.Done():
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := l.Release(rctx); err != nil && !errors.Is(err, rwlock.ErrNotHeld) {
			s.count("rwlock.release-failed")
		}
		cancel()
		w.progress()
	}
}

// ---- semaphore ----

type semHandle struct {
	s   *semaphore.Semaphore
	rec *testkit.Recorder
	who string
}

func (s *suite) startSemaphore(ctx context.Context) {
	for i := range semHandles {
		who := fmt.Sprintf("sem%d", i)
		cl := s.connect(ctx, who, semPath)
		sem, err := semaphore.New(cl.conn, semPath, semMax, semaphore.WithID(who))
		if err != nil {
			s.t.Fatal(err)
		}
		h := &semHandle{s: sem, rec: testkit.Record(s.t, sem), who: who}
		cl.addRecorder(h.rec)
		s.sems = append(s.sems, h)
		w, rng := s.newWorker(who), s.rng(300+i)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for ctx.Err() == nil {
				lease, err := sem.Acquire(ctx)
				if err != nil {
					if ctx.Err() == nil {
						s.count("semaphore.acquire-failed")
						wait(ctx, 10*time.Millisecond)
					}
					continue
				}
				s.count("semaphore.lease")
				select {
				case <-lease.Lost():
				case <-time.After(time.Duration(rng.IntN(20)+1) * time.Millisecond):
				case <-ctx.Done():
				}
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				if err := lease.Release(rctx); err != nil && !errors.Is(err, semaphore.ErrNotHeld) {
					s.count("semaphore.release-failed")
				}
				cancel()
				w.progress()
			}
		}()
	}
}

// ---- double barrier ----

// barrierRecord is one member's pass through the barrier: Enter, then
// Leave (when Enter succeeded).
type barrierRecord struct {
	who                string
	enterCall, enterAt time.Time
	enterErr           error
	entered            bool
	leaveCall, leaveAt time.Time
	leaveErr           error
	left               bool
}

type barrierLedger struct {
	mu   sync.Mutex
	recs []barrierRecord
}

func (l *barrierLedger) add(r barrierRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
}

func (s *suite) startBarrier(ctx, finish context.Context) {
	s.barrier = &barrierLedger{}
	for i := range barrierSize {
		who := fmt.Sprintf("barrier%d", i)
		cl := s.connect(ctx, who, barrierPath)
		d, err := barrier.NewDouble(cl.conn, barrierPath, barrierSize, barrier.WithID(who))
		if err != nil {
			s.t.Fatal(err)
		}
		s.barriers = append(s.barriers, d)
		w, rng := s.newWorker(who), s.rng(400+i)
		s.wg.Add(1)
		s.barrierWG.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.barrierWG.Done()
			s.runBarrier(ctx, finish, d, w, who, rng)
		}()
	}
}

// runBarrier passes through the barrier again and again until ctx ends,
// or until finish ends and it is outside the barrier: members stop between
// rounds, so that the last to leave deletes the ready node. (Members
// closed inside the barrier leave it behind: see checkNoNodesLeft.)
func (s *suite) runBarrier(ctx, finish context.Context, d *barrier.DoubleBarrier, w *worker, who string, rng *rand.Rand) {
	for ctx.Err() == nil && finish.Err() == nil {
		r := barrierRecord{who: who, enterCall: time.Now()}
		err := d.Enter(ctx)
		r.enterAt, r.enterErr = time.Now(), err
		switch {
		case err == nil:
			r.entered = true
			s.count("barrier.enter")
		case errors.Is(err, barrier.ErrAlreadyEntered):
			r.enterCall = time.Time{} // entered before: go on to Leave
			r.entered = true
		default:
			s.barrier.add(r)
			if ctx.Err() == nil {
				s.count("barrier.enter-failed")
				wait(ctx, 10*time.Millisecond)
			}
			continue
		}
		wait(ctx, time.Duration(rng.IntN(10)+1)*time.Millisecond)
		for {
			r.leaveCall = time.Now()
			err = d.Leave(ctx)
			r.leaveAt, r.leaveErr = time.Now(), err
			if err == nil || errors.Is(err, barrier.ErrSessionLost) || errors.Is(err, barrier.ErrNotEntered) || ctx.Err() != nil {
				break
			}
			s.count("barrier.leave-retried")
			wait(ctx, 10*time.Millisecond)
		}
		r.left = err == nil
		s.barrier.add(r)
		if err == nil {
			s.count("barrier.leave")
			w.progress()
		} else if ctx.Err() == nil {
			s.count("barrier.leave-failed")
		}
	}
}

// lastEnters describes, for each member not in in, its last Enter begun
// before at: when it was called and returned, and its error. The caller
// holds l.mu.
func (l *barrierLedger) lastEnters(at time.Time, in map[string]bool) string {
	last := map[string]barrierRecord{}
	for _, o := range l.recs {
		if !in[o.who] && !o.enterCall.IsZero() && o.enterCall.Before(at) && o.enterCall.After(last[o.who].enterCall) {
			last[o.who] = o
		}
	}
	var out []string
	for _, who := range slices.Sorted(maps.Keys(last)) {
		o := last[who]
		out = append(out, fmt.Sprintf("%s called %s, returned %s (%v)", who, o.enterCall.Format("15:04:05.000000"), o.enterAt.Format("15:04:05.000000"), o.enterErr))
	}
	return strings.Join(out, "; ")
}

// check reports members through the barrier early: an Enter that returned
// though at no moment between its call and its return could barrierSize
// members all be in (each counted from its Enter call to the end of its
// pass: a member whose Enter failed, to that failure), and a Leave that
// returned while another member had entered and not yet started to leave
// (one whose session ended inside is counted out, as the barrier does).
// The barrier lets a member through once all were in at one moment of its
// Enter: a member may die just after that moment and before the pass.
func (l *barrierLedger) check() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	start := func(r barrierRecord) time.Time {
		if r.enterCall.IsZero() {
			return r.enterAt.Add(-time.Hour) // entered before this record began
		}
		return r.enterCall
	}
	end := func(r barrierRecord) time.Time {
		if r.entered {
			return r.leaveAt
		}
		return r.enterAt
	}
	for _, r := range l.recs {
		if !r.entered || r.enterCall.IsZero() {
			continue
		}
		// The records that could be in during r's Enter, and the moments
		// at which the most of them could be: its call, and each of their
		// starts after it.
		var during []barrierRecord
		moments := []time.Time{r.enterCall}
		for _, o := range l.recs {
			if start(o).After(r.enterAt) || end(o).Before(r.enterCall) {
				continue
			}
			during = append(during, o)
			if start(o).After(r.enterCall) {
				moments = append(moments, start(o))
			}
		}
		most := 0
		for _, at := range moments {
			in := map[string]bool{}
			for _, o := range during {
				if !start(o).After(at) && !end(o).Before(at) {
					in[o.who] = true
				}
			}
			most = max(most, len(in))
		}
		if most < barrierSize && len(bad) < 10 {
			in := map[string]bool{}
			for _, o := range during {
				if !end(o).Before(r.enterAt) {
					in[o.who] = true
				}
			}
			bad = append(bad, fmt.Sprintf("%s through Enter at %s with at most %d able to be in at once since its call at %s (%v at its pass); the others' last Enter before: %s",
				r.who, r.enterAt.Format("15:04:05.000000"), most, r.enterCall.Format("15:04:05.000000"), slices.Sorted(mapsKeysBool(in)), l.lastEnters(r.enterAt, in)))
		}
	}
	for _, r := range l.recs {
		if !r.left {
			continue
		}
		for _, o := range l.recs {
			if o.who == r.who || !o.entered || !o.left {
				continue
			}
			if o.enterAt.Before(r.leaveAt) && o.leaveCall.After(r.leaveAt) && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("%s through Leave at %s while %s, entered at %s, had not started to leave (until %s)",
					r.who, r.leaveAt.Format("15:04:05.000000"), o.who, o.enterAt.Format("15:04:05.000000"), o.leaveCall.Format("15:04:05.000000")))
			}
		}
	}
	return bad
}

func mapsKeysBool(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ---- two-phase commit ----

// tpcLedger is what the coordinator decided and what each participant
// voted and applied.
type tpcLedger struct {
	mu      sync.Mutex
	decided map[string]twophase.Outcome
	votes   map[string]map[string]bool   // tx → participant → yes
	applied map[string]map[string][]bool // tx → participant → outcomes applied (true: commit)
}

type tpcHandler struct {
	id  string
	l   *tpcLedger
	rng *rand.Rand // Handler calls come one at a time per participant
}

func (h *tpcHandler) Prepare(_ context.Context, tx twophase.Tx) (bool, error) {
	yes := h.rng.IntN(10) != 0
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.votes[tx.ID] == nil {
		h.l.votes[tx.ID] = map[string]bool{}
	}
	h.l.votes[tx.ID][h.id] = yes
	return yes, nil
}

func (h *tpcHandler) Commit(_ context.Context, tx twophase.Tx) error {
	h.apply(tx.ID, true)
	return nil
}

func (h *tpcHandler) Abort(_ context.Context, tx twophase.Tx, _ string) error {
	h.apply(tx.ID, false)
	return nil
}

func (h *tpcHandler) apply(tx string, commit bool) {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.applied[tx] == nil {
		h.l.applied[tx] = map[string][]bool{}
	}
	h.l.applied[tx][h.id] = append(h.l.applied[tx][h.id], commit)
}

// startTwoPhase starts the participants, serving until ctx ends, and the
// coordinator, proposing until propose ends.
func (s *suite) startTwoPhase(ctx, propose context.Context) {
	s.tpc = &tpcLedger{decided: map[string]twophase.Outcome{}, votes: map[string]map[string]bool{}, applied: map[string]map[string][]bool{}}
	var ids []string
	for i := range participants {
		id := fmt.Sprintf("part%d", i)
		ids = append(ids, id)
		cl := s.connect(ctx, "2pc."+id, tpcRoot)
		p, err := twophase.NewParticipant(cl.conn, tpcRoot, id, &tpcHandler{id: id, l: s.tpc, rng: s.rng(500 + i)})
		if err != nil {
			s.t.Fatal(err)
		}
		s.parts = append(s.parts, p)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for ctx.Err() == nil {
				if err := p.Serve(ctx); err != nil && ctx.Err() == nil {
					s.count("2pc.serve-returned")
					wait(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	cl := s.connect(ctx, "2pc.coordinator", tpcRoot)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := twophase.WaitRegistered(rctx, cl.conn, tpcRoot, ids...); err != nil {
		s.t.Fatalf("2pc participants: %v", err)
	}
	c, err := twophase.NewCoordinator(cl.conn, tpcRoot, twophase.WithRetention(time.Second), twophase.WithVoteTimeout(2*sessionTimeout))
	if err != nil {
		s.t.Fatal(err)
	}
	s.coord = c
	w := s.newWorker("2pc.coordinator")
	s.wg.Add(1)
	s.producers.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.producers.Done()
		for n := 0; propose.Err() == nil; n++ {
			tx := fmt.Sprintf("tx%05d", n)
			out, err := c.Propose(propose, tx, []byte(tx), ids)
			if err != nil {
				if propose.Err() == nil {
					s.count("2pc.propose-failed")
					wait(propose, 10*time.Millisecond)
				}
				continue
			}
			s.tpc.mu.Lock()
			s.tpc.decided[tx] = out
			s.tpc.mu.Unlock()
			if out.Committed {
				s.count("2pc.committed")
			} else {
				s.count("2pc.aborted")
			}
			w.progress()
		}
	}()
}

// check reports transactions with more than one outcome: participants
// that applied different ones, or one other than the coordinator's
// decision, or a commit although someone voted no.
func (l *tpcLedger) check() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	for tx, parts := range l.applied {
		var seen []bool
		for p, outs := range parts {
			for _, o := range outs {
				if !slices.Contains(seen, o) {
					seen = append(seen, o)
				}
				if d, ok := l.decided[tx]; ok && d.Committed != o {
					bad = append(bad, fmt.Sprintf("%s: %s applied commit=%v, the coordinator decided %+v", tx, p, o, d))
				}
			}
		}
		if len(seen) > 1 {
			bad = append(bad, fmt.Sprintf("%s: participants applied both outcomes: %v", tx, parts))
		}
		if slices.Contains(seen, true) {
			for p, yes := range l.votes[tx] {
				if !yes {
					bad = append(bad, fmt.Sprintf("%s committed although %s voted no", tx, p))
				}
			}
		}
		if len(bad) > 20 {
			break
		}
	}
	return bad
}

// unapplied lists decided transactions a participant has not applied.
func (l *tpcLedger) unapplied() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for tx := range l.decided {
		for i := range participants {
			id := fmt.Sprintf("part%d", i)
			if len(l.applied[tx][id]) == 0 {
				out = append(out, tx+"@"+id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// A member through Enter while fewer could be in is reported with the
// others' last Enter: when it was called, when it returned, and its error.
func TestBarrierLedgerReportsTheOthersLastEnter(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := &barrierLedger{}
	for i := range barrierSize - 1 {
		l.add(barrierRecord{who: fmt.Sprintf("barrier%d", i), enterCall: at(0), enterAt: at(100), entered: true, leaveCall: at(110), leaveAt: at(120), left: true})
	}
	l.add(barrierRecord{who: "barrier3", enterCall: at(-10), enterAt: at(-5), enterErr: barrier.ErrSessionLost})
	bad := strings.Join(l.check(), "\n")
	want := "barrier0 through Enter at 01:00:00.100000 with at most 3 able to be in at once since its call at 01:00:00.000000 ([barrier0 barrier1 barrier2] at its pass); the others' last Enter before: barrier3 called 00:59:59.990000, returned 00:59:59.995000 (" + barrier.ErrSessionLost.Error() + ")"
	if !strings.Contains(bad, want) {
		t.Errorf("check() = %q, lacks %q", bad, want)
	}
}

// A member whose Enter fails after every member was in, and before
// another member's Enter returns, is no early pass: the barrier was
// complete at that moment (a chaos run reported one, its member's session
// lost 2 ms before the other's pass).
func TestBarrierLedgerCountsAMemberLostAfterTheRoundWasComplete(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := &barrierLedger{}
	for i := range barrierSize - 1 {
		l.add(barrierRecord{who: fmt.Sprintf("barrier%d", i), enterCall: at(10 * i), enterAt: at(100), entered: true, leaveCall: at(110), leaveAt: at(120), left: true})
	}
	l.add(barrierRecord{who: "barrier3", enterCall: at(40), enterAt: at(98), enterErr: barrier.ErrSessionLost})
	if bad := l.check(); len(bad) != 0 {
		t.Errorf("check() = %q, want nothing", bad)
	}
	l.add(barrierRecord{who: "barrier0", enterCall: at(200), enterAt: at(300), entered: true, leaveCall: at(310), leaveAt: at(320), left: true})
	if bad := l.check(); len(bad) != 1 || !strings.Contains(bad[0], "barrier0 through Enter at 01:00:00.300000 with at most 1") {
		t.Errorf("check() = %q, want barrier0's second pass, alone, reported", bad)
	}
}
