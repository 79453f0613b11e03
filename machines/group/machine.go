package group

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// A member is START until Join asks, OFFER while its node is being made
// (again, after its session ended or the node was deleted), READY while
// its node is there, FAILED once its id is another session's, STOP once
// it left.
const (
	trJoin    runtime.Trigger = "join"
	trJoined  runtime.Trigger = "joined"
	trGone    runtime.Trigger = "gone"
	trFailed  runtime.Trigger = "failed"
	trStopped runtime.Trigger = "stopped"
)

var (
	states = []events.State{events.StateStart, events.StateOffer, events.StateReady, events.StateFailed,
		events.StateStop}
	transitions = []runtime.Transition{
		{Trigger: trJoin, From: []events.State{events.StateStart}, To: events.StateOffer},
		{Trigger: trJoined, From: []events.State{events.StateOffer}, To: events.StateReady},
		{Trigger: trGone, From: []events.State{events.StateReady}, To: events.StateOffer},
		{Trigger: trFailed, From: []events.State{events.StateOffer, events.StateReady}, To: events.StateFailed},
		{Trigger: trStopped, From: []events.State{events.StateStart, events.StateOffer, events.StateReady,
			events.StateFailed}, To: events.StateStop},
	}
)

// config is what a member's machine is made with.
type config struct {
	Path      string // the group
	ID        string // our member id: our node is Path/ID
	Data      []byte
	SessionID int64 // the connection's session when the machine starts (0: none)
}

// waiter is a SetData call waiting for its data (gen) to be on our node.
type waiter struct {
	req uint64
	gen uint64
}

// machine is one member of a group: a pure machine run by a
// runtime.Shell. It keeps one ephemeral node, <path>/<id>, with the
// latest data asked for, for as long as it is not closed: it makes the
// node, and makes it again when its session ends or someone deletes it
// (a watch on it says so), with the data of the latest SetData.
//
// A create that finds the node there reads its owner: our session's (a
// create whose reply was lost) is ours and adopted; a session of ours
// that ended is replaced (deleted at the version read, and made again);
// any other session's is ErrMemberExists, and the member FAILED: it never
// takes another process's id.
type machine struct {
	cfg     config
	node    string
	fsm     *runtime.FSM
	session int64          // the connection's current session (0: none)
	ours    map[int64]bool // every session this member had: their nodes are ours
	down    bool           // the connection is down: no request is made
	present bool           // our node exists, made on session
	version int32          // our node's data version, while present

	data  []byte // the latest data asked for
	gen   uint64 // its number
	shown uint64 // the number of the data on our node, while present

	cmds                          uint64
	createCmd, setCmd, delCmd     uint64 // in flight (0: none)
	createGen, setGen             uint64 // the data they write
	createData, setData           []byte // the data createCmd, setCmd write
	stale                         bool   // delCmd deletes a node of a session of ours that ended
	watchCmd, watching            uint64 // the watch in flight, the one followed
	term                          uint64 // our node's incarnations so far
	joinReq                       uint64 // the Join waiting for our node (0: none)
	waiters                       []waiter
	leaveReqs                     []uint64 // Leave and Close calls waiting for our node to go
	joined, leaving, failed, done bool
	cause                         error // why the member FAILED
}

type out = runtime.Output[command]

func newMachine(cfg config) (*machine, error) {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		return nil, err
	}
	m := &machine{cfg: cfg, node: zk.Join(cfg.Path, cfg.ID), fsm: f,
		session: cfg.SessionID, down: cfg.SessionID == 0, ours: map[int64]bool{}, data: cfg.Data, gen: 1}
	if cfg.SessionID != 0 {
		m.ours[cfg.SessionID] = true
	}
	return m, nil
}

func (m *machine) State() events.State { return m.fsm.Current() }

// Bug is the first illegal transition the machine fired (nil: none).
func (m *machine) Bug() error { return m.fsm.Bug() }

// Start publishes START; nothing is sent before Join asks.
func (m *machine) Start() out {
	return out{Events: []events.Event{{Type: events.Start, State: m.State()}}}
}

