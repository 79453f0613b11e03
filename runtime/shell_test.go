package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// probe is the smallest recipe there is, to show what the Shell asks of
// one: a pure machine that answers "does this node exist?" with one
// exists request, and grants a term while the answer is yes. Its input
// type admits the standard inputs (SessionChange, ...), which the shell
// posts.

type probeIn = any

type ask struct {
	req  uint64
	path string
}
type checked struct {
	cmd    uint64
	exists bool
	err    error
}

// endThenCheck ends granted term and, in the same step, checks path (a
// request that could delete the term's node).
type endThenCheck struct {
	term uint64
	path string
}

type check struct {
	id   uint64
	path string
}

func (c check) ID() uint64 { return c.id }

type probeMachine struct {
	state   events.State
	waiting map[uint64]uint64 // command → the call it answers
	term    uint64
}

func (m *probeMachine) State() events.State { return m.state }

func (m *probeMachine) Start() Output[check] {
	return Output[check]{Events: []events.Event{{Type: events.Start, State: m.state}}}
}

func (m *probeMachine) Step(in probeIn) Output[check] {
	var out Output[check]
	switch in := in.(type) {
	case ask:
		m.term++
		m.waiting[m.term] = in.req
		out.Events = append(out.Events, events.Event{Type: events.OfferStart, Phase: events.PhaseBegin, Term: m.term, State: m.state})
		out.Commands = append(out.Commands, check{id: m.term, path: in.path})
	case checked:
		r := Reply{Req: m.waiting[in.cmd], Value: in.exists, Err: in.err}
		if in.exists {
			r.Grant = in.cmd
		} else {
			out.Ended = append(out.Ended, TermEnd{Term: in.cmd})
		}
		out.Replies = append(out.Replies, r)
	case endThenCheck:
		m.term++
		out.Ended = append(out.Ended, TermEnd{Term: in.term, Cause: errProbeClosed})
		out.Commands = append(out.Commands, check{id: m.term, path: in.path})
	case SessionChange:
		if in.State == zk.StateLost {
			out.Events = append(out.Events, events.Event{Type: events.Lost, State: m.state})
		}
		if in.State == zk.StateClosed {
			for t := range m.waiting {
				out.Ended = append(out.Ended, TermEnd{Term: t, Cause: zk.ErrClosed})
			}
		}
	}
	return out
}

var errProbeClosed = errors.New("probe: closed")

func runProbe(conn zk.Conn) *Shell[probeIn, check] { return runProbeSeeing(conn, nil) }

// runProbeSeeing runs the probe; seen, if set, is told of each command as
// it is made.
func runProbeSeeing(conn zk.Conn, seen func(check)) *Shell[probeIn, check] {
	return Run[probeIn, check](conn, &probeMachine{state: events.StateStart, waiting: map[uint64]uint64{}}, Spec[probeIn, check]{
		Recipe: "probe", Path: "/", Instance: "p1",
		Exec: func(s *Shell[probeIn, check], c check, op Op) {
			if seen != nil {
				seen(c)
			}
			s.Go(func(ctx context.Context) (probeIn, bool) {
				var ok bool
				var err error
				op(ctx, "exists", func(ctx context.Context) error {
					_, ok, err = conn.Exists(ctx, c.path)
					return err
				})
				return checked{cmd: c.id, exists: ok, err: err}, true
			})
		},
		ErrorType: func(error) string { return "_OTHER" },
		Closed:    errProbeClosed,
	})
}

