package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
)

// Command is a request a pure machine asks its shell to make. The inputs
// that answer it carry its ID.
type Command interface{ ID() uint64 }

// Machine is a pure machine: (state, input) → (state, output), no I/O, no
// goroutines, no clock. A Shell runs it. A machine that also has a method
// Bug() error (its FSM's Bug) has an illegal transition reported by the
// Shell as a FAILED event with the error, once.
type Machine[In any, C Command] interface {
	Start() Output[C]
	Step(In) Output[C]
	State() events.State
}

// buggy is a Machine that reports its illegal transitions (FSM.Bug).
type buggy interface{ Bug() error }

// Output is what one step of a machine produced.
type Output[C Command] struct {
	// Events are the machine's part of its lifecycle events (Type, Phase,
	// State, Term, Node, Token, Err); the shell adds the time, the
	// instance, the session and the trace.
	Events   []events.Event
	Commands []C
	Replies  []Reply
	Ended    []TermEnd // grants that ended, and why
	// Revoked are granted terms whose holder was asked to give them up:
	// their Revoke signals are raised.
	Revoked []uint64
	Done    bool // the machine is finished: the shell stops
}

// Reply answers the call Req. Grant, when not 0, is the term the reply
// grants: the caller gets the term's Loss with it.
type Reply struct {
	Req   uint64
	Grant uint64
	Value any // the machine's own answer
	Err   error
}

// TermEnd is the end of a granted term, and why it ended.
type TermEnd struct {
	Term  uint64
	Cause error
}

// Answer is what a call gets: the machine's reply and, for a grant, the
// Loss that closes when the term ends and the Signal raised when its
// holder is asked to give it up.
type Answer struct {
	Reply
	Loss   *Loss
	Revoke *Signal
}

// Spec is what a recipe tells the Shell about its machine.
type Spec[In any, C Command] struct {
	Recipe   string // names events and spans
	Path     string // the recipe's directory
	Instance string // the instance id on events
	// Telemetry makes the request spans and the measurements (nil:
	// none).
	Telemetry *Telemetry

	// Exec starts cmd's requests off the actor, with s.Go or s.GoInOrder
	// (and s.Post from a goroutine it started so, with its ctx) or
	// s.After; op makes one request in a CLIENT span under the span of
	// the input that made cmd. The inputs they post are cmd's: the shell
	// handles them under that span, with nothing for the recipe to match.
	Exec func(s *Shell[In, C], cmd C, op Op)
	// Withdraw says whether a call whose caller stopped waiting is
	// withdrawn, with a Cancel (nil, or false: the call needs none).
	Withdraw func(call In) bool
	// Refused is the input for an answer that no caller took (nil, or
	// ok false: none): the machine answered call after its caller had
	// stopped waiting, or just as it did. What the answer gave (an item
	// taken, a claim) is the machine's again, to give back. Each answer
	// is either taken by its caller or refused, never both.
	Refused func(call In, r Reply) (refused In, ok bool)
	// ErrorType names an error for a span's error.type, and a grant's end
	// (its cause; nil is "released") for zkrecipes.hold.duration.
	ErrorType func(error) string
	// Closed is what calls get once the shell has stopped.
	Closed error

	// CloseTimeout bounds Close's wait for the Shutdown.
	CloseTimeout time.Duration
	// CleanupPending is what Close returns when it handed leftovers to
	// the janitor.
	CleanupPending error
}

// Op makes one request, named name ("create", "children", ...), in a
// CLIENT span "<name> <dir>" (Telemetry.Request): under the span of the
// call whose input made the command while that call is in progress, else
// as a root span linked to it. f may name the request's node (SetNode);
// errors the ctx given to Op expects (Expect) are not failures.
type Op func(ctx context.Context, name string, f func(ctx context.Context) error)

