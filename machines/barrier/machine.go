package barrier

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ReadyName is the node the member completing the count creates: its
// creation lets everyone waiting in Enter through (Curator's name).
const ReadyName = "ready"

// config is what a machine needs.
type config struct {
	Path      string // the barrier's path
	Members   int    // how many members enter and leave together
	Name      string // our member nodes' name: a UUID, and -<round> after it
	SessionID int64  // the connection's session when the machine starts
}

// The machine's states: START outside the barrier, OFFER while our member
// node is being created, DETERMINE while we wait for the others (to enter,
// or to leave), READY inside the barrier, FAILED after the session ended
// while we were a member (we are counted out), STOP once shut down.
var states = []events.State{events.StateStart, events.StateOffer, events.StateDetermine,
	events.StateReady, events.StateFailed, events.StateStop}

const (
	trEnter   runtime.Trigger = "enter"
	trJoined  runtime.Trigger = "joined"
	trEntered runtime.Trigger = "entered"
	trLeave   runtime.Trigger = "leave"
	trOut     runtime.Trigger = "out"
	trLost    runtime.Trigger = "lost"
	trStopped runtime.Trigger = "stopped"
)

var transitions = []runtime.Transition{
	{Trigger: trEnter, From: []events.State{events.StateStart, events.StateDetermine, events.StateFailed}, To: events.StateOffer},
	{Trigger: trJoined, From: []events.State{events.StateOffer}, To: events.StateDetermine},
	{Trigger: trEntered, From: []events.State{events.StateDetermine}, To: events.StateReady},
	{Trigger: trLeave, From: []events.State{events.StateReady}, To: events.StateDetermine},
	{Trigger: trOut, From: []events.State{events.StateOffer, events.StateDetermine, events.StateReady, events.StateFailed}, To: events.StateStart},
	{Trigger: trLost, From: []events.State{events.StateOffer, events.StateDetermine, events.StateReady}, To: events.StateFailed},
	{Trigger: trStopped, From: states[:len(states)-1], To: events.StateStop}, // all but STOP
}

// phase is where we are in a round.
type phase int

const (
	outside  phase = iota
	entering       // probing, joining, or waiting for ready
	inside
	leaving
)

// machine is a double barrier member: a pure machine, run by a
// runtime.Shell.
type machine struct {
	base
	cfg config

	phase   phase
	req     uint64          // the Enter or Leave call being served (0: none)
	step    uint64          // the command whose reply moves the round on
	watch   uint64          // the command whose watch we wait on
	stale   int64           // creation zxid of a ready that predates our member node
	member  bool            // our member node exists (or its create is in flight)
	deleted bool            // our member node's delete is sent
	joining bool            // our member node's create is in flight
	joinCmd uint64          // its command
	opened  bool            // entering: this round's ready seen while our create was in flight
	waitOn  uint64          // entering: the watch on a member of the round in progress
	lost    bool            // the session ended while we were a member
	name    string          // our member node's name this round
	rounds  int             // member node names given so far (see newName)
	round   map[string]bool // leaving: the members listed when we began
	relist  bool            // leaving: list again once our delete is done
	synced  bool            // leaving: the first listing was made again after a sync

	session  int64
	owed     int    // deletes of ours in flight at shutdown
	closing  uint64 // the shutdown call, once it came
	connGone bool
}

// newMachine returns a machine for cfg.
func newMachine(cfg config) *machine {
	return &machine{base: newBase(states, transitions), cfg: cfg, session: cfg.SessionID}
}

// base is what both machines have: their FSM, and their commands'
// numbering.
type base struct {
	fsm     *runtime.FSM
	nextCmd uint64
}

// newBase starts an FSM in START; it panics when the declarations of its
// states and transitions are wrong.
func newBase(states []events.State, transitions []runtime.Transition) base {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		panic(err)
	}
	return base{fsm: f}
}

// State is the machine's state.
func (m *base) State() events.State { return m.fsm.Current() }

// Bug is the first illegal transition the machine fired (nil: none): its
// Shell reports it as a FAILED event.
func (m *base) Bug() error { return m.fsm.Bug() }

// send asks for c's request, as a new command, and returns its id.
func (m *base) send(o *out, c command) uint64 {
	m.nextCmd++
	c.Cmd = m.nextCmd
	o.Commands = append(o.Commands, c)
	return c.Cmd
}