func (m *machine) Step(in input) out {
	var o out
	if m.done {
		return o
	}
	switch i := in.(type) {
	case joinCall:
		m.joinReq, m.joined = i.Req, true
		m.term++
		m.fsm.Fire(trJoin)
		m.event(&o, events.Event{Type: events.OfferStart, Phase: events.PhaseBegin, Node: m.node})
	case setCall:
		if m.failed {
			o.Replies = append(o.Replies, runtime.Reply{Req: i.Req, Err: m.cause})
			return o
		}
		m.data = i.Data
		m.gen++
		m.waiters = append(m.waiters, waiter{req: i.Req, gen: m.gen})
	case leaveCall:
		m.leave(&o, i.Req)
	case runtime.Shutdown: // Close: our node is deleted, as by a Leave
		m.leave(&o, i.Req)
	case runtime.Cancel:
		if m.joinReq == i.Req {
			m.joinReq = 0
		}
		m.waiters = slices.DeleteFunc(m.waiters, func(w waiter) bool { return w.req == i.Req })
	case runtime.Handover:
		var l runtime.Leftovers
		if m.present || m.createCmd != 0 || m.delCmd != 0 {
			l = runtime.Leftovers{Session: m.session, Nodes: []string{m.node}}
		}
		o.Replies = append(o.Replies, runtime.Reply{Req: i.Req, Value: l})
		m.finish(&o)
		return o
	case runtime.SessionChange:
		m.sessionChange(&o, i)
	case created:
		m.created(&o, i)
	case written:
		m.written(&o, i)
	case deleted:
		m.deleted(&o, i)
	case watched:
		m.watched(&o, i)
	case fired:
		if i.Cmd == m.watching {
			m.watching = 0
			if i.Type == zk.EventNodeDeleted && m.present {
				m.gone(&o, nil)
			}
		}
	}
	if !m.done {
		m.pump(&o)
	}
	return o
}

// leave deletes our node; req is answered once it is gone.
func (m *machine) leave(o *out, req uint64) {
	m.leaveReqs = append(m.leaveReqs, req)
	if !m.leaving {
		m.leaving = true
		m.event(o, events.Event{Type: events.StopStart, Node: m.node})
	}
}

func (m *machine) sessionChange(o *out, i runtime.SessionChange) {
	switch i.State {
	case zk.StateSuspended:
		m.down = true
		m.event(o, events.Event{Type: events.Suspended})
	case zk.StateReconnected:
		m.down = false
		m.event(o, events.Event{Type: events.Reconnected})
	case zk.StateLost:
		// Our node went with the session, and every request and watch.
		m.down = true
		m.createCmd, m.setCmd, m.delCmd, m.watchCmd, m.watching = 0, 0, 0, 0, 0
		m.event(o, events.Event{Type: events.Lost, Err: ErrSessionLost})
		if m.present {
			m.gone(o, ErrSessionLost)
		}
	case zk.StateConnected:
		m.down, m.session = false, i.SessionID
		m.ours[i.SessionID] = true
	case zk.StateClosed:
		m.finish(o)
	}
}

// gone: our node is no longer there (cause: why, nil when it was deleted).
// It is made again, with the latest data, unless we are leaving.
func (m *machine) gone(o *out, cause error) {
	m.present, m.shown, m.watching = false, 0, 0
	m.event(o, events.Event{Type: events.MemberLeft, Node: m.node, Err: cause})
	if !m.leaving && !m.failed {
		m.term++
		m.fsm.Fire(trGone)
		m.event(o, events.Event{Type: events.OfferStart, Phase: events.PhaseBegin, Node: m.node})
	}
}

