package twophase

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// config is what a participant's machine needs.
type config struct {
	Root      string // the root path of the transactions
	ID        string // the participant's id
	SessionID int64  // the connection's session when the machine starts
}

// The machine's states: START while not serving, DETERMINE while serving
// with transactions pending (or not yet registered), READY while serving
// and idle, FAILED after the session ended while serving, until it is
// registered again, STOP once closed. A transaction's own state is on its
// events: OFFER prepared, DETERMINE voted, READY decided.
var states = []events.State{events.StateStart, events.StateDetermine, events.StateReady, events.StateFailed, events.StateStop}

const (
	trWork    runtime.Trigger = "work"
	trIdle    runtime.Trigger = "idle"
	trLost    runtime.Trigger = "lost"
	trUnserve runtime.Trigger = "unserve"
	trStopped runtime.Trigger = "stopped"
)

var transitions = []runtime.Transition{
	{Trigger: trWork, From: []events.State{events.StateStart, events.StateDetermine, events.StateReady, events.StateFailed}, To: events.StateDetermine},
	{Trigger: trIdle, From: []events.State{events.StateDetermine, events.StateReady, events.StateFailed}, To: events.StateReady},
	{Trigger: trLost, From: []events.State{events.StateDetermine, events.StateReady, events.StateFailed}, To: events.StateFailed},
	{Trigger: trUnserve, From: []events.State{events.StateStart, events.StateDetermine, events.StateReady, events.StateFailed}, To: events.StateStart},
	{Trigger: trStopped, From: []events.State{events.StateStart}, To: events.StateStop}, // serving has stopped
}

// txState is where a transaction is, for this participant.
type txState int

const (
	stLoad    txState = iota // read the transaction, its decision and our vote
	stPrepare                // call Prepare
	stVote                   // write the vote
	stVoted                  // wait for the decision
	stDecide                 // create the decision (abort)
	stDecided                // call Commit or Abort
	stHandled                // delete the inbox entry
)

type ptx struct {
	id       string
	st       txState
	cmd      uint64 // the command in flight that moves it on (0: none)
	queued   bool   // waiting for the handler
	payload  []byte
	yes      bool
	reason   string
	want     Outcome // stDecide: the decision to make
	outcome  Outcome
	decCmd   uint64 // the read of the decision in flight, or its watch
	decArmed bool   // decCmd is a watch
	decMade  bool   // the decision's watch fired on its creation: read it alone
	coordCmd uint64 // the watch on the coordinator node (or its request)
}

// machine is a participant: a pure machine, run by a runtime.Shell.
type machine struct {
	base
	cfg config

	serving    uint64 // the serve call (0: not serving)
	txs        map[string]*ptx
	queue      []string // transactions waiting for the handler
	busy       uint64   // the handler command in flight (0: none)
	inboxCmd   uint64   // the inbox listing in flight, or its watch
	inboxArmed bool
	regCmd     uint64 // the registration in flight, or its watch
	registered bool
	sleepCmd   uint64 // the resync timer
	b          backoff
	failed     bool     // the session ended while serving; not registered again yet
	deregCmd   uint64   // the deregistration in flight, or waiting for regBusy
	deregLeft  bool     // closing, the deregistration failed: made again on a reconnect, or handed over
	regBusy    uint64   // a registration whose reply has not come (it may create our node yet)
	waiting    []uint64 // awaitStopped calls
	stopped    bool
}

// newMachine returns a machine for cfg.
func newMachine(cfg config) (*machine, error) {
	b, err := newBase(cfg.Root, cfg.SessionID, states, transitions)
	return &machine{base: b, cfg: cfg}, err
}

type out = runtime.Output[command]

// base is what both machines have: their FSM, the layout under the root,
// their command ids, the session of their ephemeral nodes and the
// shutdown call.
type base struct {
	fsm     *runtime.FSM
	p       paths
	nextCmd uint64
	session int64
	closing uint64
}

func newBase(root string, session int64, states []events.State, trs []runtime.Transition) (base, error) {
	f, err := runtime.NewFSM(states, events.StateStart, trs)
	return base{fsm: f, p: paths{root}, session: session}, err
}

// State is the machine's state.
func (m *base) State() events.State { return m.fsm.Current() }

// Bug is the machine's first illegal transition (nil: none); its Shell
// reports it.
func (m *base) Bug() error { return m.fsm.Bug() }