func TestShellRunsAnyPureMachine(t *testing.T) {
	s := sim.New()
	conn := s.Connect()
	defer conn.Close()
	if _, err := conn.Create(context.Background(), "/here", nil, zk.ModePersistent); err != nil {
		t.Fatal(err)
	}
	sh := runProbe(conn)
	sub := sh.Subscribe()

	a, err := sh.Do(context.Background(), func(req uint64) probeIn { return ask{req: req, path: "/here"} })
	if err != nil || a.Value != true || a.Loss == nil {
		t.Fatalf("ask /here = %+v, %v; want true with a grant's Loss", a, err)
	}
	b, err := sh.Do(context.Background(), func(req uint64) probeIn { return ask{req: req, path: "/nowhere"} })
	if err != nil || b.Value != false || b.Loss != nil {
		t.Fatalf("ask /nowhere = %+v, %v; want false and no grant", b, err)
	}
	// The events carry what the shell adds: recipe, instance, session.
	for _, want := range []events.Type{events.Start, events.OfferStart, events.OfferStart} {
		ev := <-sub.C
		if ev.Type != want || ev.Recipe != "probe" || ev.Instance != "p1" || ev.SessionID != conn.SessionID() {
			t.Fatalf("event %+v, want %v stamped by the shell", ev, want)
		}
	}
	// The machine ends the granted term when the connection closes: the
	// Loss closes with its cause.
	conn.Close()
	<-a.Loss.Done()
	if !errors.Is(a.Loss.Err(), zk.ErrClosed) {
		t.Fatalf("Loss.Err = %v", a.Loss.Err())
	}
	sh.Stop()
	if _, err := sh.Do(context.Background(), func(req uint64) probeIn { return ask{req: req, path: "/here"} }); !errors.Is(err, errProbeClosed) {
		t.Fatalf("Do after Stop = %v, want the spec's Closed", err)
	}
	for range sub.C { // Stop ends the subscription
	}
}

// A step that ends a granted term and makes a request (a delete of the
// term's node, in a lock) closes the term's Loss before the request goes
// out: whoever sees the request's effect sees the grant already lost.
func TestLossClosesBeforeTheStepsRequests(t *testing.T) {
	s := sim.New()
	conn := s.Connect()
	defer conn.Close()
	if _, err := conn.Create(context.Background(), "/here", nil, zk.ModePersistent); err != nil {
		t.Fatal(err)
	}
	var loss *Loss
	closedAtRequest := make(chan bool, 1)
	sh := runProbeSeeing(conn, func(c check) {
		if c.path == "/after" {
			closedAtRequest <- loss.Err() != nil
		}
	})
	defer sh.Stop()
	a, err := sh.Do(context.Background(), func(req uint64) probeIn { return ask{req: req, path: "/here"} })
	if err != nil || a.Loss == nil {
		t.Fatalf("ask /here = %+v, %v", a, err)
	}
	loss = a.Loss
	sh.Post(context.Background(), endThenCheck{term: a.Grant, path: "/after"}, false)
	if !<-closedAtRequest {
		t.Fatal("the step's request went out before the ended grant's Loss closed")
	}
}

// buggyProbe fires a transition its state does not allow when asked about
// "/illegal": a bug in a machine, which its Shell reports as a FAILED
// event, once.
type buggyProbe struct {
	*probeMachine
	fsm *FSM
}

func (m buggyProbe) Bug() error { return m.fsm.Bug() }

func (m buggyProbe) Step(in probeIn) Output[check] {
	if a, ok := in.(ask); ok && a.path == "/illegal" {
		_ = m.fsm.Fire("finish") // START has no finish
		_ = m.fsm.Fire("finish")
		return Output[check]{Replies: []Reply{{Req: a.req}}}
	}
	return m.probeMachine.Step(in)
}