func (m *machine) created(o *out, i created) {
	if i.Cmd != m.createCmd {
		return
	}
	m.createCmd = 0
	switch {
	case i.Err == nil:
		m.made(o, m.createGen, 0, m.createData)
	case errors.Is(i.Err, zk.ErrNodeExists) && i.Owner == m.session:
		// Ours: a create of this session whose reply was lost.
		gen := m.createGen
		if !bytes.Equal(i.Data, m.data) {
			gen = 0 // not the latest data: set it
		}
		m.made(o, gen, i.Version, i.Data)
	case errors.Is(i.Err, zk.ErrNodeExists) && m.ours[i.Owner]:
		m.cmds++
		m.delCmd, m.stale = m.cmds, true
		o.Commands = append(o.Commands, remove{Cmd: m.cmds, Path: m.node, Version: i.Version})
	case errors.Is(i.Err, zk.ErrNodeExists):
		m.fail(o, fmt.Errorf("%w: %s is session %#x's", ErrMemberExists, m.node, i.Owner))
	case retryable(i.Err):
	default:
		m.fail(o, i.Err)
	}
}

// made: our node is there, with data (numbered gen; 0: not the latest),
// at version. When we are leaving it is deleted next.
func (m *machine) made(o *out, gen uint64, version int32, data []byte) {
	m.present, m.shown, m.version = true, gen, version
	m.fsm.Fire(trJoined)
	m.event(o, events.Event{Type: events.MemberJoined, Phase: events.PhaseGranted, Node: m.node,
		Data: data, Version: version})
	if m.joinReq != 0 {
		o.Replies = append(o.Replies, runtime.Reply{Req: m.joinReq})
		m.joinReq = 0
	}
	m.answer(o)
}

// answer replies to the SetData calls whose data is on our node.
func (m *machine) answer(o *out) {
	m.waiters = slices.DeleteFunc(m.waiters, func(w waiter) bool {
		if w.gen > m.shown {
			return false
		}
		o.Replies = append(o.Replies, runtime.Reply{Req: w.req})
		return true
	})
}

func (m *machine) written(o *out, i written) {
	if i.Cmd != m.setCmd {
		return
	}
	m.setCmd = 0
	switch {
	case i.Err == nil:
		m.shown, m.version = m.setGen, i.Version
		m.event(o, events.Event{Type: events.MemberUpdated, Node: m.node, Data: m.setData, Version: i.Version})
		m.answer(o)
	case errors.Is(i.Err, zk.ErrNoNode):
		if m.present {
			m.gone(o, nil) // deleted by someone: made again
		}
	case retryable(i.Err):
	default:
		for _, w := range m.waiters {
			o.Replies = append(o.Replies, runtime.Reply{Req: w.req, Err: i.Err})
		}
		m.waiters = nil
		m.shown = m.gen // not asked again
	}
}

func (m *machine) deleted(o *out, i deleted) {
	if i.Cmd != m.delCmd {
		return
	}
	m.delCmd = 0
	// Gone: deleted, or with the session (expired, or the connection
	// closed).
	ok := i.Err == nil || errors.Is(i.Err, zk.ErrNoNode) || errors.Is(i.Err, zk.ErrSessionExpired) ||
		errors.Is(i.Err, zk.ErrClosed)
	switch {
	case m.stale:
		// Gone, or changed since read (BadVersion): the next create looks
		// again.
		m.stale = false
		if !ok && !retryable(i.Err) && !errors.Is(i.Err, zk.ErrBadVersion) {
			m.fail(o, i.Err)
		}
	case ok:
		if m.present {
			m.present = false
			m.event(o, events.Event{Type: events.MemberLeft, Node: m.node})
		}
	case retryable(i.Err):
	default:
		// Refused (an ACL that does not let us delete it: zk.ErrNoAuth):
		// the node stays, until the session ends. The Leave and Close
		// calls get the error, the member is FAILED with it; another
		// Leave or Close tries again.
		err := fmt.Errorf("group: delete %s: %w", m.node, i.Err)
		for _, r := range m.leaveReqs {
			o.Replies = append(o.Replies, runtime.Reply{Req: r, Err: err})
		}
		m.leaveReqs, m.leaving = nil, false
		m.fail(o, err)
	}
}