// reply answers call req (none when 0).
func reply(o *out, req uint64, v any, err error) {
	if req != 0 {
		o.Replies = append(o.Replies, runtime.Reply{Req: req, Value: v, Err: err})
	}
}

type out = runtime.Output[command]

// Start begins: nothing is sent until Enter.
func (m *machine) Start() out {
	var o out
	m.event(&o, events.Start, nil)
	return o
}

// Step handles one input.
func (m *machine) Step(in input) out {
	var o out
	switch i := in.(type) {
	case call:
		switch i.Op {
		case opEnter:
			m.enter(&o, i.Req)
		case opLeave:
			m.leave(&o, i.Req)
		}
	case runtime.Cancel:
		if i.Req == m.req && m.req != 0 {
			m.req = 0
			m.getOut(&o)
		}
	case runtime.Shutdown:
		m.shutdown(&o, i.Req)
	case runtime.Handover:
		m.finish(&o)
		var l runtime.Leftovers
		if m.member && !m.deleted && !m.connGone {
			l = runtime.Leftovers{Session: m.session, Nodes: []string{zk.Join(m.cfg.Path, m.name)}}
		}
		reply(&o, i.Req, l, nil)
	case enterRefused:
		if m.phase == inside && m.req == 0 {
			m.getOut(&o)
		}
	case runtime.SessionChange:
		m.sessionChange(&o, i)
	case probed:
		m.probed(&o, i)
	case joined:
		m.joined(&o, i)
	case readyOpened:
		if i.Cmd != m.step {
			break
		}
		switch {
		case i.Err != nil:
			m.fail(&o, i.Err)
		case i.Gone, i.Stale != 0:
			// The ready there went (a member replacing a stale one makes
			// the next, or the round it let through is over and the last
			// of the next round's arrivals will), or it is stale (the
			// member completing the count replaces it): watch for the next.
			if i.Stale != 0 {
				m.stale = i.Stale
			}
			m.watch = m.send(&o, command{Op: opWatchReady})
		case len(i.InProgress) > 0:
			m.withdraw(&o, i.InProgress)
		default:
			m.entered(&o)
		}
	case readyWatched:
		if i.Cmd != m.watch || m.phase != entering {
			break
		}
		switch {
		case i.Err != nil:
			m.fail(&o, i.Err)
		case i.Exists && i.Czxid != m.stale:
			m.readySeen(&o, false)
		}
	case readyEvent:
		if i.Cmd != m.watch || m.phase != entering {
			break
		}
		if i.Type == zk.EventNodeCreated {
			m.readySeen(&o, true)
			break
		}
		if m.waitOn != 0 {
			m.probe(&o) // the round in progress is over
			break
		}
		// The stale ready was deleted, or the watch ended: watch again.
		m.watch = m.send(&o, command{Op: opWatchReady})
	case leaveListed:
		m.leaveListed(&o, i)
	case memberDeleted:
		m.memberDeleted(&o, i)
	case nodeWatched:
		m.memberWatched(&o, i.Cmd, i.Exists, i.Err)
	case nodeGone:
		m.memberWatched(&o, i.Cmd, false, nil)
	case readyDeleted:
		if i.Cmd != m.step || m.phase != leaving {
			break
		}
		m.phase, m.member, m.deleted = outside, false, false
		m.fsm.Fire(trOut)
		m.event(&o, events.Left, nil)
		m.answer(&o, nil, nil)
	}
	m.finishShutdown(&o)
	return o
}

func (m *machine) enter(o *out, req uint64) {
	switch {
	case m.closing != 0:
		reply(o, req, nil, ErrClosed)
	case m.phase != outside:
		reply(o, req, nil, ErrAlreadyEntered)
	default:
		m.phase, m.req, m.stale, m.lost, m.opened = entering, req, 0, false, false
		m.newName()
		m.fsm.Fire(trEnter)
		m.probe(o)
	}
}

func (m *machine) probe(o *out) {
	m.step, m.waitOn = m.send(o, command{Op: opProbe}), 0
	m.watch = m.step // probe leaves the watch on ready
}