// Shell runs a pure machine in an actor on a connection: calls (Do) and
// the standard inputs (SessionChange, Cancel, Shutdown, Handover) are its
// inputs; each step's commands are executed off the actor (Spec.Exec) and
// their replies come back as inputs; its events are published on a Bus
// with the trace of the call that started the term; a grant's Loss closes
// with the cause when the machine ends the term. Its methods are safe for
// concurrent use.
type Shell[In any, C Command] struct {
	spec        Spec[In, C]
	m           Machine[In, C]
	conn        zk.Conn
	bus         *events.Bus
	actor       *Actor[message[In]]
	state       atomic.Value // events.State after each step
	nextReq     atomic.Uint64
	unsubscribe func()
	closeOnce   sync.Once
	closeErr    error // Close's result
	bugShown    bool  // the machine's Bug was published

	// Owned by the actor goroutine.
	calls     map[uint64]*call[In]         // calls waiting for their answer
	losses    map[uint64]*Loss             // per granted term
	revokes   map[uint64]*Signal           // per granted term
	spans     map[uint64]spanRef           // per command: the span it was made under
	termSpan  map[uint64]trace.SpanContext // per term: the span of the call that began it
	curSpan   context.Context              // the span of the input being handled
	curCall   uint64                       // the call whose span curSpan is (0: none)
	execCmd   uint64                       // the command Spec.Exec is making (0: none): Go and After tag their inputs with it
	lastTurn  <-chan struct{}              // closed once the last command made with GoInOrder posted (nil: none made)
	timers    map[uint64]*time.Timer       // After's timers that have not fired, by number: Stop stops them
	lastTimer uint64                       // the last timer's number
	grantAt   map[uint64]time.Time         // per granted term: when it was granted
	refused   []In                         // inputs for answers no caller took, to step next (refuse)

	// curSession is the session a session change being handled is about
	// (0: the input is no session change): its events carry it, so a
	// LOST names the session that ended, not the connection's next one.
	curSession int64
}

type message[In any] struct {
	start bool
	cmd   uint64 // the command whose Exec started the goroutine or timer that posted in (0: none)
	timer uint64 // the timer (After) that posted in (0: none)
	in    In
	has   bool // in is set (a goroutine that gave up posts nothing)
	call  *call[In]
	gone  *call[In] // this call's caller stopped waiting; in, if any, withdraws it
	more  bool      // another input for the same command follows: keep its span
	// session is the session a session change is about (0: not one).
	session int64
}

type call[In any] struct {
	req   uint64
	ctx   context.Context
	in    In
	reply chan Answer // the actor sends at most one answer
	gone  bool        // its caller stopped waiting (actor-owned)
}

// Run starts m on conn. The Shell owns m from now on. It panics when In
// does not admit the standard inputs.
func Run[In any, C Command](conn zk.Conn, m Machine[In, C], spec Spec[In, C]) *Shell[In, C] {
	admitsStandardInputs[In](spec.Recipe)
	s := &Shell[In, C]{
		spec: spec, m: m, conn: conn, bus: events.NewBus(),
		calls: make(map[uint64]*call[In]), losses: make(map[uint64]*Loss), revokes: make(map[uint64]*Signal),
		spans: make(map[uint64]spanRef), termSpan: make(map[uint64]trace.SpanContext),
		curSpan: context.Background(), grantAt: make(map[uint64]time.Time), timers: make(map[uint64]*time.Timer),
	}
	s.state.Store(m.State())
	s.actor = Spawn(s.handle)
	s.unsubscribe = WatchSession(s.actor, conn, func(ev zk.SessionEvent) message[In] {
		return message[In]{in: any(SessionChange{State: ev.State, SessionID: ev.SessionID}).(In), has: true, session: ev.SessionID}
	})
	s.actor.Post(message[In]{start: true})
	return s
}

// State is the machine's state after its last step.
func (s *Shell[In, C]) State() events.State { return s.state.Load().(events.State) }

// Subscribe returns a subscription to the machine's lifecycle events.
func (s *Shell[In, C]) Subscribe(opts ...events.SubscribeOption) *events.Subscription {
	return s.bus.Subscribe(opts...)
}