func TestShellReportsAMachineBugOnce(t *testing.T) {
	conn := sim.New().Connect()
	defer conn.Close()
	f, err := NewFSM([]events.State{events.StateStart, events.StateReady, events.StateStop}, events.StateStart,
		[]Transition{{Trigger: "begin", From: []events.State{events.StateStart}, To: events.StateReady},
			{Trigger: "finish", From: []events.State{events.StateReady}, To: events.StateStop}})
	if err != nil {
		t.Fatal(err)
	}
	sh := Run[probeIn, check](conn, buggyProbe{&probeMachine{state: events.StateStart, waiting: map[uint64]uint64{}}, f},
		Spec[probeIn, check]{Recipe: "probe", Path: "/", Instance: "p1", Closed: errProbeClosed})
	defer sh.Stop()
	sub := sh.Subscribe()
	for range 2 {
		if _, err := sh.Do(context.Background(), func(req uint64) probeIn { return ask{req: req, path: "/illegal"} }); err != nil {
			t.Fatal(err)
		}
	}
	sh.Stop()
	var failed []events.Event
	for ev := range sub.C {
		if ev.Type == events.Failed {
			failed = append(failed, ev)
		}
	}
	if len(failed) != 1 || failed[0].Err == nil || f.Bug() == nil {
		t.Fatalf("FAILED events %+v (bug %v), want one carrying the illegal transition", failed, f.Bug())
	}
	t.Log(failed[0].Err)
}

// A command's timer (After) posts its input as the command's; Stop stops
// the timers that have not fired, so nothing of a stopped shell waits in
// the runtime's timer heap.
func TestAfterPostsTheCommandsInputAndStopStopsIt(t *testing.T) {
	conn := sim.New().Connect()
	defer conn.Close()
	delay := time.Millisecond
	sh := Run[probeIn, check](conn, &probeMachine{state: events.StateStart, waiting: map[uint64]uint64{}}, Spec[probeIn, check]{
		Recipe: "probe", Path: "/", Instance: "p1", Closed: errProbeClosed,
		Exec: func(s *Shell[probeIn, check], c check, _ Op) {
			s.After(delay, checked{cmd: c.id, exists: true})
		},
	})
	a, err := sh.Do(context.Background(), func(req uint64) probeIn { return ask{req: req, path: "/x"} })
	if err != nil || a.Value != true {
		t.Fatalf("ask = %+v, %v; want the timer's answer", a, err)
	}
	delay = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := sh.Do(ctx, func(req uint64) probeIn { return ask{req: req, path: "/y"} }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ask with an hour's timer = %v", err)
	}
	sh.Stop()
	if len(sh.timers) != 1 {
		t.Fatalf("%d timers left, want the hour's one (the fired one gone)", len(sh.timers))
	}
	for _, tm := range sh.timers {
		if tm.Stop() {
			t.Error("Stop left the hour's timer running")
		}
	}
}

// The events of a session change carry the session it is about: LOST
// names the session that ended, although the connection has its next
// one by the time the machine steps on it.
func TestLostNamesTheSessionThatEnded(t *testing.T) {
	s := sim.New()
	conn := s.Connect()
	defer conn.Close()
	sh := runProbe(conn)
	defer sh.Stop()
	sub := sh.Subscribe()
	defer sub.Close()
	old := conn.SessionID()
	s.Expire(conn) // the new session is the connection's before LOST is stepped on
	for ev := range sub.C {
		if ev.Type != events.Lost {
			continue
		}
		if ev.SessionID != old || conn.SessionID() == old {
			t.Fatalf("LOST carries session %#x; want the ended %#x (the connection's is now %#x)", ev.SessionID, old, conn.SessionID())
		}
		return
	}
}

// narrowMachine's input type cannot hold the standard inputs: Run refuses
// it at once, rather than the machine missing its session changes.
type narrowIn interface{ narrow() }
type narrowMachine struct{}

func (narrowMachine) State() events.State         { return events.StateStart }
func (narrowMachine) Start() Output[check]        { return Output[check]{} }
func (narrowMachine) Step(narrowIn) Output[check] { return Output[check]{} }

func TestRunRefusesAnInputTypeWithoutTheStandardInputs(t *testing.T) {
	conn := sim.New().Connect()
	defer conn.Close()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "narrow's input type runtime.narrowIn does not admit the shell's runtime.SessionChange") {
			t.Fatalf("Run panicked with %v, want the inputs it cannot give", r)
		}
	}()
	Run[narrowIn, check](conn, narrowMachine{}, Spec[narrowIn, check]{Recipe: "narrow"})
}