func (m *machine) probed(o *out, i probed) {
	if i.Cmd != m.step || m.phase != entering {
		return
	}
	if i.Err != nil {
		m.fail(o, i.Err)
		return
	}
	if n, err := strconv.Atoi(string(i.PathData)); err == nil && n != m.cfg.Members {
		m.fail(o, fmt.Errorf("%w: the path records %d members, we %d", ErrMembersMismatch, n, m.cfg.Members))
		return
	}
	if len(i.Inside) > 0 {
		// A round is in progress: its ready is there, and members who
		// entered before it (or with it) are still in. (A member counted
		// out of it, its session gone, comes back this way.) We are for
		// the next round: counted with them, we would be let in, and they would
		// leave without waiting for us, whose node came after they
		// listed the round. So no node of ours yet: we wait for one of
		// them to go (or for ready to), then look again.
		m.waitOn = m.send(o, command{Op: opWatchMember, Name: slices.Min(i.Inside)})
		return
	}
	if i.ReadyExists {
		m.stale = i.ReadyCzxid // it predates our member node: not ours
	}
	// Our arrival completes the count: our node and ready in one multi.
	withReady := !i.ReadyExists && len(members(i.Children, "")) >= m.cfg.Members-1
	m.member, m.deleted, m.joining = true, false, true
	m.step = m.send(o, command{Op: opJoin, Name: m.name, WithReady: withReady})
	m.joinCmd = m.step
}

func (m *machine) joined(o *out, i joined) {
	if !m.joining || i.Cmd != m.joinCmd {
		if i.Err == nil {
			// The create of a join we gave up (its session ended): the
			// client may have sent it on the session that followed, where
			// the node would count us in. It goes.
			m.owed++
			m.send(o, command{Op: opDeleteMember, Name: i.Name})
		}
		return
	}
	m.joining = false
	if i.Err != nil {
		m.member = false
		if m.phase == entering && i.Cmd == m.step {
			m.fail(o, i.Err)
		}
		return
	}
	if m.phase != entering || i.Cmd != m.step {
		// The call was withdrawn while our node was being created: it
		// is ours to delete.
		m.deleteOurs(o)
		return
	}
	m.fsm.Fire(trJoined)
	switch {
	case i.ReadyCreated:
		m.entered(o)
	case len(members(i.Children, "")) >= m.cfg.Members:
		// Everyone is in, as our own listing shows: open the way, or
		// learn whose the ready there is.
		m.openReady(o, opOpenReady)
	case m.opened:
		// A ready came before our create's reply, so before our node,
		// unless our own multi made it (its reply lost): whose is it?
		m.openReady(o, opCheckReady)
	}
	// Else we wait for the watch probe left on ready.
}

// openReady makes ready (opOpenReady; opCheckReady only reads whose the
// one there is): ours when made with or after our node; else a stale one
// (replaced, or with a check reported), or a round in progress without
// us (readyOpened.InProgress).
func (m *machine) openReady(o *out, op op) {
	m.step = m.send(o, command{Op: op, Name: m.name, Stale: m.stale})
}

// readySeen: a ready came (created: its creation event; else found there,
// made after the stale one went). Before our create's reply, it was made
// before our node (the server sends events and replies in the order it
// applies the changes), unless by our own multi: joined decides. After
// it, a creation is this round's, and we are through; a ready found is
// ours if made with or after our node, which openReady's check tells.
func (m *machine) readySeen(o *out, created bool) {
	switch {
	case m.joining:
		m.opened = true
	case created:
		m.entered(o)
	default:
		m.openReady(o, opCheckReady)
	}
}

// withdraw: the ready in our way was made before our node, and members
// made before it are still in: a round is in progress without us (our
// look missed it: read from a server behind the leader, or made just
// before it; or more members than the count). No one counted us, and the
// round's members must not wait for our node: it goes, and we wait for
// one of them to go, then look again, under a new name (the delete of
// this one is in flight).
func (m *machine) withdraw(o *out, inside []string) {
	m.deleteOurs(o)
	m.member, m.opened, m.stale = false, false, 0
	m.step, m.watch = 0, 0 // replies to our reads of ready no longer matter
	m.newName()
	m.fsm.Fire(trEnter) // entering again
	m.waitOn = m.send(o, command{Op: opWatchMember, Name: slices.Min(inside)})
}

// newName gives our member node a name of its own for the next join: a
// member that left and entered again is not taken for one of the last
// round still leaving, and a join after a withdrawal does not race the
// delete of the node withdrawn.
func (m *machine) newName() {
	m.rounds++
	m.name = m.cfg.Name + "-" + strconv.Itoa(m.rounds)
}