// Do sends the input made by mk (given a fresh request id) and waits for
// its answer. When ctx ends first it returns ctx.Err() and tells the actor
// that the call's caller is gone, with a Cancel if Spec.Withdraw says the
// call needs one; an answer the call gets from then on, or got just before
// without being read, goes to the machine as Spec.Refused says. An answer
// already there when ctx ends is returned.
func (s *Shell[In, C]) Do(ctx context.Context, mk func(req uint64) In) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, err
	}
	c := &call[In]{req: s.nextReq.Add(1), ctx: ctx, reply: make(chan Answer, 1)}
	c.in = mk(c.req)
	if !s.actor.Post(message[In]{in: c.in, has: true, call: c}) {
		return Answer{}, s.spec.Closed
	}
	select {
	case a := <-c.reply:
		return a, a.Err
	case <-ctx.Done():
		select {
		case a := <-c.reply: // it came with the ctx's end
			return a, a.Err
		default:
		}
		ok := s.spec.Withdraw != nil && s.spec.Withdraw(c.in)
		s.actor.Post(message[In]{in: any(Cancel{Req: c.req}).(In), has: ok, gone: c})
		return Answer{}, ctx.Err()
	case <-s.actor.Done():
		select {
		case a := <-c.reply:
			return a, a.Err
		default:
			return Answer{}, s.spec.Closed
		}
	}
}

// Go runs f off the actor, under the actor's lifetime, and posts the
// input it returns (none when ok is false). Call it from Spec.Exec: the
// inputs of f, returned or posted with f's ctx (Post), are the command's,
// handled under the span it was made under.
func (s *Shell[In, C]) Go(f func(ctx context.Context) (in In, ok bool)) { s.start(f, nil) }

// GoInOrder is Go for a command whose reply must reach the machine in the
// order the commands were made, among those made with GoInOrder: f starts
// once the one made before it has posted its first input (returned it, or
// posted it with Post). With Go, each command's requests run on their own
// goroutine, in the scheduler's order, so a reply the server sent first
// may reach the machine second (a listing made before our delete, after
// the delete's reply). The price is that those commands are not sent
// together: use it for the few whose order the machine relies on.
func (s *Shell[In, C]) GoInOrder(f func(ctx context.Context) (in In, ok bool)) {
	t := &turn{prev: s.lastTurn, mine: make(chan struct{})}
	s.lastTurn = t.mine
	s.start(f, t)
}

// start runs f for the command Spec.Exec is making, in its turn (nil:
// none), and posts what it returns.
func (s *Shell[In, C]) start(f func(ctx context.Context) (in In, ok bool), t *turn) {
	ref := cmdRef{id: s.execCmd, turn: t}
	s.actor.Run(func(ctx context.Context) {
		defer t.pass()
		if !t.await(ctx) {
			return // the actor is stopping
		}
		in, ok := f(context.WithValue(ctx, cmdKey{}, ref))
		s.actor.Post(message[In]{in: in, has: ok, cmd: ref.id})
	})
}

// Post posts in from a goroutine started by Go, with its ctx. more says
// that another input of the same command follows (a watch's event after
// its request's reply), so the command's span is kept for it.
func (s *Shell[In, C]) Post(ctx context.Context, in In, more bool) {
	ref, _ := ctx.Value(cmdKey{}).(cmdRef)
	s.actor.Post(message[In]{in: in, has: true, more: more, cmd: ref.id})
	ref.turn.pass()
}

// cmdRef is what a goroutine started by Go knows of its command: its id,
// and its turn (GoInOrder's; nil for Go's).
type cmdRef struct {
	id   uint64
	turn *turn
}

// turn is a command's place among those made with GoInOrder: it starts
// once prev is closed (nil: at once), and closes mine once its first
// input is posted, or it ends.
type turn struct {
	prev <-chan struct{}
	mine chan struct{}
	once sync.Once
}

// await waits for t's turn; false: ctx ended first.
func (t *turn) await(ctx context.Context) bool {
	if t == nil || t.prev == nil {
		return true
	}
	select {
	case <-t.prev:
		return true
	case <-ctx.Done():
		return false
	}
}