func (m *machine) watched(o *out, i watched) {
	if i.Cmd != m.watchCmd {
		return
	}
	m.watchCmd = 0
	switch {
	case i.Err == nil && i.Exists && i.Owner == m.session:
		m.watching = i.Cmd
	case i.Err == nil:
		// Gone, or another session's: ours went (and theirs is not
		// taken: making ours again finds it).
		if m.present {
			m.gone(o, nil)
		}
	case retryable(i.Err):
	default:
		m.watching = 0 // not watched: ends with the session's errors (LOST, CLOSED follow)
	}
}

// pump makes the requests that bring the server to what the member wants:
// our node, with the latest data and a watch, while joined; no node once
// leaving (then the member ends).
func (m *machine) pump(o *out) {
	busy := m.createCmd != 0 || m.setCmd != 0 || m.delCmd != 0
	if m.leaving {
		switch {
		case busy:
		case !m.present:
			m.finish(o)
		case !m.down:
			m.cmds++
			m.delCmd = m.cmds
			o.Commands = append(o.Commands, remove{Cmd: m.cmds, Path: m.node, Version: zk.AnyVersion})
		}
		return
	}
	if m.down || !m.joined || m.failed {
		return
	}
	switch {
	case !m.present && !busy:
		m.cmds++
		m.createCmd, m.createGen, m.createData = m.cmds, m.gen, m.data
		o.Commands = append(o.Commands, create{Cmd: m.cmds, Path: m.node, Data: m.data})
	case m.present && m.setCmd == 0 && m.shown < m.gen:
		m.cmds++
		m.setCmd, m.setGen, m.setData = m.cmds, m.gen, m.data
		o.Commands = append(o.Commands, setData{Cmd: m.cmds, Path: m.node, Data: m.data})
	}
	if m.present && m.watchCmd == 0 && m.watching == 0 {
		m.cmds++
		m.watchCmd = m.cmds
		o.Commands = append(o.Commands, watchNode{Cmd: m.cmds, Path: m.node})
	}
}

// fail ends the member's term: its id is not ours (ErrMemberExists), or a
// request failed for good. Join and SetData get cause.
func (m *machine) fail(o *out, cause error) {
	m.failed, m.cause = true, cause
	if !m.leaving && m.State() != events.StateFailed {
		m.fsm.Fire(trFailed)
	}
	m.event(o, events.Event{Type: events.Failed, Phase: events.PhaseFailed, Node: m.node, Err: cause})
	if m.joinReq != 0 {
		o.Replies = append(o.Replies, runtime.Reply{Req: m.joinReq, Err: cause})
		m.joinReq = 0
	}
	for _, w := range m.waiters {
		o.Replies = append(o.Replies, runtime.Reply{Req: w.req, Err: cause})
	}
	m.waiters = nil
}

// finish answers the waiting calls and ends the machine.
func (m *machine) finish(o *out) {
	if m.joinReq != 0 {
		o.Replies = append(o.Replies, runtime.Reply{Req: m.joinReq, Err: ErrClosed})
	}
	for _, w := range m.waiters {
		o.Replies = append(o.Replies, runtime.Reply{Req: w.req, Err: ErrClosed})
	}
	for _, r := range m.leaveReqs {
		o.Replies = append(o.Replies, runtime.Reply{Req: r})
	}
	m.joinReq, m.waiters, m.leaveReqs, m.done = 0, nil, nil, true
	if !m.leaving {
		m.event(o, events.Event{Type: events.StopStart, Node: m.node})
	}
	m.fsm.Fire(trStopped)
	m.event(o, events.Event{Type: events.StopComplete, Phase: events.PhaseEnded, Node: m.node})
	o.Done = true
}

func (m *machine) event(o *out, e events.Event) {
	e.State, e.Term = m.State(), m.term
	o.Events = append(o.Events, e)
}

func retryable(err error) bool { return errors.Is(err, zk.ErrConnectionLoss) }

// Diagram is a member's machine as a Mermaid state diagram.
func Diagram() string {
	m, err := newMachine(config{Path: "/g", ID: "m"})
	if err != nil {
		return err.Error()
	}
	return m.fsm.Mermaid()
}
