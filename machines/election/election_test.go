package election_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/machines/election"
	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newElection(t *testing.T, c zk.Conn, path, id string, opts ...election.Option) *election.Election {
	t.Helper()
	e, err := election.New(c, path, append([]election.Option{election.WithID(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func recvLeader(t *testing.T, ch <-chan election.Leader) election.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("observe stream closed")
		}
		return l
	case <-time.After(15 * time.Second):
		t.Fatal("no leader change within 15s")
	}
	return election.Leader{}
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

func TestOneLeaderAtATime(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const participants, terms = 5, 40
		ctx := ctxT(t)
		var leaders, maxLeaders, lastToken, remaining atomic.Int64
		remaining.Store(terms)
		var wg sync.WaitGroup
		errs := make(chan error, participants)
		for i := range participants {
			e := newElection(t, tg.Connect(t), "/election/one", fmt.Sprintf("p%d", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for remaining.Add(-1) >= 0 {
					term, err := e.Campaign(ctx)
					if err != nil {
						errs <- err
						return
					}
					if n := leaders.Add(1); n > maxLeaders.Load() {
						maxLeaders.Store(n)
					}
					if prev := lastToken.Swap(term.Token()); term.Token() <= prev {
						errs <- fmt.Errorf("token %#x after %#x", term.Token(), prev)
					}
					if st := e.State(); st != events.StateLeader {
						errs <- fmt.Errorf("state %s while leading", st)
					}
					leaders.Add(-1)
					if err := e.Resign(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if m := maxLeaders.Load(); m != 1 {
			t.Errorf("max simultaneous leaders = %d", m)
		}
	})
}

func TestLeaderExpiryHandsOverAndRequeues(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		lc := tg.Connect(t)
		// The first leader runs selector style with requeue.
		first := newElection(t, lc, "/election/expiry", "first", election.WithRequeue(true))
		sub := first.Subscribe()
		defer sub.Close()
		leading := make(chan int64, 4)
		runDone := make(chan error, 1)
		rctx, stopRun := context.WithCancel(ctx)
		defer stopRun()
		go func() {
			runDone <- first.Run(rctx, func(lead context.Context) error {
				l, _ := first.Leader(lead)
				leading <- l.Token
				<-lead.Done() // lead until leadership is lost
				return nil
			})
		}()
		oldToken := <-leading
		second := newElection(t, tg.Connect(t), "/election/expiry", "second")
		secondSub := second.Subscribe()
		defer secondSub.Close()
		res := campaignAsync(ctx, second)
		testkit.WaitEvent(t, secondSub, events.ReadyStart) // second is queued behind first
		tg.Expire(t, lc)
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.term.Token() <= oldToken {
			t.Fatalf("new leader's token %#x not above %#x", r.term.Token(), oldToken)
		}
		testkit.WaitEvent(t, sub, events.Failed)
		// With requeue, the first participant is back, as a follower.
		testkit.WaitEvent(t, sub, events.ReadyStart)
		ps, err := second.Participants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2 || ps[0].ID != "second" || ps[1].ID != "first" {
			t.Fatalf("participants %v, want [second first]", ps)
		}
		if err := second.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if tok := <-leading; tok <= r.term.Token() {
			t.Fatalf("requeued leader's token %#x not above %#x", tok, r.term.Token())
		}
		stopRun()
		if err := <-runDone; err != nil {
			t.Fatal(err)
		}
	})
}

func TestResignIsNoopWhenNotLeading(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		e := newElection(t, tg.Connect(t), "/election/noop", "a")
		if err := e.Resign(ctx); err != nil {
			t.Fatalf("Resign before Campaign = %v", err)
		}
		term, err := e.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again, err := e.Campaign(ctx)
		if err != nil || again.Token() != term.Token() {
			t.Fatalf("Campaign while leading = %v, %v", again, err)
		}
		if err := e.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-term.Lost():
		default:
			t.Fatal("Lost not closed after Resign")
		}
		if err := e.Resign(ctx); err != nil {
			t.Fatalf("second Resign = %v", err)
		}
	})
}

// A term releases itself: Term.Release hands leadership to the next
// campaigner, as Resign does, and the release of a term that has ended
// leaves a later term alone.
func TestTermRelease(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/election/release"
		a := newElection(t, tg.Connect(t), path, "a")
		b := newElection(t, tg.Connect(t), path, "b")
		t1, err := a.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sub := b.Subscribe()
		defer sub.Close()
		res := campaignAsync(ctx, b)
		testkit.WaitEvent(t, sub, events.ReadyStart)
		if err := t1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(t1.Err(), election.ErrResigned) {
			t.Fatalf("Err after Release = %v, want ErrResigned", t1.Err())
		}
		r := within(t, res, "campaign after the leader's Release")
		if r.err != nil || r.term.Token() <= t1.Token() {
			t.Fatalf("the next campaigner's Campaign = %v, %v", r.term, r.err)
		}
		res = campaignAsync(ctx, a)
		if err := r.term.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r = within(t, res, "a's second campaign")
		if r.err != nil {
			t.Fatal(r.err)
		}
		if err := t1.Release(ctx); err != nil || r.term.Err() != nil {
			t.Fatalf("the ended term's Release = %v; the later term's Err = %v", err, r.term.Err())
		}
	})
}