// pass lets the next command in order start.
func (t *turn) pass() {
	if t != nil {
		t.once.Do(func() { close(t.mine) })
	}
}

// After posts in after d, as the last input of the command Spec.Exec is
// making: a timer, with no goroutine. Call it from Spec.Exec. Stop stops
// the timers that have not fired.
func (s *Shell[In, C]) After(d time.Duration, in In) {
	s.lastTimer++
	id, n := s.execCmd, s.lastTimer
	s.timers[n] = time.AfterFunc(d, func() { s.actor.Post(message[In]{in: in, has: true, cmd: id, timer: n}) })
}

// cmdKey keys the cmdRef in the ctx of a goroutine started by Go.
type cmdKey struct{}

// Stop stops the actor (requests in flight are cancelled, their answers
// dropped), waits for it and every goroutine it started, and ends the
// subscriptions. Calls then get Spec.Closed.
func (s *Shell[In, C]) Stop() {
	s.actor.Kill()
	<-s.actor.Done()
	for _, t := range s.timers { // the actor is done: the map is ours
		t.Stop()
	}
	s.unsubscribe()
	s.bus.Close()
}

// Close shuts the machine down (Shutdown), waiting at most
// Spec.CloseTimeout, and stops the actor. When the wait times out (the
// connection is down), what the machine still has to delete goes to the
// connection's janitor (Handover, HandOver), which deletes it when
// the same session is back, and Close returns Spec.CleanupPending. A
// closed connection is no error: its session's end removed our nodes.
// Every later call returns the first one's result.
func (s *Shell[In, C]) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.spec.CloseTimeout)
		_, err := s.Do(ctx, func(req uint64) In { return any(Shutdown{Req: req}).(In) })
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			err = s.handOver()
		}
		s.Stop()
		if errors.Is(err, s.spec.Closed) {
			err = nil
		}
		s.closeErr = err
	})
	return s.closeErr
}

// handOver gives what the machine still has to delete to the connection's
// janitor: nil if the janitor finished at once (the session is over),
// Spec.CleanupPending otherwise.
func (s *Shell[In, C]) handOver() error {
	a, err := s.Do(context.Background(), func(req uint64) In { return any(Handover{Req: req}).(In) })
	if err != nil {
		return err // the actor stopped meanwhile: nothing is left to hand over
	}
	l, _ := a.Value.(Leftovers)
	if len(l.Nodes)+len(l.Prefixes) == 0 {
		return nil
	}
	select {
	case <-HandOver(s.conn, l):
		return nil
	default:
		return fmt.Errorf("%w: %d nodes and %d lost creates are deleted when the session reconnects",
			s.spec.CleanupPending, len(l.Nodes), len(l.Prefixes))
	}
}

// handle runs on the actor goroutine.
func (s *Shell[In, C]) handle(_ context.Context, msg message[In]) bool {
	delete(s.timers, msg.timer)
	if msg.gone != nil {
		s.callGone(msg.gone, msg.has)
	}
	var out Output[C]
	switch {
	case msg.start:
		out = s.m.Start()
	case !msg.has:
		return s.stepRefused() // a goroutine that gave up, or a caller whose call needs no Cancel
	default:
		s.curSpan, s.curCall, s.curSession = context.Background(), 0, msg.session
		if msg.call != nil {
			s.calls[msg.call.req] = msg.call
			s.curSpan, s.curCall = msg.call.ctx, msg.call.req
		} else if id := msg.cmd; id != 0 {
			if span, ok := s.spans[id]; ok {
				s.curSpan, s.curCall = span.ctx, span.call
				if !msg.more {
					delete(s.spans, id)
				}
			}
		}
		out = s.m.Step(msg.in)
	}
	ok := s.settle(out)
	s.curSession = 0
	return ok && s.stepRefused()
}