func (m *machine) entered(o *out) {
	m.phase, m.step, m.watch = inside, 0, 0
	m.fsm.Fire(trEntered)
	m.event(o, events.Entered, nil)
	m.answer(o, m.name, nil)
}

func (m *machine) leave(o *out, req uint64) {
	switch {
	case m.closing != 0:
		reply(o, req, nil, ErrClosed)
	case m.lost && m.phase == outside:
		m.lost = false
		m.fsm.Fire(trOut)
		reply(o, req, nil, ErrSessionLost)
	case m.phase != inside:
		reply(o, req, nil, ErrNotEntered)
	default:
		m.phase, m.req, m.deleted, m.round, m.relist, m.synced = leaving, req, false, nil, false, false
		m.fsm.Fire(trLeave)
		m.list(o)
	}
}

func (m *machine) list(o *out) {
	m.step, m.watch = m.send(o, command{Op: opList}), 0
}

// leaveListed applies the exit protocol: the lowest member waits on the
// highest; every other member deletes its node and waits on the lowest;
// once only we are left we delete ours; once no one is left, ready goes.
func (m *machine) leaveListed(o *out, i leaveListed) {
	if i.Cmd != m.step || m.phase != leaving {
		return
	}
	if i.Err != nil {
		m.fail(o, i.Err)
		return
	}
	ms := members(i.Children, "")
	if m.round == nil && !m.synced && slices.Contains(ms, m.name) && !slices.Contains(i.Children, ReadyName) {
		// Our node is there and ready is not: the server we read from
		// is behind the ready that let us in. We may have heard of it by
		// its watch's event from another server (the connection moved
		// since), and an event does not move the session's last seen
		// zxid (ZooKeeper before 3.9 sends none with it), so this server
		// may not have all the round's members yet: a round read from
		// it would leave some out, and we would go without them. Once
		// it has caught up, the listing has ready, and every member
		// made before it.
		m.synced = true
		m.step, m.watch = m.send(o, command{Op: opSyncList}), 0
		return
	}
	if m.round == nil {
		// No one of the next round can be in yet: entering it needs
		// every member of ours gone, and ours is here. Later listings
		// are read against this one, so that members who left and
		// entered again are not waited for.
		m.round = make(map[string]bool, len(ms))
		for _, n := range ms {
			m.round[n] = true
		}
	}
	ms = slices.DeleteFunc(ms, func(n string) bool { return !m.round[n] })
	slices.Sort(ms)
	ours := slices.Contains(ms, m.name)
	if !ours && !m.deleted {
		// Our member node went, and not by our delete: with its session
		// (closed or expired on the server before we heard of it). The
		// others count us out and may be through already.
		m.countedOut(o)
		return
	}
	switch {
	case len(ms) == 0:
		m.step = m.send(o, command{Op: opDeleteReady})
	case ours && len(ms) == 1:
		m.deleteOurs(o)
		m.step, m.relist = 0, true // list again once it is deleted
	case ours && ms[0] == m.name:
		m.watch = m.send(o, command{Op: opWatchMember, Name: ms[len(ms)-1]})
	default:
		if ours {
			m.deleteOurs(o)
		}
		m.watch = m.send(o, command{Op: opWatchMember, Name: ms[0]})
	}
}

// memberWatched: the member that watch member cmd watches is there
// (exists: the watch is left), or gone, or the watch failed. Gone, it is
// the member of the round in progress we wait for to enter (we look
// again), or the one we wait for to leave (we list again).
func (m *machine) memberWatched(o *out, cmd uint64, exists bool, err error) {
	switch {
	case (cmd != m.waitOn || m.phase != entering) && (cmd != m.watch || m.phase != leaving):
		// an earlier watch's
	case err != nil:
		m.fail(o, err)
	case exists:
		// its event comes
	case m.phase == entering:
		m.probe(o)
	default:
		m.list(o)
	}
}

func (m *machine) deleteOurs(o *out) {
	m.deleted = true
	m.owed++
	m.send(o, command{Op: opDeleteMember, Name: m.name})
}

func (m *machine) memberDeleted(o *out, i memberDeleted) {
	m.owed--
	if i.Name != m.name {
		return // an earlier round's
	}
	if i.Err != nil && !errors.Is(i.Err, zk.ErrNoNode) {
		m.deleted = false // still there: Close hands it over
		return
	}
	if m.phase == outside && m.deleted {
		m.member = false
	}
	if m.relist && m.phase == leaving {
		m.relist = false
		m.list(o)
	}
}