// countingConn counts the reads (exists, get, children without a watch)
// made through it, and sends on watched after each watch request.
type countingConn struct {
	zk.Conn
	reads   atomic.Int64
	watched chan struct{}
}

func (c *countingConn) Exists(ctx context.Context, path string) (zk.Stat, bool, error) {
	c.reads.Add(1)
	return c.Conn.Exists(ctx, path)
}

func (c *countingConn) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	c.reads.Add(1)
	return c.Conn.Get(ctx, path)
}

func (c *countingConn) Children(ctx context.Context, path string) ([]string, zk.Stat, error) {
	c.reads.Add(1)
	return c.Conn.Children(ctx, path)
}

func (c *countingConn) ExistsW(ctx context.Context, path string) (zk.Stat, bool, <-chan zk.WatchEvent, error) {
	defer func() { c.watched <- struct{}{} }()
	return c.Conn.ExistsW(ctx, path)
}

func (c *countingConn) ChildrenW(ctx context.Context, path string) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	defer func() { c.watched <- struct{}{} }()
	return c.Conn.ChildrenW(ctx, path)
}

// within receives from ch, failing the test after 10 s.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
	}
	var zero T
	return zero
}

// A resign hands over through the deletion's event alone. b queues behind
// a, which queues behind x: when x resigns and a leads, b still sees x in
// its one listing, but a's hold mark (whose creation fires b's watch) tells
// b that a holds, so when a resigns b leads with no read. Resign and Close
// leave no hold mark behind.
func TestResignHandsOverWithNoRead(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/election/handover"
		x := newElection(t, tg.Connect(t), path, "x")
		a := newElection(t, tg.Connect(t), path, "a")
		bConn := &countingConn{Conn: tg.Connect(t), watched: make(chan struct{}, 16)}
		b := newElection(t, bConn, path, "b")
		look := tg.Connect(t)

		if _, err := x.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		subA, subB := a.Subscribe(), b.Subscribe()
		defer subA.Close()
		defer subB.Close()
		wonA := campaignAsync(ctx, a)
		testkit.WaitEvent(t, subA, events.ReadyStart)
		wonB := campaignAsync(ctx, b)
		testkit.WaitEvent(t, subB, events.ReadyStart)
		within(t, bConn.watched, "b's watch on a's node")
		within(t, bConn.watched, "b's watch on a's hold mark")
		readsBefore := bConn.reads.Load()

		if err := x.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		ra := within(t, wonA, "a's election")
		if ra.err != nil {
			t.Fatal(ra.err)
		}
		testkit.AwaitNode(t, look, contention.HoldMark(ra.term.Node())) // a announces its term once elected
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		rb := within(t, wonB, "b's election")
		if rb.err != nil {
			t.Fatal(rb.err)
		}
		if n := bConn.reads.Load() - readsBefore; n != 0 {
			t.Errorf("b made %d reads while it waited behind a, want none", n)
		}
		if rb.term.Token() <= ra.term.Token() {
			t.Errorf("b's token %#x is not above a's %#x", rb.term.Token(), ra.term.Token())
		}
		for _, e := range []*election.Election{b, a, x} {
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		}
		marks, _, err := look.Children(ctx, contention.HoldMarkDir(path))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		if len(marks) != 0 {
			t.Errorf("hold marks left after Resign and Close: %v", marks)
		}
	})
}