func (m *base) cmd() uint64 {
	m.nextCmd++
	return m.nextCmd
}

// reply answers call req (0: none) with v and err.
func (m *base) reply(o *out, req uint64, v any, err error) {
	if req != 0 {
		o.Replies = append(o.Replies, runtime.Reply{Req: req, Value: v, Err: err})
	}
}

// outcomeEvent is COMMITTED or ABORTED (the reason in Err) for tx's
// decision o, in phase ended or failed.
func (m *base) outcomeEvent(tx string, o Outcome, ended, failed events.Phase) events.Event {
	if o.Committed {
		return events.Event{Type: events.Committed, Phase: ended, State: stateDecided, Node: m.p.tx(tx)}
	}
	return events.Event{Type: events.Aborted, Phase: failed, State: stateDecided, Node: m.p.tx(tx), Err: fmt.Errorf("%w: %s", ErrAborted, o.Reason)}
}

// Start begins: nothing is sent until Serve.
func (m *machine) Start() out {
	return out{Events: []events.Event{{Type: events.Start, State: events.StateStart}}}
}

// Step handles one input.
func (m *machine) Step(in input) out {
	var o out
	switch i := in.(type) {
	case serveCall:
		m.serve(&o, i.Req)
	case runtime.Cancel: // the serve call Req was withdrawn (Serve's ctx ended)
		if i.Req == m.serving && m.serving != 0 {
			m.stopServing(&o)
		}
	case awaitStopped:
		m.waiting = append(m.waiting, i.Req)
	case runtime.Shutdown:
		if m.closing != 0 {
			m.reply(&o, i.Req, nil, ErrClosed)
			break
		}
		m.closing = i.Req
		if m.serving != 0 {
			m.reply(&o, m.serving, nil, ErrClosed)
			m.stopServing(&o)
		}
	case runtime.Handover:
		var l runtime.Leftovers
		if m.deregCmd != 0 || m.deregLeft {
			l = runtime.Leftovers{Session: m.session, Nodes: []string{m.p.participant(m.cfg.ID)}}
		}
		o.Replies = append(o.Replies, runtime.Reply{Req: i.Req, Value: l})
	case runtime.SessionChange:
		m.sessionChange(&o, i)
	case listed:
		m.inboxListed(&o, i)
	case fired: // a watch fired: what it watched is looked at again
		t := m.txs[i.Tx]
		switch {
		case m.serving == 0:
		case i.Cmd == m.inboxCmd:
			m.listInbox(&o)
		case i.Cmd == m.regCmd:
			m.register(&o)
		case t == nil:
		case i.Cmd == t.decCmd:
			t.decCmd, t.decArmed, t.decMade = 0, false, i.Type == zk.EventNodeCreated
			m.advance(&o, t)
		case i.Cmd == t.coordCmd:
			t.coordCmd = 0
			m.advance(&o, t)
		}
	case done:
		m.answered(&o, i)
	case loaded:
		m.loaded(&o, i)
	case decisionRead:
		m.decisionRead(&o, i)
	case coordWatched:
		t := m.txs[i.Tx]
		if t == nil || t.coordCmd != i.Cmd {
			break
		}
		switch {
		case i.Err != nil:
			t.coordCmd = 0
			m.fail(&o, i.Err)
		case !i.Exists:
			t.coordCmd = 0
			if t.st == stVoted && t.cmd == 0 {
				// The coordinator's session ended before a decision.
				t.st, t.want = stDecide, Outcome{Reason: ReasonCoordinatorGone}
				m.advance(&o, t)
			}
		}
	case prepared:
		m.prepared(&o, i)
	case voteWritten:
		m.voteWritten(&o, i)
	case decided:
		if t := m.tx(&o, i.Tx, i.Cmd, i.Err); t != nil { // on an error, made again at the resync
			t.st, t.outcome = stDecided, i.Outcome
			if i.Gone {
				t.st = stHandled // the transaction is deleted: nothing to handle
			}
			m.advance(&o, t)
		}
	case handled:
		m.handled(&o, i)
	case woke:
		if i.Cmd == m.sleepCmd && m.serving != 0 {
			m.sleepCmd = 0
			m.resync(&o)
		}
	}
	m.pump(&o) // after a handler call returned
	m.finish(&o)
	m.settle()
	return o
}