// settle applies a step's output; it reports false once the machine is
// done.
func (s *Shell[In, C]) settle(out Output[C]) bool {
	s.state.Store(s.m.State())
	if b, ok := s.m.(buggy); ok && !s.bugShown && b.Bug() != nil {
		s.bugShown = true
		out.Events = append(out.Events, events.Event{Type: events.Failed, State: s.m.State(),
			Err: fmt.Errorf("%s: a bug in its machine: %w", s.spec.Recipe, b.Bug())})
	}
	s.apply(out)
	return !out.Done
}

// stepRefused steps the machine on the answers refused while the
// message was handled (refuse), before the next message: posted, they
// could come after an input that ends the machine (a Close right after a
// call gave up), and what they gave would be lost. It reports false once
// the machine is done.
func (s *Shell[In, C]) stepRefused() bool {
	for len(s.refused) > 0 {
		in := s.refused[0]
		s.refused = s.refused[1:]
		s.curSpan, s.curCall = context.Background(), 0
		if !s.settle(s.m.Step(in)) {
			return false
		}
	}
	return true
}

func (s *Shell[In, C]) apply(out Output[C]) {
	sc := trace.SpanContextFromContext(s.curSpan)
	for _, e := range out.Events {
		s.spanEvent(e)
		if e.Phase == events.PhaseBegin {
			s.termSpan[e.Term] = sc
		}
		tsc := s.termSpan[e.Term]
		if !tsc.IsValid() {
			tsc = sc
		}
		e.Time, e.Recipe, e.Path, e.Instance = time.Now(), s.spec.Recipe, s.spec.Path, s.spec.Instance
		e.SessionID, e.TraceID, e.SpanID = s.conn.SessionID(), tsc.TraceID(), tsc.SpanID()
		if s.curSession != 0 {
			e.SessionID = s.curSession
		}
		s.bus.Publish(e)
	}
	// Ended grants' losses close before any request goes out: a request
	// may delete the grant's node, and once that is seen elsewhere another
	// may hold; by then our grant's Lost must be closed.
	for _, n := range out.Revoked {
		s.revoke(n).Raise()
	}
	for _, e := range out.Ended {
		if at, ok := s.grantAt[e.Term]; ok { // recorded before the holder learns of the end
			s.spec.Telemetry.held(time.Since(at), s.outcome(e.Cause))
			delete(s.grantAt, e.Term)
		}
		if loss, ok := s.losses[e.Term]; ok {
			loss.Close(e.Cause)
			delete(s.losses, e.Term)
		}
		delete(s.termSpan, e.Term)
	}
	// Requests go out before callers are woken. The goroutine started
	// last, like the one woken last, takes the scheduler's next-to-run
	// slot of this thread and pushes the one there to the back of its
	// queue: a caller woken first would wait behind the requests'
	// goroutines (measured: about 7% of a leadership hand-over); woken
	// last, it runs as soon as the actor waits again.
	//
	// A command made for a call that this step answers, or that was
	// answered before, is work after the operation (a grant's hold mark,
	// a clean-up): its requests are roots linked to the call's span.
	live := s.calls[s.curCall] != nil
	for _, r := range out.Replies {
		live = live && r.Req != s.curCall
	}
	for _, cmd := range out.Commands {
		s.spans[cmd.ID()] = spanRef{ctx: s.curSpan, call: s.curCall}
		s.execCmd = cmd.ID()
		s.spec.Exec(s, cmd, s.op(s.curSpan, !live))
		s.execCmd = 0
	}
	for _, r := range out.Replies {
		c, ok := s.calls[r.Req]
		if !ok {
			continue // not a call's, or its caller gave up: refused (callGone)
		}
		delete(s.calls, r.Req)
		if c.gone {
			s.refuse(c, r)
			continue
		}
		a := Answer{Reply: r}
		if r.Grant != 0 {
			a.Loss = s.loss(r.Grant, out.Ended)
			a.Revoke = s.revoke(r.Grant)
			select {
			case <-a.Loss.Done():
			default:
				if _, ok := s.grantAt[r.Grant]; !ok {
					s.grantAt[r.Grant] = time.Now() // a re-entrant grant keeps the first time
				}
			}
		}
		c.reply <- a
	}
	for _, e := range out.Ended {
		delete(s.revokes, e.Term) // a grant given with its end keeps its own
	}
}

