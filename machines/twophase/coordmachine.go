package twophase

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// coordConfig is what a coordinator's machine needs.
type coordConfig struct {
	Root        string
	VoteTimeout time.Duration
	Retention   time.Duration
	SessionID   int64 // the connection's session when the machine starts
}

// The coordinator machine's states: START while no Propose is in
// progress, DETERMINE while one is, STOP once closed. Decided
// transactions wait for their deletion in any of them.
var coordStates = []events.State{events.StateStart, events.StateDetermine, events.StateStop}

var coordTransitions = []runtime.Transition{
	{Trigger: trWork, From: []events.State{events.StateStart}, To: events.StateDetermine},
	{Trigger: trIdle, From: []events.State{events.StateDetermine}, To: events.StateStart},
	{Trigger: trStopped, From: []events.State{events.StateStart, events.StateDetermine}, To: events.StateStop},
}

// ctState is where a transaction is, for its coordinator.
type ctState int

const (
	ctCreate    ctState = iota // its nodes are being created
	ctOpen                     // created: the votes are to be collected
	ctCollect                  // the votes are being collected
	ctCollected                // the decision to make is known
	ctDecide                   // the decision is being made
	ctRetain                   // decided: kept for the retention period
	ctDue                      // retention over: waiting for a place to expire
	ctExpire                   // being deleted (or, undecided, decided abort)
)

// ctTx is a transaction of the coordinator's: one it proposes, or a
// decided one it deletes in time.
type ctTx struct {
	id           string
	participants []string // nil: read from its node (one the sweep found)
	st           ctState
	req          uint64 // the call waiting on it (0: none)
	cmd          uint64 // its create, decision, expiry or timer in flight
	abandoned    bool   // its Propose gave up: decide abort
	undecided    bool   // due: decide abort before deleting it
	// collecting
	votes, dec, coord uint64 // the watches (or their requests)
	retry             uint64 // the timer after a read failed
	timeout           uint64 // the vote timeout
	ended             bool   // a watch ended with the session: our node first
	voted             map[string]bool
	want              Outcome
	read              bool // want is the decision, read while collecting
	b                 backoff
}

// coordMachine is a coordinator: its proposals from their create to their
// decision, and every decided transaction until it is deleted.
type coordMachine struct {
	base
	cfg      coordConfig
	txs      map[string]*ctTx
	due      []string // retention over, waiting for an expiry slot
	expiring int      // expiries in flight (at most janitorWidth)
	drops    map[uint64]string
}

// janitorWidth is how many due transactions are expired at once: one by
// one, a backlog after a long outage took longer to clear than it grew.
const janitorWidth = 8

func newCoordMachine(cfg coordConfig) (*coordMachine, error) {
	b, err := newBase(cfg.Root, cfg.SessionID, coordStates, coordTransitions)
	return &coordMachine{base: b, cfg: cfg, txs: make(map[string]*ctTx), drops: make(map[uint64]string)}, err
}

// Start publishes START and looks for decided transactions left under the
// root by a coordinator that closed or crashed before their retention was
// over.
func (m *coordMachine) Start() out {
	return out{Events: []events.Event{{Type: events.Start, State: events.StateStart}},
		Commands: []command{sweep{ref: ref{Cmd: m.cmd()}}}}
}