// getOut leaves the round when its call was withdrawn or failed: our
// member node goes (so that no one counts us), and we are outside. A
// create still in flight is deleted when its reply comes (joined).
func (m *machine) getOut(o *out) {
	if m.member && !m.deleted && !m.joining {
		m.deleteOurs(o)
	}
	m.phase, m.step, m.watch = outside, 0, 0
	m.fsm.Fire(trOut)
}

// fail ends the call in progress with err, leaving the round.
func (m *machine) fail(o *out, err error) {
	if errors.Is(err, ErrSessionLost) || errors.Is(err, zk.ErrSessionExpired) {
		err = ErrSessionLost
	}
	m.getOut(o)
	m.answer(o, nil, err)
}

// answer replies to the call in progress, which is then over.
func (m *machine) answer(o *out, v any, err error) {
	reply(o, m.req, v, err)
	m.req = 0
}

func (m *machine) sessionChange(o *out, i runtime.SessionChange) {
	switch i.State {
	case zk.StateSuspended:
		m.event(o, events.Suspended, nil)
	case zk.StateReconnected:
		m.event(o, events.Reconnected, nil)
	case zk.StateLost:
		m.sessionLost(o)
	case zk.StateConnected:
		if m.session != 0 && m.session != i.SessionID {
			m.sessionLost(o)
		}
		m.session = i.SessionID
	case zk.StateClosed:
		m.connGone = true
		if m.req != 0 {
			m.phase, m.member, m.step, m.watch = outside, false, 0, 0
			m.fsm.Fire(trOut)
			m.answer(o, nil, ErrClosed)
		}
	}
}

// countedOut: our member node is gone without our delete (with its
// session, whether we heard of its end yet or not), so the others count us
// out. The call in progress fails with ErrSessionLost; with none, the next
// Leave does (lost).
func (m *machine) countedOut(o *out) {
	wasMember, wasIn := m.member && !m.deleted, m.phase != outside
	m.phase, m.member, m.deleted, m.joining, m.step, m.watch = outside, false, false, false, 0, 0
	switch {
	case wasMember:
		m.lost = m.req == 0
		m.fsm.Fire(trLost)
		m.event(o, events.Lost, ErrSessionLost)
	case wasIn: // entering, our node not made yet
		m.fsm.Fire(trOut)
	}
	m.answer(o, nil, ErrSessionLost)
}

// sessionLost: our member node went with the session; we are counted out.
func (m *machine) sessionLost(o *out) {
	if m.session == 0 {
		return
	}
	m.session = 0
	m.countedOut(o)
}

// shutdown fails the call in progress and deletes our member node: the
// machine finishes once the delete is done (finishShutdown).
func (m *machine) shutdown(o *out, req uint64) {
	m.closing = req
	m.answer(o, nil, ErrClosed)
	m.event(o, events.StopStart, nil)
	if m.member && !m.deleted && !m.connGone && m.session != 0 {
		m.deleteOurs(o)
	}
	m.phase, m.step, m.watch = outside, 0, 0
}

func (m *machine) finishShutdown(o *out) {
	if m.closing == 0 || m.State() == events.StateStop || m.owed > 0 {
		return
	}
	m.finish(o)
	reply(o, m.closing, nil, nil)
}

func (m *machine) finish(o *out) {
	m.fsm.Fire(trStopped)
	m.event(o, events.StopComplete, nil)
	o.Done = true
}

func (m *machine) event(o *out, t events.Type, err error) {
	var node string
	if m.name != "" {
		node = zk.Join(m.cfg.Path, m.name)
	}
	o.Events = append(o.Events, events.Event{Type: t, State: m.fsm.Current(), Node: node, Err: err})
}

// members is children without ready (and without skip, when not empty).
func members(children []string, skip string) []string {
	var ms []string
	for _, c := range children {
		if c != ReadyName && c != skip {
			ms = append(ms, c)
		}
	}
	return ms
}

// Diagram renders the double barrier's machine, its states and
// transitions, as a Mermaid state diagram (docs/diagrams is generated from
// it).
func Diagram() string { return newBase(states, transitions).fsm.Mermaid() }