func TestObserveEveryChangeInOrder(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		watcher := newElection(t, tg.Connect(t), "/election/observe", "watcher")
		early := watcher.Observe(ctx)
		slow := watcher.Observe(ctx) // not read until the end
		if l := recvLeader(t, early); !l.Vacant() {
			t.Fatalf("first value %+v, want vacant", l)
		}
		a := newElection(t, tg.Connect(t), "/election/observe", "a")
		bConn := tg.Connect(t)
		b := newElection(t, bConn, "/election/observe", "b")
		c := newElection(t, tg.Connect(t), "/election/observe", "c")
		if _, err := a.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		if l := recvLeader(t, early); l.ID != "a" {
			t.Fatalf("got %+v, want a", l)
		}
		bSub, cSub := b.Subscribe(), c.Subscribe()
		defer bSub.Close()
		defer cSub.Close()
		bRes := campaignAsync(ctx, b) // queue b, then c, in that order
		testkit.WaitEvent(t, bSub, events.ReadyStart)
		cRes := campaignAsync(ctx, c)
		testkit.WaitEvent(t, cSub, events.ReadyStart)
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		want := []string{"", "a"}
		first := <-bRes
		if first.err != nil {
			t.Fatal(first.err)
		}
		next := "b"
		if l := recvLeader(t, early); l.ID != next {
			t.Fatalf("got %+v, want %s", l, next)
		}
		want = append(want, next)
		late := watcher.Observe(ctx)
		if l := recvLeader(t, late); l.ID != "b" {
			t.Fatalf("late subscriber starts with %+v, want the current leader b", l)
		}
		tg.Expire(t, bConn) // the leader crashes
		if r := <-cRes; r.err != nil {
			t.Fatal(r.err)
		}
		want = append(want, "c")
		for _, ch := range []<-chan election.Leader{early, late} {
			if l := recvLeader(t, ch); l.ID != "c" {
				t.Fatalf("after the leader's crash got %+v, want c", l)
			}
		}
		for i, id := range want {
			if l := recvLeader(t, slow); l.ID != id {
				t.Fatalf("slow subscriber change %d = %+v, want %q", i, l, id)
			}
		}
		cctx, cancel := context.WithCancel(ctx)
		stream := watcher.Observe(cctx)
		recvLeader(t, stream)
		cancel()
		for range stream {
		}
		watcher.Close()
		if _, ok := <-early; ok {
			t.Fatal("stream still open after Close")
		}
		if !errors.Is(watcher.Err(), election.ErrClosed) {
			t.Fatalf("Err after Close = %v", watcher.Err())
		}
	})
}