// answered handles the reply of a registration, a deregistration or an
// inbox entry's delete.
func (m *machine) answered(o *out, i done) {
	switch i.What {
	case "registered":
		if i.Cmd == m.regBusy {
			m.regBusy = 0
			if m.serving == 0 && m.deregCmd != 0 {
				// Serving stopped while it was in flight: our node may
				// have been made after the deregistration would have
				// looked, so the deregistration goes now.
				o.Commands = append(o.Commands, deregister{ref: ref{Cmd: m.deregCmd}})
			}
		}
		if i.Cmd != m.regCmd || m.serving == 0 {
			break
		}
		if i.Err != nil {
			m.regCmd = 0
			m.fail(o, i.Err)
			break
		}
		m.registered, m.failed = true, false
		m.b = backoff{}
	case "entry deleted":
		if t := m.tx(o, i.Tx, i.Cmd, i.Err); t != nil {
			delete(m.txs, t.id)
		}
	case "deregistered":
		if i.Cmd == m.deregCmd {
			m.deregCmd, m.deregLeft = 0, i.Err != nil && m.closing != 0
		}
	}
}

func (m *machine) serve(o *out, req uint64) {
	switch {
	case m.closing != 0:
		m.reply(o, req, nil, ErrClosed)
		return
	case m.serving != 0:
		m.reply(o, req, nil, ErrServing)
		return
	}
	m.serving, m.txs, m.failed = req, make(map[string]*ptx), false
	m.b = backoff{}
	// The inbox first: once we are registered, Proposes naming us find
	// it. Registering follows its listing.
	m.listInbox(o)
}

// stopServing forgets every transaction and watch (replies to them are
// ignored from now on) and deletes our registration node. A handler call
// in flight is waited for (see finish).
func (m *machine) stopServing(o *out) {
	m.serving, m.txs, m.queue = 0, nil, nil
	m.inboxCmd, m.inboxArmed, m.regCmd, m.registered, m.sleepCmd, m.failed = 0, false, 0, false, 0, false
	m.deregCmd = m.cmd()
	if m.regBusy == 0 {
		o.Commands = append(o.Commands, deregister{ref: ref{Cmd: m.deregCmd}})
	} // else it goes when the registration's reply comes
}

// finish answers the waits for the end of serving, and the shutdown,
// once nothing is in flight.
func (m *machine) finish(o *out) {
	if m.serving != 0 || m.deregCmd != 0 || m.deregLeft || m.busy != 0 {
		return
	}
	for _, req := range m.waiting {
		m.reply(o, req, nil, nil)
	}
	m.waiting = nil
	if m.closing != 0 && !m.stopped {
		m.stopped = true
		m.reply(o, m.closing, nil, nil)
		o.Done = true
	}
}

// settle moves the state machine to where the participant is.
func (m *machine) settle() {
	var tr runtime.Trigger
	switch {
	case m.stopped:
		tr = trStopped
	case m.serving == 0:
		tr = trUnserve
	case m.failed:
		tr = trLost
	case len(m.txs) > 0 || !m.registered:
		tr = trWork
	default:
		tr = trIdle
	}
	m.fsm.Fire(tr)
}

func (m *machine) sessionChange(o *out, i runtime.SessionChange) {
	switch i.State {
	case zk.StateLost:
		m.lose()
		m.session = 0
	case zk.StateConnected:
		if m.session != 0 && m.session != i.SessionID {
			m.lose()
		}
		m.session = i.SessionID
		m.resync(o)
	case zk.StateReconnected:
		m.resync(o)
	}
}

// lose forgets every watch: the session that had them is gone, and our
// registration node with it.
func (m *machine) lose() {
	m.deregLeft = false
	if m.serving == 0 {
		return
	}
	m.failed = true
	m.inboxCmd, m.inboxArmed, m.regCmd, m.registered = 0, false, 0, false
	for _, t := range m.txs {
		t.decCmd, t.decArmed, t.coordCmd = 0, false, 0
	}
}

// resync lists the inbox and registers (when their watches are not
// pending) and moves every transaction on.
func (m *machine) resync(o *out) {
	if m.deregLeft {
		m.deregCmd, m.deregLeft = m.cmd(), false
		o.Commands = append(o.Commands, deregister{ref: ref{Cmd: m.deregCmd}})
	}
	if m.serving == 0 {
		return
	}
	m.sleepCmd = 0
	if m.inboxCmd == 0 {
		m.listInbox(o)
	} else if m.inboxArmed && m.regCmd == 0 {
		m.register(o)
	}
	for _, id := range slices.Sorted(maps.Keys(m.txs)) {
		m.advance(o, m.txs[id])
	}
}