// Step handles one input.
func (m *coordMachine) Step(in input) out {
	var o out
	switch i := in.(type) {
	case proposeCall:
		switch {
		case m.closing != 0:
			m.reply(&o, i.Req, nil, ErrClosed)
		case m.txs[i.Tx] != nil:
			m.reply(&o, i.Req, nil, fmt.Errorf("%w: %q", ErrTxExists, i.Tx))
		default:
			t := &ctTx{id: i.Tx, participants: i.Participants, req: i.Req, cmd: m.cmd()}
			m.txs[t.id] = t
			o.Commands = append(o.Commands, create{ref: ref{t.cmd, t.id}, Data: i.Data, Nonce: i.Nonce, Participants: i.Participants})
		}
	case collectCall:
		if t := m.call(&o, i.Req, i.Tx, ctOpen); t != nil {
			m.collect(&o, t)
		}
	case decideCall:
		if t := m.call(&o, i.Req, i.Tx, ctCollected); t != nil {
			m.decide(&o, t, t.want)
		}
	case abandonCall:
		m.abandon(&o, i.Req, i.Tx)
	case runtime.Shutdown:
		m.closing = i.Req
		for _, id := range slices.Sorted(maps.Keys(m.txs)) {
			if t := m.txs[id]; t.st <= ctDecide {
				m.reply(&o, t.req, nil, ErrClosed)
				t.req = 0
				m.abandon(&o, 0, id)
			}
		}
	case runtime.Handover:
		var l runtime.Leftovers
		for _, id := range slices.Sorted(maps.Keys(m.txs)) {
			if m.txs[id].st <= ctDecide {
				l.Nodes = append(l.Nodes, m.p.coordinator(id))
			}
		}
		for _, id := range m.drops {
			l.Nodes = append(l.Nodes, m.p.coordinator(id))
		}
		if len(l.Nodes) > 0 {
			l.Session = m.session
		}
		m.reply(&o, i.Req, l, nil)
	case runtime.SessionChange:
		switch i.State {
		case zk.StateLost:
			m.session = 0
		case zk.StateConnected:
			m.session = i.SessionID
		}
	case done: // created
		t := m.at(i.Tx, i.Cmd, ctCreate)
		switch {
		case t == nil:
		case i.Err == nil && t.abandoned:
			m.decide(&o, t, Outcome{Reason: ReasonCancelled})
		case i.Err == nil:
			t.st = ctOpen
			m.reply(&o, t.req, nil, nil)
			t.req = 0
		default:
			m.reply(&o, t.req, nil, i.Err)
			if errors.Is(i.Err, ErrUnknownParticipant) || errors.Is(i.Err, ErrTxExists) || m.closing != 0 {
				delete(m.txs, t.id)
				break
			}
			// It may have been made (a reply lost): decided abort, in time.
			t.req, t.undecided = 0, true
			m.queue(t)
		}
	case listed:
		if t := m.watch(i.Tx, i.Cmd); t != nil {
			switch {
			case i.Err != nil:
				m.retry(&o, t)
			default:
				t.b = backoff{}
				for _, id := range i.Kids {
					if slices.Contains(t.participants, id) {
						t.voted[id] = true
					}
				}
				// The votes' names are all it takes: a no vote is made in
				// one multi with its abort decision, so when everyone has
				// voted and no decision was there, every vote is yes (and
				// the commit's create fails on an abort made since).
				if len(t.voted) == len(t.participants) {
					m.collected(&o, t, Outcome{Committed: true}, false)
				}
			}
		}
	case fired:
		if t := m.watch(i.Tx, i.Cmd); t != nil {
			m.rewatch(&o, t, i)
		}
	case decisionRead:
		if t := m.watch(i.Tx, i.Cmd); t != nil {
			switch {
			case i.Err != nil:
				m.retry(&o, t)
			case i.Exists:
				m.collected(&o, t, i.Outcome, true)
			case i.Gone: // deleted already: decide reads what is there
				m.collected(&o, t, Outcome{}, false)
			}
		}
	case coordWatched:
		if t := m.watch(i.Tx, i.Cmd); t != nil {
			switch {
			case i.Err != nil:
				m.retry(&o, t)
			case !i.Exists:
				m.collected(&o, t, Outcome{Reason: ReasonCoordinatorGone}, false)
			case t.ended:
				t.ended = false
				m.watchOthers(&o, t)
			}
		}
	case decided:
		m.decided(&o, i)
	case expired:
		t := m.at(i.Tx, i.Cmd, ctExpire)
		if t == nil {
			break
		}
		m.expiring--
		switch {
		case i.Err != nil:
			m.wait(&o, t, time.Second)
		case i.Waiting: // a participant has not had its call yet
			m.wait(&o, t, m.cfg.Retention)
		default:
			delete(m.txs, t.id)
		}
	case coordDropped:
		delete(m.drops, i.Cmd)
	case swept:
		for _, d := range i.Due {
			if m.txs[d.Tx] == nil {
				t := &ctTx{id: d.Tx}
				m.txs[t.id] = t
				m.wait(&o, t, d.Delay)
			}
		}
	case woke:
		t := m.txs[i.Tx]
		switch {
		case t == nil:
		case t.st == ctCollect && i.Cmd == t.timeout:
			m.collected(&o, t, Outcome{Reason: ReasonVoteTimeout}, false)
		case t.st == ctCollect && i.Cmd == t.retry:
			t.retry = 0
			m.watchAll(&o, t)
		case t.st == ctRetain && i.Cmd == t.cmd:
			t.cmd = 0
			m.queue(t)
		}
	}
	m.pump(&o)
	m.settle(&o)
	return o
}