// TestLifecyclePairingUnderRandomFaults drives participants through random
// campaigns, resigns, cancels, disconnects, expiries and late writes on the
// simulator and checks the pairing rules of the package doc on every event
// stream.
func TestLifecyclePairingUnderRandomFaults(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			sim := testkit.NewSim(testkit.WithSeed(int64(seed)))
			defer sim.Close()
			ctx := ctxT(t)
			type part struct {
				c   zk.Conn
				e   *election.Election
				sub *events.Subscription
				log []events.Event
			}
			var ps []*part
			for i := range 4 {
				c := sim.Connect()
				e := newElection(t, c, "/election/pairing", fmt.Sprintf("p%d", i))
				ps = append(ps, &part{c: c, e: e, sub: e.Subscribe()})
			}
			var wg sync.WaitGroup
			for step := 0; step < 60; step++ {
				p := ps[rng.IntN(len(ps))]
				switch rng.IntN(7) {
				case 0, 1:
					cctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(3))*time.Millisecond)
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer cancel()
						p.e.Campaign(cctx)
					}()
				case 2:
					p.e.Resign(ctx)
				case 3:
					sim.Disconnect(p.c)
					sim.Reconnect(p.c)
				case 4:
					sim.Expire(p.c)
				case 5:
					wg.Wait()
				case 6: // a write applied only after the conn's next read
					op := []testkit.OpKind{testkit.OpCreate, testkit.OpDelete, testkit.OpMulti}[rng.IntN(3)]
					sim.LateNextWrite(p.c, op, "/election/")
				}
			}
			wg.Wait()
			for _, p := range ps {
				p.e.Close()
				for ev := range p.sub.C {
					p.log = append(p.log, ev)
				}
				p.sub.Close()
				if err := checkPairing(p.log); err != nil {
					t.Errorf("seed %d, %s: %v", seed, p.e.ID(), err)
				}
			}
			// Close deleted whatever the faults left: no node, no hold mark.
			look := sim.Connect()
			for _, dir := range []string{"/election/pairing", contention.HoldMarkDir("/election/pairing")} {
				if left, _, err := look.Children(ctx, dir); len(left) != 0 || (err != nil && !errors.Is(err, zk.ErrNoNode)) {
					t.Errorf("seed %d: %s holds %v after Close (%v)", seed, dir, left, err)
				}
			}
		})
	}
}

// checkPairing checks one participant's events: per term, OFFER_START
// first; then at most one ELECTED_START/ELECTED_COMPLETE; exactly one end
// (STOP_START or FAILED); STOP_COMPLETE only after STOP_START; nothing of
// the term after its end but STOP_COMPLETE.
func checkPairing(log []events.Event) error {
	type termState struct{ offered, elected, electedDone, ended, stopStarted, stopDone bool }
	terms := map[uint64]*termState{}
	for i, ev := range log {
		switch ev.Type {
		case events.Start, events.Suspended, events.Reconnected, events.Lost, events.Overflow:
			continue
		}
		ts := terms[ev.Term]
		if ts == nil {
			ts = &termState{}
			terms[ev.Term] = ts
		}
		bad := func(why string) error { return fmt.Errorf("event %d %s term %d: %s", i, ev.Type, ev.Term, why) }
		if ev.Type != events.OfferStart && !ts.offered && ev.Term != 0 {
			return bad("before OFFER_START")
		}
		switch ev.Type {
		case events.OfferStart:
			if ts.offered {
				return bad("second OFFER_START")
			}
			ts.offered = true
		case events.ElectedStart:
			if ts.elected || ts.ended {
				return bad("second or late ELECTED_START")
			}
			ts.elected = true
		case events.ElectedComplete:
			if !ts.elected || ts.electedDone || ts.ended {
				return bad("ELECTED_COMPLETE out of order")
			}
			ts.electedDone = true
		case events.StopStart, events.Failed:
			if ts.ended {
				return bad("term ended twice")
			}
			if ts.elected && !ts.electedDone {
				return bad("ended between ELECTED_START and ELECTED_COMPLETE")
			}
			ts.ended = true
			ts.stopStarted = ev.Type == events.StopStart
		case events.StopComplete:
			if !ts.stopStarted || ts.stopDone {
				return bad("STOP_COMPLETE without STOP_START")
			}
			ts.stopDone = true
		default:
			if ts.ended {
				return bad("after the term ended")
			}
		}
	}
	for n, ts := range terms {
		if n != 0 && ts.offered && !ts.ended {
			return fmt.Errorf("term %d never ended (closed election)", n)
		}
		if ts.electedDone && !ts.ended {
			return fmt.Errorf("term %d: ELECTED_COMPLETE not followed by STOP or FAILED", n)
		}
	}
	return nil
}