// fail schedules a resync after err, an error of the server (nil: of
// the handler). A write the server refused for our identity (zk.ErrNoAuth)
// would be refused again at every resync: serving ends with it instead.
func (m *machine) fail(o *out, err error) {
	if m.serving != 0 && errors.Is(err, zk.ErrNoAuth) {
		m.reply(o, m.serving, nil, fmt.Errorf("twophase: participant %s: %w", m.cfg.ID, err))
		m.stopServing(o)
		return
	}
	if m.serving == 0 || m.sleepCmd != 0 {
		return
	}
	m.sleepCmd = m.cmd()
	o.Commands = append(o.Commands, sleep{ref: ref{Cmd: m.sleepCmd}, Delay: m.b.next()})
}

func (m *machine) listInbox(o *out) {
	m.inboxCmd, m.inboxArmed = m.cmd(), false
	o.Commands = append(o.Commands, listInbox{ref: ref{Cmd: m.inboxCmd}})
}

func (m *machine) register(o *out) {
	m.regCmd, m.registered = m.cmd(), false
	m.regBusy = m.regCmd
	o.Commands = append(o.Commands, register{ref: ref{Cmd: m.regCmd}})
}

func (m *machine) inboxListed(o *out, i listed) {
	if i.Cmd != m.inboxCmd || m.serving == 0 {
		return
	}
	if i.Err != nil {
		m.inboxCmd = 0
		m.fail(o, i.Err)
		return
	}
	m.inboxArmed = true
	if m.regCmd == 0 {
		m.register(o)
	}
	// A listing and our deletes of entries answer in the order they were
	// made (GoInOrder): an entry deleted before this reply is not in it.
	for _, id := range i.Kids {
		if _, ok := m.txs[id]; !ok {
			t := &ptx{id: id}
			m.txs[id] = t
			m.advance(o, t)
		}
	}
}

// tx is the transaction id whose command cmd is answered with err, or
// nil for a stale reply or an error (then a resync follows); its command
// is done (a handler call's: the handler is free).
func (m *machine) tx(o *out, id string, cmd uint64, err error) *ptx {
	if cmd == m.busy {
		m.busy = 0
	}
	t := m.txs[id]
	if t == nil || t.cmd != cmd || cmd == 0 {
		return nil
	}
	t.cmd = 0
	if err != nil {
		m.fail(o, err)
		return nil
	}
	return t
}

// advance moves t on, unless a command of its is in flight.
func (m *machine) advance(o *out, t *ptx) {
	if t.cmd != 0 || m.serving == 0 {
		return
	}
	switch t.st {
	case stLoad:
		t.cmd = m.cmd()
		o.Commands = append(o.Commands, load{ref: ref{t.cmd, t.id}})
	case stPrepare, stDecided:
		if !t.queued {
			t.queued = true
			m.queue = append(m.queue, t.id)
		}
		m.pump(o)
	case stVote:
		t.cmd = m.cmd()
		v := vote{ref: ref{t.cmd, t.id}, Yes: t.yes, Reason: t.reason}
		if !t.yes {
			v.Abort = Outcome{Reason: m.abortReason(t.reason)}
		}
		o.Commands = append(o.Commands, v)
	case stVoted:
		switch {
		case !t.yes:
			// Our no decides: abort, for our reason (made here when the
			// vote was found made, or the decision was there first).
			t.st, t.want = stDecide, Outcome{Reason: m.abortReason(t.reason)}
			m.advance(o, t)
		case t.decCmd == 0:
			t.decCmd, t.decArmed = m.cmd(), false
			o.Commands = append(o.Commands, readDecision{ref: ref{t.decCmd, t.id}, Made: t.decMade})
			t.decMade = false
		case t.decArmed && t.coordCmd == 0:
			t.coordCmd = m.cmd()
			o.Commands = append(o.Commands, watchCoord{ref: ref{t.coordCmd, t.id}})
		}
	case stDecide:
		t.cmd = m.cmd()
		o.Commands = append(o.Commands, makeDecision{ref: ref{t.cmd, t.id}, Want: t.want})
	case stHandled:
		t.cmd = m.cmd()
		o.Commands = append(o.Commands, deleteEntry{ref: ref{t.cmd, t.id}})
	}
}