// call finds the transaction of a call that moves it on from st.
func (m *coordMachine) call(o *out, req uint64, tx string, st ctState) *ctTx {
	t := m.txs[tx]
	if m.closing != 0 || t == nil || t.st != st || t.abandoned {
		m.reply(o, req, nil, ErrClosed) // closing: its Propose is answered ErrClosed
		return nil
	}
	t.req = req
	return t
}

// abandon: the Propose of tx gave up (req, if not 0, waits for the
// outcome) or the coordinator is closing. An open transaction is decided
// abort, at once or once it is created.
func (m *coordMachine) abandon(o *out, req uint64, tx string) {
	t := m.txs[tx]
	if t == nil || t.undecided {
		m.reply(o, req, nil, fmt.Errorf("twophase: transaction %q: no decision", tx))
		return
	}
	if t.st >= ctRetain {
		m.reply(o, req, t.want, nil)
		return
	}
	t.req, t.abandoned = req, true
	if t.st != ctCreate && t.st != ctDecide {
		m.decide(o, t, Outcome{Reason: ReasonCancelled})
	}
}

// collect watches the votes, the decision and our node, and starts the
// vote timeout.
func (m *coordMachine) collect(o *out, t *ctTx) {
	t.st, t.voted = ctCollect, make(map[string]bool, len(t.participants))
	t.timeout = m.cmd()
	o.Commands = append(o.Commands, sleep{ref: ref{t.timeout, t.id}, Delay: m.cfg.VoteTimeout})
	m.watchAll(o, t)
}

// watchAll reads our node, the decision and the votes, leaving a watch on
// each; after the session ended (t.ended), our node alone first: gone
// with the session, the outcome is known, and no watch is set on the new
// session before go-zookeeper has re-sent its own (a reply to one then
// would race with its read of the last zxid: see adapters/zk, "A data
// race").
func (m *coordMachine) watchAll(o *out, t *ctTx) {
	t.coord = m.cmd()
	o.Commands = append(o.Commands, watchCoord{ref: ref{t.coord, t.id}})
	if !t.ended {
		m.watchOthers(o, t)
	}
}

func (m *coordMachine) watchOthers(o *out, t *ctTx) {
	t.dec, t.votes = m.cmd(), m.cmd()
	o.Commands = append(o.Commands, readDecision{ref: ref{t.dec, t.id}}, watchVotes{ref: ref{t.votes, t.id}})
}

// watch finds the collecting transaction whose watch cmd answers.
func (m *coordMachine) watch(tx string, cmd uint64) *ctTx {
	t := m.txs[tx]
	if t == nil || t.st != ctCollect || cmd == 0 || cmd != t.votes && cmd != t.dec && cmd != t.coord {
		return nil
	}
	return t
}

// rewatch sets the watch that fired again; one that ended without a
// change ended with the session: our node is looked at alone first.
func (m *coordMachine) rewatch(o *out, t *ctTx, i fired) {
	if i.Type == zk.EventNotWatching {
		t.votes, t.dec, t.ended = 0, 0, true
		m.watchAll(o, t)
		return
	}
	c := m.cmd()
	switch i.Cmd {
	case t.votes:
		t.votes = c
		o.Commands = append(o.Commands, watchVotes{ref: ref{c, t.id}})
	case t.dec:
		t.dec = c
		o.Commands = append(o.Commands, readDecision{ref: ref{c, t.id}, Made: i.Type == zk.EventNodeCreated})
	case t.coord:
		t.coord = c
		o.Commands = append(o.Commands, watchCoord{ref: ref{c, t.id}})
	}
}

// retry reads again after a failure, after a backoff.
func (m *coordMachine) retry(o *out, t *ctTx) {
	t.votes, t.dec, t.coord = 0, 0, 0
	if t.retry == 0 {
		t.retry = m.cmd()
		o.Commands = append(o.Commands, sleep{ref: ref{t.retry, t.id}, Delay: t.b.next()})
	}
}

// collected: the decision to make is known; the Propose makes it.
func (m *coordMachine) collected(o *out, t *ctTx, want Outcome, read bool) {
	t.st, t.want, t.read = ctCollected, want, read
	t.votes, t.dec, t.coord, t.retry, t.timeout, t.voted = 0, 0, 0, 0, 0, nil
	m.reply(o, t.req, want, nil)
	t.req = 0
}