// revoke returns the revocation Signal of granted term n.
func (s *Shell[In, C]) revoke(n uint64) *Signal {
	sig := s.revokes[n]
	if sig == nil {
		sig = NewSignal()
		s.revokes[n] = sig
	}
	return sig
}

// loss returns the Loss of granted term n: closed already when n is among
// ended (a grant and its end in one step, e.g. a grant that raced its
// caller's cancel).
func (s *Shell[In, C]) loss(n uint64, ended []TermEnd) *Loss {
	if l := s.losses[n]; l != nil {
		return l
	}
	l := NewLoss()
	for _, e := range ended {
		if e.Term == n {
			l.Close(e.Cause)
			return l
		}
	}
	s.losses[n] = l
	return l
}

// spanRef is the span a command was made under, and the call it is
// (0: none).
type spanRef struct {
	ctx  context.Context
	call uint64
}

// op returns the Op of a command made under parent; after, when the
// parent's operation has ended (or ends with this step).
func (s *Shell[In, C]) op(parent context.Context, after bool) Op {
	span := trace.SpanFromContext(parent)
	return func(ctx context.Context, name string, f func(context.Context) error) {
		ctx = trace.ContextWithSpan(ctx, span)
		if after {
			ctx = afterOperation(ctx)
		}
		_ = s.spec.Telemetry.Request(ctx, name, s.spec.ErrorType, f)
	}
}

// outcome names how a grant ended, for zkrecipes.hold.duration.
func (s *Shell[In, C]) outcome(cause error) string {
	if cause == nil {
		return "released"
	}
	return s.spec.ErrorType(cause)
}

// spanEvent records e on the spans in progress: a grant or a failure on
// the span of the input being handled, a session change (SUSPENDED,
// RECONNECTED, LOST) on the span of every call in progress.
func (s *Shell[In, C]) spanEvent(e events.Event) {
	attrs := []attribute.KeyValue{AttrRecipe.String(s.spec.Recipe)}
	switch e.Type {
	case events.Suspended, events.Reconnected, events.Lost:
		attrs = append(attrs, AttrSessionID.String(SessionHex(s.conn.SessionID())))
		for _, c := range s.calls {
			if sp := trace.SpanFromContext(c.ctx); sp.IsRecording() {
				sp.AddEvent(e.Type.String(), trace.WithAttributes(attrs...))
			}
		}
		return
	}
	if e.Phase != events.PhaseGranted && e.Phase != events.PhaseFailed {
		return
	}
	sp := trace.SpanFromContext(s.curSpan)
	if !sp.IsRecording() {
		return
	}
	if e.Node != "" {
		attrs = append(attrs, AttrNode.String(e.Node))
	}
	if e.Token != 0 {
		attrs = append(attrs, AttrCzxid.Int64(e.Token))
	}
	if e.Err != nil {
		attrs = append(attrs, AttrErrorType.String(s.spec.ErrorType(e.Err)))
	}
	sp.AddEvent(e.Type.String(), trace.WithAttributes(attrs...))
}

// callGone: c's caller stopped waiting. An answer the machine gave c
// before, which the caller did not read, is refused now. A call still
// waiting is forgotten when it is withdrawn with a Cancel (it gets no
// answer); without one, the machine answers it later, and that answer
// is refused (apply).
func (s *Shell[In, C]) callGone(c *call[In], withdrawn bool) {
	if _, waiting := s.calls[c.req]; waiting {
		c.gone = true
		if withdrawn {
			delete(s.calls, c.req)
		}
		return
	}
	select {
	case a := <-c.reply:
		s.refuse(c, a.Reply)
	default:
	}
}

// refuse hands answer r, which c's caller did not take, back to the
// machine (Spec.Refused): stepRefused steps it before the next message.
func (s *Shell[In, C]) refuse(c *call[In], r Reply) {
	if s.spec.Refused == nil {
		return
	}
	if in, ok := s.spec.Refused(c.in, r); ok {
		s.refused = append(s.refused, in)
	}
}