// pump starts the next handler call, one at a time.
func (m *machine) pump(o *out) {
	for m.busy == 0 && m.serving != 0 && len(m.queue) > 0 {
		id := m.queue[0]
		m.queue = m.queue[1:]
		t := m.txs[id]
		if t == nil || !t.queued {
			continue
		}
		t.queued = false
		t.cmd = m.cmd()
		m.busy = t.cmd
		if t.st == stPrepare {
			o.Commands = append(o.Commands, prepare{ref: ref{t.cmd, t.id}, Payload: t.payload})
		} else {
			o.Commands = append(o.Commands, handle{ref: ref{t.cmd, t.id}, Payload: t.payload, Outcome: t.outcome})
		}
	}
}

func (m *machine) loaded(o *out, i loaded) {
	t := m.tx(o, i.Tx, i.Cmd, i.Err)
	if t == nil {
		return
	}
	switch {
	case i.Gone, i.Bad:
		t.st = stHandled // gone (retention), or not ours to read: nothing to learn
	case i.DecGone:
		t.payload, t.st = i.Payload, stHandled
	case i.Decided:
		t.payload, t.st, t.outcome = i.Payload, stDecided, i.Outcome
	default:
		t.payload = i.Payload
		if i.DecWatched {
			t.decCmd, t.decArmed = i.Cmd, true
		}
		if i.Voted {
			t.st, t.yes, t.reason = stVoted, i.Yes, i.Reason
		} else {
			t.st = stPrepare
		}
	}
	m.advance(o, t)
}

func (m *machine) decisionRead(o *out, i decisionRead) {
	t := m.txs[i.Tx]
	if t == nil || t.decCmd != i.Cmd {
		return
	}
	switch {
	case i.Err != nil:
		t.decCmd = 0
		m.fail(o, i.Err)
		return
	case i.Exists, i.Gone:
		t.decCmd = 0
		if t.st != stVoted || t.cmd != 0 {
			return
		}
		t.st, t.outcome = stDecided, i.Outcome
		if i.Gone {
			t.st = stHandled // deleted after its retention
		}
	default:
		t.decArmed = true
	}
	m.advance(o, t)
}

func (m *machine) prepared(o *out, i prepared) {
	t := m.tx(o, i.Tx, i.Cmd, nil)
	if t == nil || i.Cancelled {
		return
	}
	t.yes, t.reason = i.Yes, i.Reason
	m.event(o, t, events.Event{Type: events.Prepared, Phase: events.PhaseBegin, State: statePrepared})
	t.st = stVote
	m.advance(o, t)
}

func (m *machine) voteWritten(o *out, i voteWritten) {
	t := m.tx(o, i.Tx, i.Cmd, i.Err)
	if t == nil {
		return
	}
	switch {
	case i.Gone:
		t.st = stLoad // the transaction is gone
	default:
		t.yes, t.reason = i.Yes, i.Reason
		ev := events.Event{Type: events.Voted, State: stateVoted}
		if !t.yes {
			ev.Err = fmt.Errorf("%w: %s", ErrAborted, t.reason)
		}
		m.event(o, t, ev)
		t.st = stVoted
		if i.Decided {
			t.st, t.outcome = stDecided, i.Outcome
		}
	}
	m.advance(o, t)
}

// abortReason is the reason of the abort our no vote decides.
func (m *machine) abortReason(reason string) string { return m.cfg.ID + ": " + reason }

func (m *machine) handled(o *out, i handled) {
	t := m.tx(o, i.Tx, i.Cmd, nil)
	if t == nil || i.Cancelled {
		return
	}
	if i.Err != nil {
		m.fail(o, nil) // called again at the resync
		return
	}
	o.Events = append(o.Events, m.outcomeEvent(t.id, t.outcome, events.PhaseEnded, events.PhaseFailed))
	t.st = stHandled
	m.advance(o, t)
}

func (m *machine) event(o *out, t *ptx, ev events.Event) {
	ev.Node = m.p.tx(t.id)
	o.Events = append(o.Events, ev)
}

// Diagram renders the participant machine's states and transitions as a
// Mermaid state diagram (the same as Mermaid of a new machine;
// docs/diagrams is generated from it).
func Diagram() string {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		return err.Error()
	}
	return f.Mermaid()
}