// decide makes the decision want, or reads the one made first.
func (m *coordMachine) decide(o *out, t *ctTx, want Outcome) {
	if t.read {
		m.finish(o, t, t.want) // read while collecting: made already
		return
	}
	t.st, t.cmd = ctDecide, m.cmd()
	o.Commands = append(o.Commands, makeDecision{ref: ref{t.cmd, t.id}, Want: want})
}

func (m *coordMachine) decided(o *out, i decided) {
	t := m.txs[i.Tx]
	if t == nil || t.cmd != i.Cmd || (t.st != ctDecide && t.st != ctExpire) {
		return
	}
	t.cmd = 0
	if t.st == ctExpire { // an undecided one's abort
		m.expiring--
		switch {
		case i.Gone: // never made, or deleted already
			delete(m.txs, t.id)
		case i.Err != nil:
			m.wait(o, t, time.Second)
		default:
			t.undecided = false
			m.wait(o, t, m.cfg.Retention)
		}
		return
	}
	switch {
	case i.Gone:
		m.reply(o, t.req, nil, fmt.Errorf("twophase: transaction %q: %w", t.id, zk.ErrNoNode))
		delete(m.txs, t.id)
	case i.Err != nil:
		m.reply(o, t.req, nil, i.Err)
		t.req = 0
		if m.closing != 0 {
			delete(m.txs, t.id) // its node goes with our session, which aborts it
			break
		}
		t.undecided = true
		m.wait(o, t, time.Second)
	default:
		m.finish(o, t, i.Outcome)
	}
}

// finish ends a decided transaction: the Propose gets the outcome, which
// is published, our node goes (the decision is made: it tells no one
// anything more), and the retention starts.
func (m *coordMachine) finish(o *out, t *ctTx, res Outcome) {
	m.reply(o, t.req, res, nil)
	t.req, t.want = 0, res
	o.Events = append(o.Events, m.outcomeEvent(t.id, res, events.PhaseNone, events.PhaseNone))
	drop := m.cmd()
	m.drops[drop] = t.id
	o.Commands = append(o.Commands, dropCoord{ref: ref{drop, t.id}, Outcome: res})
	m.wait(o, t, m.cfg.Retention)
}

// wait keeps t for d, then expires it.
func (m *coordMachine) wait(o *out, t *ctTx, d time.Duration) {
	t.st, t.cmd = ctRetain, m.cmd()
	o.Commands = append(o.Commands, sleep{ref: ref{t.cmd, t.id}, Delay: max(d, 0)})
}

func (m *coordMachine) queue(t *ctTx) {
	t.st = ctDue
	m.due = append(m.due, t.id)
}

// pump expires the due transactions, a few at a time.
func (m *coordMachine) pump(o *out) {
	for m.closing == 0 && m.expiring < janitorWidth && len(m.due) > 0 {
		t := m.txs[m.due[0]]
		m.due = m.due[1:]
		if t == nil || t.st != ctDue {
			continue
		}
		t.st, t.cmd = ctExpire, m.cmd()
		m.expiring++
		if t.undecided {
			o.Commands = append(o.Commands, makeDecision{ref: ref{t.cmd, t.id}, Want: Outcome{Reason: ReasonCancelled}})
		} else {
			o.Commands = append(o.Commands, expire{ref: ref{t.cmd, t.id}, Participants: t.participants})
		}
	}
}

// settle moves the state machine, and ends it once closing has nothing
// left in flight: no create or decision of a Propose, no node to drop.
func (m *coordMachine) settle(o *out) {
	busy := false
	for _, t := range m.txs {
		busy = busy || t.st <= ctDecide
	}
	switch st := m.State(); {
	case st == events.StateStop:
	case m.closing != 0 && !busy && len(m.drops) == 0:
		m.fsm.Fire(trStopped)
		m.reply(o, m.closing, nil, nil)
		o.Done = true
	case busy && st == events.StateStart:
		m.fsm.Fire(trWork)
	case !busy && st == events.StateDetermine:
		m.fsm.Fire(trIdle)
	}
}

// at finds the transaction whose command cmd answers, in state st.
func (m *coordMachine) at(tx string, cmd uint64, st ctState) *ctTx {
	t := m.txs[tx]
	if t == nil || t.cmd != cmd || t.st != st {
		return nil
	}
	return t
}
