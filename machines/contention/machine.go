package contention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// ReleaseMark is the name of the marker node a holder creates and deletes,
// in the same multi that deletes its own node: node + ".released". The
// marker never exists outside that transaction, so no one lists it; but the
// waiter behind the node watches for the marker's creation (an exists
// watch) as well as for the node's deletion (a child watch). The marker's
// creation is enough: the transaction that made it also deleted the node,
// and only a holder releases with it, so every node below is gone too
// (nodes below ours can only disappear); the waiter holds next on that
// first event, with no read and without waiting for the deletion's event,
// which the server sends after it. A deletion without the marker (a waiter
// gave up, a session expired, a Curator client released) makes it check
// the lower nodes it saw, in one round.
//
// Nothing else about a node is a signal: a data change (Curator's
// revocation writes one) fires neither watch, and a Curator waiter behind
// our node sees only the plain NodeDeleted it waits for. The names are the
// recipe's own: a node made by that name by anyone else would read as a
// release (as deleting a holder's node would).
func ReleaseMark(node string) string { return node + ".released" }

// HoldMark is the path of the marker node a holder keeps while it holds,
// under Config.HoldMarks: an ephemeral node named as the holder's node, in
// the directory's hold-mark directory, dir + ".held", beside it (a
// container, made when first needed). It is made right after the grant
// (announceMark) and deleted after the node when the term ends. It lets a
// holder release with a plain delete, the cheapest write there is, and
// still hand over with no read: the waiter behind the node watches the
// hold mark as well as the node, and a node that holds or held has nothing
// below it, now or later. So when the node goes after its hold mark was
// seen (by the waiter's exists request or its watch), the waiter holds
// next; without it, the waiter checks the lower nodes it saw, as for a
// deletion without the release mark.
//
// The hold marks live outside the directory because a Curator participant
// takes every child of it for a contender. Inside, a mark sorted right
// after its node in Curator's order, LeaderLatch.getParticipants failed on
// its empty data, and a mark left behind by a third party's delete of its
// node kept the Curator waiter behind it waiting (all seen in the interop
// tests before the marks moved out).
func HoldMark(node string) string { return zk.Join(HoldMarkDir(zk.Parent(node)), zk.Base(node)) }

// HoldMarkDir is the directory of the hold marks of the contenders in dir.
// Its marks are named like contender nodes, so it cannot be the directory
// of another election: that name is taken.
func HoldMarkDir(dir string) string { return dir + ".held" }

// Errors are the recipe's sentinel errors, so that a lock reports
// "lock: session lost" and an election "election: session lost".
type Errors struct {
	SessionLost error // the session ended (expired or replaced)
	Suspended   error // the connection was lost while holding, under SuspendedIsLost
	NodeDeleted error // our node was deleted by someone else
	NotHeld     error // Release without a hold
	Closed      error // the handle or the connection was closed
	Released    error // the grant was released (lock) or resigned (election)
	// CleanupPending: Close could not delete our nodes within its timeout;
	// the connection's janitor deletes them when the session is back.
	CleanupPending error
	InvalidOption  error // an option's value is refused at New; newMachine's errors match it too
}

// Config describes one contender.
type Config struct {
	Dir string // the directory the contenders' nodes live in
	// Markers are the node name markers before the sequence ("lock-",
	// "latch-") of the nodes that take part; ours use the first unless an
	// Acquire names another.
	Markers []string
	Data    []byte // our node's data
	// HoldMarks makes a holder keep a hold mark (see HoldMark) and release
	// with a plain delete, instead of the release mark: one more write per
	// grant, off the hand-over's path, for a cheaper release. Every
	// contender of a directory must use the same kind of mark.
	HoldMarks bool
	// Predicate says what a contender waits for and when it holds; the
	// zero value is Exclusive.
	Predicate Predicate
	// Revocable makes a holder watch its own node's data while it holds
	// (Curator's Revoker): when it reads RevokeMessage or UnlockMessage
	// there, the term's revocation is requested (runtime.Output.Revoked, and a
	// REVOKE_REQUESTED event), once per term. The holder decides; nothing
	// is released by it. A data change re-reads the node and re-arms the
	// watch.
	Revocable bool
	// SuspendedIsLost ends a grant as soon as the connection is SUSPENDED
	// (the safe default for recipes); when false only LOST ends it.
	SuspendedIsLost bool
	Errors          Errors
	NewID           func() string // a fresh uuid per term
	SessionID       int64         // the connection's session when the machine starts (0: none yet)
}

func (cfg Config) validate() error {
	switch {
	case cfg.Dir == "" || cfg.Dir[0] != '/':
		return fmt.Errorf("contention: directory %q is not an absolute path", cfg.Dir)
	case len(cfg.Markers) == 0 || slices.Contains(cfg.Markers, ""):
		return fmt.Errorf("contention: no node markers, or an empty one: %q", cfg.Markers)
	case cfg.NewID == nil:
		return errors.New("contention: no NewID")
	}
	return cfg.Predicate.validate(cfg.Markers)
}

// machine is the contention engine: the pure state machine behind the
// exclusive lock and leader election, and behind any recipe whose
// contenders queue in one directory (Config.Predicate says what one waits
// for and when it holds). Step takes one Input and returns what
// to do; it has no goroutines, no I/O and no clock, so a transcript of its
// inputs replays exactly. Not safe for concurrent use.
//
// Lifecycle of a term: START → OFFER (create our protected ephemeral
// sequential node; after a lost create reply, find it by uuid) → DETERMINE
// (list the directory and read our node together; our node must belong to
// the term's session; its czxid is the fencing token; the read leaves the
// watch that tells of our node's deletion for the whole term) → READY
// (watch what the predicate waits for: the next lower node, with its
// release mark; a writer behind readers alone, each of them; the first
// leases waiter, each holder; a later one, the promotion of the waiter
// ahead. When a watched node goes, the waiter holds at once if it left as
// a holder, else checks the others it saw, which leaves a watch on each,
// or lists once more where a node may have appeared below) → LEADER →
// STOP (released) or FAILED.
type machine struct {
	cfg       Config
	fsm       *runtime.FSM
	session   int64
	connected bool
	connGone  bool // the connection was closed: nothing can be sent anymore

	lastCmd  uint64
	inflight map[uint64]*request // commands sent or stalled, by id
	stalled  []uint64            // commands waiting for a connection, in order

	termN     uint64
	term      *term
	acquirers []acquirer
	holds     int
	granted   map[uint64]bool // requests holding in the current term

	closing     bool
	shutdownReq []uint64

	out runtime.Output[command]
}

type acquirer struct {
	req uint64
	try bool
}

// term is one attempt, from OFFER until it ends.
type term struct {
	n       uint64
	prefix  string // Dir/_c_<uuid>-<Marker>
	beside  string // the node whose sequence ours takes (Acquire.Beside), "" for a sequential create
	session int64  // the session the term's node is (to be) created on
	node    string
	seq     int32
	token   int64
	below   []string // lower nodes we saw, ascending; we watch the last
	pending uint64   // the term's outstanding command, 0 when only a watch is armed
	watch   uint64   // the command whose watches we wait for
	// watchesAll: watch is a checkNodes, whose watches are on every node
	// in below (each deletion counts), not a watchNode on the last.
	watchesAll bool
	// predHeld: the node we watch holds or held (its hold mark was seen),
	// so when it goes nothing below ours is left.
	predHeld  bool
	announced bool     // our hold mark was asked for (HoldMarks)
	ownWatch  uint64   // the readDir whose watch on our node tells of its deletion
	dataWatch uint64   // Revocable: the readData whose watch on our node's data is armed
	revoked   bool     // Revocable: the revocation was requested
	try       bool     // only TryAcquire callers: give up instead of waiting
	plain     bool     // a Release asked for no release mark (Release.NoMark)
	followed  bool     // DETERMINE's listing had contenders after ours
	fire      []string // release marks whose watches of ours wait in vain (deleteNode.Fire)
	// electLater: nothing below is left, but the connection was down when
	// that was learnt (a reply or an event read before the cut, handled
	// after SUSPENDED): we hold once it is back with the same session
	// (RECONNECTED), and never if the session ends.
	electLater bool
}

// request is a command in flight (or stalled) and what it is for.
type request struct {
	cmd       command
	term      *term    // the term it serves; nil for deletes
	releasers []uint64 // Release/shutdown calls answered when this delete completes
	stopTerm  uint64   // a delete that completes STOP for this term
	// then is deleted once this delete is done: a hold mark after its
	// node, so that it never delays the node's deletion on the server.
	then string
	// aside: a request of the term beside its progress (readData), never
	// the term's pending command.
	aside bool
	// deferred: a watchNode whose term ended while it was out: the
	// term's node is deleted (release, releasers, stopTerm as asked of
	// deleteTermNode) once its reply is in (see deleteTermNode).
	deferred bool
	release  bool
}

const (
	trOffer     runtime.Trigger = "offer"
	trDetermine runtime.Trigger = "determine"
	trWait      runtime.Trigger = "wait"
	trElect     runtime.Trigger = "elect"
	trFail      runtime.Trigger = "fail"
	trStop      runtime.Trigger = "stop"
)

// phases says what each of the machine's event types means for a term
// (events.Phase), for observers that know no machine.
var phases = map[events.Type]events.Phase{
	events.OfferStart:      events.PhaseBegin,
	events.ElectedComplete: events.PhaseGranted,
	events.Failed:          events.PhaseFailed,
	events.StopStart:       events.PhaseEnded,
	events.StopComplete:    events.PhaseEnded,
}

// The machine's states are the seed's (events.States: START, OFFER,
// DETERMINE, READY, LEADER, FAILED, STOP), moved by these transitions.
var transitions = []runtime.Transition{
	{Trigger: trOffer, From: []events.State{events.StateStart, events.StateStop, events.StateFailed}, To: events.StateOffer},
	{Trigger: trDetermine, From: []events.State{events.StateOffer}, To: events.StateDetermine},
	{Trigger: trWait, From: []events.State{events.StateDetermine}, To: events.StateReady},
	{Trigger: trElect, From: []events.State{events.StateDetermine, events.StateReady}, To: events.StateLeader},
	{Trigger: trFail, From: []events.State{events.StateOffer, events.StateDetermine, events.StateReady, events.StateLeader}, To: events.StateFailed},
	{Trigger: trStop, From: []events.State{events.StateStart, events.StateOffer, events.StateDetermine, events.StateReady, events.StateLeader, events.StateFailed}, To: events.StateStop},
}

// newMachine returns a machine in START. Start's output (the START event)
// comes from Start.
func newMachine(cfg Config) (*machine, error) {
	if err := cfg.validate(); err != nil {
		if cfg.Errors.InvalidOption != nil {
			err = fmt.Errorf("%w: %w", cfg.Errors.InvalidOption, err)
		}
		return nil, err
	}
	f, err := runtime.NewFSM(events.States, events.StateStart, transitions)
	if err != nil {
		return nil, err
	}
	return &machine{
		cfg:       cfg,
		fsm:       f,
		session:   cfg.SessionID,
		connected: cfg.SessionID != 0,
		inflight:  make(map[uint64]*request),
		granted:   make(map[uint64]bool),
	}, nil
}

// FSM exposes the state machine (for State and diagrams).
func (m *machine) FSM() *runtime.FSM { return m.fsm }

// State is the machine's state.
func (m *machine) State() events.State { return m.fsm.Current() }

// Bug is the first illegal transition the machine made (nil: none); its
// Shell reports it as a FAILED event.
func (m *machine) Bug() error { return m.fsm.Bug() }

// Start emits the START event.
func (m *machine) Start() runtime.Output[command] {
	m.out = runtime.Output[command]{}
	m.emit(events.Start, nil)
	return m.out
}

// Step handles one input.
func (m *machine) Step(in Input) runtime.Output[command] {
	m.out = runtime.Output[command]{}
	switch in := in.(type) {
	case Acquire:
		m.acquire(in)
	case runtime.Cancel:
		m.cancel(in.Req)
	case Release:
		m.release(in)
	case runtime.Shutdown:
		m.shutdown(in.Req)
	case runtime.Handover:
		m.handover(in.Req)
	case runtime.SessionChange:
		m.sessionChanged(in)
	case created:
		m.created(in)
	case done:
		switch in.What {
		case dirEnsured:
			m.dirEnsured(in)
		case promoted:
			m.promoted(in)
		case markFired:
			m.take(in.Cmd) // best effort: nothing to do either way
		case deleted:
			m.deleted(in)
		case announced:
			m.announced(in)
		}
	case dirRead:
		m.dirRead(in)
	case dirListed:
		m.dirListed(in)
	case watching:
		m.watching(in)
	case nodesChecked:
		m.nodesChecked(in)
	case dataRead:
		m.dataRead(in)
	case fired:
		switch in.What {
		case watchFired:
			m.watchFired(in)
		case ownNodeGone:
			m.ownNodeGone(in)
		case dataChanged:
			m.dataChanged(in)
		}
	}
	m.checkDone()
	return m.out
}

// ---- user calls

func (m *machine) acquire(in Acquire) {
	if m.closing || m.connGone {
		m.reply(Reply{Req: in.Req, Err: m.cfg.Errors.Closed})
		return
	}
	if err := m.checkAcquire(in); err != nil {
		m.reply(Reply{Req: in.Req, Err: err})
		return
	}
	if m.State() == events.StateLeader {
		m.grant(in.Req)
		return
	}
	m.acquirers = append(m.acquirers, acquirer{req: in.Req, try: in.Try})
	if t := m.term; t != nil {
		t.try = t.try && in.Try
		return
	}
	marker := cmp.Or(in.Marker, m.cfg.Markers[0])
	m.termN++
	t := &term{n: m.termN, prefix: zk.Join(m.cfg.Dir, "_c_"+m.cfg.NewID()+"-"+marker), beside: in.Beside, try: in.Try}
	m.term = t
	m.fire(trOffer)
	m.emit(events.OfferStart, nil)
	m.createNode(t)
}

// checkAcquire refuses an Acquire whose Marker is not one of the
// directory's, or whose Beside is no contender node of the directory.
func (m *machine) checkAcquire(in Acquire) error {
	if in.Marker != "" && !slices.Contains(m.cfg.Markers, in.Marker) {
		return fmt.Errorf("%w: marker %q is not one of %q", m.cfg.Errors.InvalidOption, in.Marker, m.cfg.Markers)
	}
	if _, ok := parseSeq(zk.Base(in.Beside), m.cfg.Markers); in.Beside != "" && (!ok || in.Beside != zk.Join(m.cfg.Dir, zk.Base(in.Beside))) {
		return fmt.Errorf("%w: %q is not a contender node of %s", m.cfg.Errors.InvalidOption, in.Beside, m.cfg.Dir)
	}
	return nil
}

// cancel withdraws call req (runtime.Cancel): a grant already given to it
// is handed back.
func (m *machine) cancel(req uint64) {
	if i := slices.IndexFunc(m.acquirers, func(a acquirer) bool { return a.req == req }); i >= 0 {
		m.acquirers = slices.Delete(m.acquirers, i, i+1)
		if t := m.term; t != nil && len(m.acquirers) == 0 {
			m.abandon(t, context.Canceled)
		}
		return
	}
	if m.granted[req] {
		// The grant raced the caller's cancel: hand it back.
		delete(m.granted, req)
		m.releaseOne(nil)
	}
}

func (m *machine) release(in Release) {
	if m.State() != events.StateLeader || m.holds == 0 || (in.Term != 0 && in.Term != m.term.n) {
		m.reply(Reply{Req: in.Req, Err: m.cfg.Errors.NotHeld})
		return
	}
	if in.All {
		m.holds = 1
	}
	m.term.plain = m.term.plain || in.NoMark
	m.releaseOne([]uint64{in.Req})
}

// releaseOne drops one hold; the last one deletes our node, answering
// releasers once it is gone.
func (m *machine) releaseOne(releasers []uint64) {
	m.holds--
	if m.holds > 0 {
		for _, r := range releasers {
			m.reply(Reply{Req: r})
		}
		return
	}
	m.stop(m.term, releasers, m.cfg.Errors.Released)
}

// shutdown ends the machine: waiters fail with ErrClosed, our node is
// deleted, and the machine is Done once nothing it created is left.
func (m *machine) shutdown(req uint64) {
	m.closing = true
	m.shutdownReq = append(m.shutdownReq, req)
	m.failAcquirers(m.cfg.Errors.Closed)
	switch t := m.term; {
	case t != nil && m.State() == events.StateLeader:
		m.stop(t, nil, m.cfg.Errors.Closed)
	case t != nil:
		m.abandon(t, m.cfg.Errors.Closed)
	case m.State() != events.StateStop:
		m.fire(trStop)
		m.emit(events.StopStart, nil)
		m.emit(events.StopComplete, nil)
	}
}

// handover gives up on the deletes a shutdown still waits for: the nodes
// (and the prefixes of creates whose reply has not come) go in the reply,
// for the connection's janitor, and the machine is done. Commands that
// were never sent (stalled) made nothing.
func (m *machine) handover(req uint64) {
	l := runtime.Leftovers{Session: m.session}
	for id, r := range m.inflight {
		stalled := slices.Contains(m.stalled, id)
		switch c := r.cmd.(type) {
		case deleteNode:
			l.Nodes = append(l.Nodes, c.Path)
			if r.then != "" {
				l.Nodes = append(l.Nodes, r.then)
			}
		case announceMark:
			if !stalled {
				l.Nodes = append(l.Nodes, c.Path)
			}
		case createNode:
			if !stalled {
				l.Prefixes = append(l.Prefixes, c.Prefix)
			}
		case listDir:
			l.Prefixes = append(l.Prefixes, r.term.prefix) // a listDir always has its term (see listDir)
		case watchNode:
			if r.deferred {
				l.Nodes = append(l.Nodes, r.term.node)
			}
		}
	}
	slices.Sort(l.Nodes)
	l.Nodes = slices.Compact(l.Nodes) // a hold mark both announced and deleted
	slices.Sort(l.Prefixes)
	clear(m.inflight)
	m.stalled = nil
	m.reply(Reply{Req: req, Leftovers: l})
	for _, r := range m.shutdownReq {
		m.reply(Reply{Req: r, Err: m.cfg.Errors.Closed})
	}
	m.shutdownReq = nil
	m.closing = true
	m.out.Done = true
}

// ---- session

func (m *machine) sessionChanged(in runtime.SessionChange) {
	switch in.State {
	case zk.StateSuspended:
		m.connected = false
		m.emit(events.Suspended, nil)
		if t := m.term; t != nil && m.State() == events.StateLeader && m.cfg.SuspendedIsLost {
			m.fail(t, m.cfg.Errors.Suspended)
		}
	case zk.StateReconnected:
		m.connected = true
		m.emit(events.Reconnected, nil)
		m.flushStalled()
		if t := m.term; t != nil && t.electLater {
			t.electLater = false
			m.elect(t)
		}
	case zk.StateLost:
		m.connected = false
		m.session = 0
		m.emit(events.Lost, m.cfg.Errors.SessionLost)
		if t := m.term; t != nil {
			m.fail(t, m.cfg.Errors.SessionLost)
		}
	case zk.StateConnected:
		m.session = in.SessionID
		m.connected = true
		m.flushStalled()
	case zk.StateClosed:
		m.connected = false
		m.connGone = true
		if t := m.term; t != nil {
			m.fail(t, m.cfg.Errors.Closed)
		}
		m.failAcquirers(m.cfg.Errors.Closed)
		for _, r := range m.inflight {
			m.finishDelete(r, nil)
		}
		clear(m.inflight)
		m.stalled = nil
	}
}

// ---- replies

func (m *machine) created(in created) {
	r, t := m.take(in.Cmd)
	if r == nil {
		return
	}
	prefix := r.cmd.(createNode).Prefix
	switch {
	case in.Err == nil && t != nil:
		m.offered(t, in.Path)
	case in.Err == nil:
		m.deleteNode(in.Path, false, nil, 0) // the term ended while the create was in flight
	case errors.Is(in.Err, zk.ErrConnectionLoss):
		// The create may have been applied: find it by its uuid.
		m.listDir(prefix, t)
	case t == nil:
	case errors.Is(in.Err, zk.ErrNoNode) && t.beside != "":
		m.fail(t, fmt.Errorf("%w: %s, the node ours was to sit beside, is gone", m.cfg.Errors.NotHeld, t.beside))
	case errors.Is(in.Err, zk.ErrNoNode):
		m.send(&request{cmd: ensureDir{cmdID: cmdID{m.nextCmd()}, Dir: m.cfg.Dir}, term: t})
	default:
		m.failOn(t, in.Err)
	}
}

func (m *machine) dirEnsured(in done) {
	r, t := m.take(in.Cmd)
	switch {
	case t == nil:
	case in.Err == nil:
		m.createNode(t)
	case errors.Is(in.Err, zk.ErrConnectionLoss):
		m.send(r)
	default:
		m.failOn(t, in.Err)
	}
}

func (m *machine) dirListed(in dirListed) {
	r, t := m.take(in.Cmd)
	if r == nil {
		return
	}
	if errors.Is(in.Err, zk.ErrConnectionLoss) {
		m.send(r)
		return
	}
	if r.cmd.(listDir).Relist {
		m.relisted(t, in)
		return
	}
	var found string
	if i := slices.IndexFunc(in.Children, func(c string) bool { return strings.HasPrefix(c, zk.Base(r.term.prefix)) }); in.Err == nil && i >= 0 {
		found = zk.Join(m.cfg.Dir, in.Children[i])
	}
	switch {
	case t == nil && found != "":
		m.deleteNode(found, false, nil, 0)
	case t == nil:
	case found != "":
		m.offered(t, found) // DETERMINE checks it belongs to the term's session
	case in.Err == nil || errors.Is(in.Err, zk.ErrNoNode):
		m.createNode(t)
	default:
		m.failOn(t, in.Err)
	}
}

func (m *machine) dirRead(in dirRead) {
	r, t := m.take(in.Cmd)
	switch {
	case t == nil:
		return
	case errors.Is(in.Err, zk.ErrConnectionLoss):
		m.send(r)
		return
	case in.Err != nil && !errors.Is(in.Err, zk.ErrNoNode):
		m.failOn(t, in.Err)
		return
	case in.Err != nil || !in.OwnExists:
		t.node = ""
		m.fail(t, m.vanished(t, in.Session))
		return
	case in.Own.EphemeralOwner != t.session:
		// created on another session than the term's (go-zookeeper runs
		// requests queued across an expiry on the new session): not ours
		// to hold, and not to be left behind.
		m.fail(t, m.cfg.Errors.SessionLost)
		return
	}
	t.token = in.Own.Czxid
	below := slices.DeleteFunc(lower(in.Children, m.cfg.Markers, zk.Base(t.node), t.seq, m.cfg.Dir), m.stale)
	t.below = m.cfg.Predicate.blockers(below, t.node)
	// Contenders made after ours may have listed before we did, seen us
	// waiting, and watch for our promotion (Leases).
	t.followed = len(Contenders(in.Children, m.cfg.Markers)) > len(below)+1
	if m.State() == events.StateDetermine {
		m.emit(events.DetermineComplete, nil)
	}
	m.advance(t)
}

func (m *machine) watching(in watching) {
	r, t := m.take(in.Cmd)
	switch {
	case r != nil && r.deferred:
		// The term ended meanwhile: its node goes now, with the mark
		// whose watch the request left waiting in vain, as a term that
		// ends after the reply fires it.
		if in.Err == nil && !in.Exists && !in.Held {
			m.fireDanglingMark(r.term, r.cmd.(watchNode))
		}
		m.deleteTermNode(r.term, r.release, r.releasers, r.stopTerm)
	case t == nil:
	case errors.Is(in.Err, zk.ErrConnectionLoss):
		m.send(r)
	case in.Err != nil:
		m.failOn(t, in.Err)
	case m.cfg.Predicate.kind == leases:
		// A waiter behind a waiter: its data watch is set. Promoted
		// already, or gone: list again, which says where we stand.
		if !in.Exists || in.Held {
			m.reread(t)
		}
	default:
		t.predHeld = in.Held
		if !in.Exists {
			m.predecessorGone(t) // gone already: a watch left by the race is stale
			if !in.Held {        // the mark was not there: its watch waits for a creation
				m.fireDanglingMark(t, r.cmd.(watchNode))
			}
		}
	}
}

// fireDanglingMark makes the mark w (of term t) watched fire, when the
// node it marks went without it (see fireMark). Only its successor
// watches a mark (see Predicate.marked), and it fires the mark only once
// it has seen the node gone, before its own node goes: no other waiter
// can have watched that node by then, so none takes the fire for a
// release. Any other watch on the mark was left by a term that has ended.
func (m *machine) fireDanglingMark(t *term, w watchNode) {
	switch {
	case w.Promotion || w.Plain:
	case w.Hold:
		m.send(&request{cmd: fireMark{cmdID: cmdID{m.nextCmd()}, Path: HoldMark(w.Path)}})
	default:
		// In the multi that deletes our node at the term's end: the
		// mark's directory is ours, and no write of its own.
		t.fire = append(t.fire, ReleaseMark(w.Path))
	}
}

func (m *machine) watchFired(in fired) {
	t := m.term
	if t == nil || in.Cmd != t.watch || t.pending != 0 || len(t.below) == 0 {
		return // stale
	}
	if t.watchesAll {
		m.checkedGone(t, in.Event)
		return
	}
	pred := t.below[len(t.below)-1]
	if m.cfg.Predicate.kind == leases {
		// The waiter ahead was promoted to a holder (we may be the first
		// waiter now) or is gone: list again.
		if in.Event.Path == pred && (in.Event.Type == zk.EventNodeDataChanged || in.Event.Type == zk.EventNodeDeleted) {
			m.reread(t)
		}
		return
	}
	switch {
	case in.Event.Type == zk.EventNodeCreated && in.Event.Path == ReleaseMark(pred):
		t.predHeld = true // it left as a holder, in the transaction that made the mark
		m.predecessorGone(t)
	case in.Event.Type == zk.EventNodeCreated && in.Event.Path == HoldMark(pred):
		t.predHeld = true // the deletion's event follows on the same watch
	case in.Event.Type == zk.EventNodeDeleted && in.Event.Path == pred:
		held := t.predHeld
		m.predecessorGone(t)
		if !held {
			// No mark came before the deletion (events keep the server's
			// order): the mark's watch waits for a creation that never comes.
			m.fireDanglingMark(t, watchNode{Path: pred, Hold: m.cfg.HoldMarks, Plain: !m.cfg.Predicate.marked(t.node, pred)})
		}
	}
	// Anything else is the end of the watch: LOST follows.
}

// ownNodeGone ends the term whose node was deleted by someone else (an
// operator, a script, a forced revocation) while we held it or waited: a
// hold without its node is no hold. Our own deletes come after the term
// ended, so their events find no term.
func (m *machine) ownNodeGone(in fired) {
	t := m.term
	if t == nil || in.Cmd != t.ownWatch || in.Event.Type != zk.EventNodeDeleted || in.Event.Path != t.node {
		return // stale, or the end of the watch with the session: LOST follows
	}
	if in.ConnClosed {
		// Our own connection's close deleted it (our session's end).
		m.fail(t, m.cfg.Errors.Closed)
		return
	}
	// fail deletes the node all the same (NoNode, one request in this rare
	// case), for the hold mark that follows it must go too.
	m.fail(t, m.vanished(t, 0))
}

// predecessorGone drops the node we watched and its watch. If it held,
// nothing below is left and we hold; otherwise (a waiter that gave up, an
// expired session) it looks at what is left below.
func (m *machine) predecessorGone(t *term) {
	t.watch, t.watchesAll = 0, false
	hold, relist := m.cfg.Predicate.afterGone(t.node, t.below[len(t.below)-1], t.predHeld)
	switch {
	case hold:
		t.below = nil
		m.advance(t)
	case relist:
		m.reread(t)
	default:
		t.below = t.below[:len(t.below)-1]
		m.recheck(t)
	}
}

func (m *machine) nodesChecked(in nodesChecked) {
	r, t := m.take(in.Cmd)
	switch {
	case t == nil:
	case errors.Is(in.Err, zk.ErrConnectionLoss):
		m.send(r)
	case in.Err != nil:
		m.failOn(t, in.Err)
	default:
		// No writer whose absence needs a listing is among them (recheck).
		var left []string
		for i, p := range r.cmd.(checkNodes).Paths {
			if in.Exists[i] {
				left = append(left, p)
			}
		}
		// Those left are watched already: wait for each to go.
		if t.below = m.cfg.Predicate.blockers(left, t.node); len(t.below) == 0 {
			t.watch, t.watchesAll = 0, false
			m.elect(t)
		}
	}
}

// checkedGone takes the deletion of one of the nodes a check watches: the
// waiter holds when none of them blocks it any more (the last is gone; for
// leases, any one). None of them can be replaced
// by a node below ours meanwhile: a downgrade needs a writer below that
// holds, and a check holds no writer whose absence needs a listing.
func (m *machine) checkedGone(t *term, ev zk.WatchEvent) {
	if ev.Type != zk.EventNodeDeleted || !slices.Contains(t.below, ev.Path) {
		return // the end of the watch: LOST follows
	}
	t.below = slices.DeleteFunc(t.below, func(n string) bool { return n == ev.Path })
	if len(m.cfg.Predicate.blockers(t.below, t.node)) == 0 {
		t.below = nil
		t.watch, t.watchesAll = 0, false
		m.elect(t)
	}
}

func (m *machine) deleted(in done) {
	r, _ := m.take(in.Cmd)
	if r == nil {
		return
	}
	switch {
	case errors.Is(in.Err, zk.ErrConnectionLoss), errors.Is(in.Err, zk.ErrSessionExpired):
		// Retry once connected: the node is gone with its session, or it
		// is still ours to delete.
		m.send(r)
	case errors.Is(in.Err, zk.ErrNodeExists):
		// Someone made a node by a mark's name: delete plainly.
		d := r.cmd.(deleteNode)
		d.Release, d.Fire = false, nil
		r.cmd = d
		m.send(r)
	case errors.Is(in.Err, zk.ErrClosed):
		m.finishDelete(r, nil)
	default:
		if errors.Is(in.Err, zk.ErrNoNode) {
			in.Err = nil
		}
		m.finishDelete(r, in.Err)
		if r.then != "" {
			m.deleteNode(r.then, false, nil, 0)
		}
	}
}

// ---- the term

func (m *machine) createNode(t *term) {
	c := createNode{cmdID: cmdID{m.nextCmd()}, Prefix: t.prefix, Data: m.cfg.Data}
	if t.beside != "" {
		c.Beside = t.beside
		c.Seq, _, _ = splitSeq(zk.Base(t.beside), m.cfg.Markers)
	}
	m.send(&request{cmd: c, term: t})
}

func (m *machine) listDir(prefix string, t *term) {
	r := &request{cmd: listDir{cmdID: cmdID{m.nextCmd()}, Dir: m.cfg.Dir}, term: t}
	if t == nil {
		r.term = &term{prefix: prefix} // a hunt for a ghost of an ended term
	}
	m.send(r)
}

func (m *machine) offered(t *term, node string) {
	t.node = node
	t.seq, _ = parseSeq(zk.Base(node), m.cfg.Markers)
	m.emit(events.OfferComplete, nil)
	m.fire(trDetermine)
	m.emit(events.DetermineStart, nil)
	t.ownWatch = m.nextCmd()
	m.send(&request{cmd: readDir{cmdID: cmdID{t.ownWatch}, Dir: m.cfg.Dir, Own: node}, term: t})
}

// recheck follows a node before ours that went without a release mark: the
// lower nodes we saw may still be there (it may have been a waiter that
// gave up), so ask for all of them in one round. With none left, hold.
func (m *machine) recheck(t *term) {
	if len(t.below) == 0 {
		m.elect(t)
		return
	}
	// A writer among them found gone would need a listing (mustRelist):
	// list at once, one request that also shows which are left.
	if slices.ContainsFunc(t.below, func(n string) bool { return m.cfg.Predicate.mustRelist(t.node, n) }) {
		m.reread(t)
		return
	}
	t.watch, t.watchesAll = m.nextCmd(), true
	m.send(&request{cmd: checkNodes{cmdID: cmdID{t.watch}, Paths: slices.Clone(t.below)}, term: t})
}

// advance holds it when nothing we saw below is left, or else waits for the
// next lower node (TryAcquire callers give up instead).
func (m *machine) advance(t *term) {
	if len(t.below) == 0 {
		m.elect(t)
		return
	}
	if t.try {
		m.abandon(t, nil)
		return
	}
	m.acquirers = slices.DeleteFunc(m.acquirers, func(a acquirer) bool {
		if a.try {
			m.reply(Reply{Req: a.req})
		}
		return a.try
	})
	if m.State() == events.StateDetermine {
		m.fire(trWait)
		m.emit(events.ReadyStart, nil)
	}
	p, pred := m.cfg.Predicate, t.below[len(t.below)-1]
	w := watchNode{Path: pred, Hold: m.cfg.HoldMarks, Plain: !p.marked(t.node, pred)}
	switch {
	case p.kind == leases && len(t.below) > p.leases:
		// Behind another waiter: wait for it to be promoted to a holder
		// (or to go). No waiter watches what it cannot take.
		w = watchNode{Path: pred, Promotion: true}
	case p.kind == leases, p.writerBehindReaders(t.node, t.below), p.readerBehindWriters(t.node, t.below):
		// The first leases waiter: every node below holds, and any one
		// that goes frees a lease for us (a lease that ends wakes this
		// waiter alone). Readers alone below a writer all hold, and go
		// in any order; a reader waits for every writer below it. Watch
		// each (one round of requests, as the recheck a watch on the
		// last alone would need), and hold when the last goes.
		t.watch, t.watchesAll = m.nextCmd(), true
		m.send(&request{cmd: checkNodes{cmdID: cmdID{t.watch}, Paths: slices.Clone(t.below)}, term: t})
		return
	}
	w.Cmd = m.nextCmd()
	t.watch, t.watchesAll = w.Cmd, false
	m.send(&request{cmd: w, term: t})
}

// reread lists the directory again, for a waiter that must see nodes made
// below it since DETERMINE. Our node needs no new read: the watch that
// read left on it is still armed (it fires only on the node's deletion).
func (m *machine) reread(t *term) {
	t.watch, t.watchesAll = 0, false
	m.send(&request{cmd: listDir{cmdID: cmdID{m.nextCmd()}, Dir: m.cfg.Dir, Relist: true}, term: t})
}

// relisted takes a waiter's new listing: our node missing from it (or the
// directory gone) was deleted by someone else; otherwise what is below
// decides, as in DETERMINE.
func (m *machine) relisted(t *term, in dirListed) {
	switch {
	case t == nil:
	case in.Err != nil && !errors.Is(in.Err, zk.ErrNoNode):
		m.failOn(t, in.Err)
	case in.Err != nil || !slices.Contains(in.Children, zk.Base(t.node)):
		t.node = ""
		m.fail(t, m.vanished(t, in.Session))
	default:
		below := slices.DeleteFunc(lower(in.Children, m.cfg.Markers, zk.Base(t.node), t.seq, m.cfg.Dir), m.stale)
		t.below = m.cfg.Predicate.blockers(below, t.node)
		m.advance(t)
	}
}

func (m *machine) elect(t *term) {
	if !m.connected {
		// A grant now would hold while we are cut off, perhaps past our
		// session's end on the server while another holds.
		t.electLater = true
		return
	}
	if m.State() == events.StateReady {
		m.emit(events.ReadyComplete, nil)
	}
	if m.cfg.Predicate.kind == leases && (m.State() == events.StateReady || t.followed) {
		// A waiter behind may watch for this: tell it (see Leases).
		m.send(&request{cmd: promote{cmdID: cmdID{m.nextCmd()}, Node: t.node, Data: m.cfg.Data}})
	}
	m.fire(trElect)
	m.emit(events.ElectedStart, nil)
	for _, a := range m.acquirers {
		m.grant(a.req)
	}
	m.acquirers = nil
	m.emit(events.ElectedComplete, nil)
	if m.cfg.Revocable {
		m.readData(t)
	}
	if m.cfg.HoldMarks {
		t.announced = true
		m.send(&request{cmd: announceMark{cmdID: cmdID{m.nextCmd()}, Node: t.node, Path: HoldMark(t.node)}})
	}
}

// promoted takes promote's reply: sent again after a connection loss while
// the term still holds (the waiter behind would wait for a lease some
// other one frees); anything else (our node gone, promoted already) ends
// it.
func (m *machine) promoted(in done) {
	r, _ := m.take(in.Cmd)
	if r == nil {
		return
	}
	if t := m.term; errors.Is(in.Err, zk.ErrConnectionLoss) && t != nil && t.node == r.cmd.(promote).Node {
		m.send(r)
	}
}

// announced takes announceMark's reply. While the term holds there is nothing
// to do, whatever it says: without the mark the waiter behind us only
// reads once more. If the term is over, a mark that was (or may have been)
// made before our node went is deleted: the delete at the term's end may
// have reached the server before it.
func (m *machine) announced(in done) {
	r, _ := m.take(in.Cmd)
	if r == nil {
		return
	}
	node := r.cmd.(announceMark).Node
	if t := m.term; t != nil && t.node == node {
		return
	}
	if in.Err == nil || errors.Is(in.Err, zk.ErrConnectionLoss) {
		m.deleteNode(HoldMark(node), false, nil, 0)
	}
}

// deleteTermNode deletes the term's node (see deleteNode) and then its
// hold mark, if it asked for one: the waiter behind needs only the node's
// deletion, and a delete of the mark sent with it could reach the server
// first and take a log write of its own before it.
//
// A term whose watchNode is out keeps its node until the reply is in: its
// requests run on a goroutine, and the mark's watch can be set after the
// node ahead went (a release's mark already made and gone), where it would
// wait in vain until the session ends. The reply tells (watching), and the
// node then goes with that mark fired in its multi, while we are still the
// only waiter behind the node ahead. (A reply dropped as stale left the
// watch: a writer behind a writer that gave up under load kept one.)
func (m *machine) deleteTermNode(t *term, release bool, releasers []uint64, stopTerm uint64) {
	if r := m.inflight[t.pending]; r != nil && r.term == t {
		if w, ok := r.cmd.(watchNode); ok && !w.Plain && !w.Promotion {
			r.deferred, r.release, r.releasers, r.stopTerm = true, release, releasers, stopTerm
			return
		}
	}
	r := &request{cmd: deleteNode{cmdID: cmdID{m.nextCmd()}, Path: t.node, Release: release, Fire: t.fire}, releasers: releasers, stopTerm: stopTerm}
	if t.announced {
		r.then = HoldMark(t.node)
	}
	m.send(r)
}

func (m *machine) grant(req uint64) {
	t := m.term
	m.holds++
	m.granted[req] = true
	m.reply(Reply{Req: req, Granted: true, Grant: Grant{Term: t.n, Node: t.node, Token: t.token}})
}

// stop ends a held term because of cause (released, closed): our node is
// deleted with the release mark, or plainly (Release.NoMark) or plainly and
// then its hold mark (HoldMarks).
func (m *machine) stop(t *term, releasers []uint64, cause error) {
	m.fire(trStop)
	m.emit(events.StopStart, nil)
	m.endTerm(t, cause)
	// A reader's release mark is watched by no one (see Predicate.marked).
	release := !m.cfg.HoldMarks && !t.plain && !m.cfg.Predicate.isReader(t.node)
	m.deleteTermNode(t, release, releasers, t.n)
}

// abandon ends a term that does not hold: its node (if any) is deleted; a
// create still in flight is deleted when its reply comes.
func (m *machine) abandon(t *term, cause error) {
	m.fire(trStop)
	m.emit(events.StopStart, cause)
	m.endTerm(t, cause)
	if t.node != "" {
		m.deleteTermNode(t, false, nil, t.n)
		return
	}
	m.event(events.Event{Type: events.StopComplete, State: m.State(), Term: t.n, Node: t.prefix, Err: cause})
}

// fail ends a term on an error: FAILED, waiters get err, our node is deleted.
func (m *machine) fail(t *term, err error) {
	m.fire(trFail)
	m.emit(events.Failed, err)
	m.endTerm(t, err)
	if t.node != "" {
		m.deleteTermNode(t, false, nil, 0)
	}
}

// failOn fails t on the error a reply brought. A request whose session
// expired while it was in flight (its answer came ahead of LOST) is the
// session's loss, as LOST would have said.
func (m *machine) failOn(t *term, err error) {
	if errors.Is(err, zk.ErrSessionExpired) {
		err = m.cfg.Errors.SessionLost
	}
	m.fail(t, err)
}

// endTerm ends term t; cause is why, for its grant's Lost and its waiters.
func (m *machine) endTerm(t *term, cause error) {
	m.failAcquirers(cause)
	m.term = nil
	m.holds = 0
	clear(m.granted)
	m.out.Ended = append(m.out.Ended, runtime.TermEnd{Term: t.n, Cause: cause})
	// Drop the term's stalled reads: nothing will want their answer. A
	// stalled create was never sent, so nothing was created.
	m.stalled = slices.DeleteFunc(m.stalled, func(id uint64) bool {
		r, ok := m.inflight[id]
		if _, hunt := r.cmd.(listDir); !ok || r.term != t || hunt {
			return false
		}
		delete(m.inflight, id)
		return true
	})
}

func (m *machine) failAcquirers(err error) {
	for _, a := range m.acquirers {
		m.reply(Reply{Req: a.req, Err: err})
	}
	m.acquirers = nil
}

// vanished is why t's node is gone: SessionLost if the term's session is
// over, as the machine knows it or as the read that found the node gone
// saw it (readOn, the connection's session once that read was answered; 0
// unknown); otherwise NodeDeleted, by someone else. A read can run on the
// session that replaced ours and be answered before LOST reaches the
// machine: the node went with our session, not by another client's hand.
func (m *machine) vanished(t *term, readOn int64) error {
	if m.session != t.session || (readOn != 0 && readOn != t.session) {
		return m.cfg.Errors.SessionLost
	}
	return m.cfg.Errors.NodeDeleted
}

// ---- deletes

// deleteNode deletes path in the background until it succeeds, the node is
// gone, or the connection is closed; release marks it released (see
// ReleaseMark). releasers are answered when it is done; stopTerm, if set,
// completes that term's STOP.
func (m *machine) deleteNode(path string, release bool, releasers []uint64, stopTerm uint64) {
	m.send(&request{cmd: deleteNode{cmdID: cmdID{m.nextCmd()}, Path: path, Release: release}, releasers: releasers, stopTerm: stopTerm})
}

// stale reports whether path, a node a listing showed, is one of ours
// (an earlier term's) that is going: no one waits behind it. Its delete
// is under way (it and our create may reach the server in either order).
// A listing and a delete answer in the order they were made (GoInOrder),
// so a delete answered before a listing's reply was applied before it.
func (m *machine) stale(path string) bool {
	for _, r := range m.inflight {
		if d, ok := r.cmd.(deleteNode); (ok && d.Path == path) || (r.deferred && r.term.node == path) {
			return true
		}
	}
	return false
}

func (m *machine) finishDelete(r *request, err error) {
	for _, req := range r.releasers {
		m.reply(Reply{Req: req, Err: err})
	}
	if r.stopTerm != 0 {
		var node string
		if d, ok := r.cmd.(deleteNode); ok {
			node = d.Path
		} else {
			node = r.term.node // a deferred delete's (see deleteTermNode)
		}
		m.event(events.Event{Type: events.StopComplete, State: m.State(), Term: r.stopTerm, Node: node, Err: err})
	}
}

// ---- sending

func (m *machine) nextCmd() uint64 {
	m.lastCmd++
	return m.lastCmd
}

// send registers r and sends it now, or when the connection is back. A
// retry sends the same request again, with the same id.
func (m *machine) send(r *request) {
	id := r.cmd.ID()
	m.inflight[id] = r
	if r.term != nil && r.term == m.term && !r.aside {
		r.term.pending = id
	}
	if !m.connected {
		m.stalled = append(m.stalled, id)
		return
	}
	m.dispatch(r)
}

// dispatch hands r's command out. A create records the session it goes out
// on: the node must be owned by it.
func (m *machine) dispatch(r *request) {
	if _, ok := r.cmd.(createNode); ok && r.term != nil {
		r.term.session = m.session
	}
	m.out.Commands = append(m.out.Commands, r.cmd)
}

func (m *machine) flushStalled() {
	ids := m.stalled
	m.stalled = nil
	for _, id := range ids {
		if r, ok := m.inflight[id]; ok {
			m.dispatch(r)
		}
	}
}

// take removes the request a reply answers. t is its term if that term is
// still the live one and the reply is the one it waits for; nil otherwise
// (the reply is stale).
func (m *machine) take(id uint64) (*request, *term) {
	r, ok := m.inflight[id]
	if !ok {
		return nil, nil
	}
	delete(m.inflight, id)
	if r.term != nil && r.term == m.term && r.term.pending == id {
		r.term.pending = 0
		return r, r.term
	}
	return r, nil
}

func (m *machine) checkDone() {
	if !m.closing || len(m.shutdownReq) == 0 {
		return
	}
	if len(m.inflight) > 0 && !m.connGone {
		return
	}
	for _, req := range m.shutdownReq {
		m.reply(Reply{Req: req})
	}
	m.shutdownReq = nil
	m.out.Done = true
}

// ---- output helpers

// fire moves the machine by t; an illegal move is kept by the FSM (Bug).
func (m *machine) fire(t runtime.Trigger) { m.fsm.Fire(t) }

func (m *machine) emit(typ events.Type, err error) {
	e := events.Event{Type: typ, State: m.State(), Err: err}
	if t := m.term; t != nil {
		e.Term, e.Node, e.Token = t.n, t.node, t.token
		if e.Node == "" && (typ == events.Failed || typ == events.StopStart) {
			// A term that ends before its create answered: the
			// protected prefix names the node (its uuid finds a ghost).
			e.Node = t.prefix
		}
	}
	m.event(e)
}

// event adds e, with its phase, to the step's events.
func (m *machine) event(e events.Event) {
	e.Phase = phases[e.Type]
	m.out.Events = append(m.out.Events, e)
}

// reply answers a call: r is the reply's Value, but for a handover's
// Leftovers, which are (for Shell.Close).
func (m *machine) reply(r Reply) {
	sr := runtime.Reply{Req: r.Req, Value: r, Err: r.Err}
	if l := r.Leftovers; len(l.Nodes)+len(l.Prefixes) > 0 {
		sr.Value = l
	}
	if r.Granted {
		sr.Grant = r.Grant.Term
	}
	m.out.Replies = append(m.out.Replies, sr)
}

// ---- names and order

// parseSeq returns the sequence number of a contender node name: one of
// markers followed by ZooKeeper's suffix (see zk.ParseSequence).
func parseSeq(name string, markers []string) (int32, bool) {
	_, s, ok := splitSeq(name, markers)
	return s, ok
}

// splitSeq returns the sequence suffix of a contender node's name (ten
// digits, or eleven characters once the counter wrapped) and its value.
func splitSeq(name string, markers []string) (string, int32, bool) {
	for _, n := range []int{11, 10} {
		if len(name) < n {
			continue
		}
		prefix, suffix := name[:len(name)-n], name[len(name)-n:]
		if !slices.ContainsFunc(markers, func(m string) bool { return strings.HasSuffix(prefix, m) }) {
			continue
		}
		if s, ok := zk.ParseSequence(suffix); ok {
			return suffix, s, true
		}
	}
	return "", 0, false
}

// lower returns the full paths of the contender nodes before ours, oldest
// first.
func lower(children, markers []string, ours string, seq int32, dir string) []string {
	var below []string
	for _, name := range Contenders(children, markers) {
		if s, _ := parseSeq(name, markers); name != ours && zk.CompareSequence(s, seq) < 0 {
			below = append(below, zk.Join(dir, name))
		}
	}
	return below
}

// Contenders returns the names among children that are contender nodes
// (one of markers, then a sequence), in queue order: the first holds.
// Sequences are compared as 32-bit serial numbers.
func Contenders(children, markers []string) []string {
	type node struct {
		name string
		seq  int32
	}
	var nodes []node
	for _, c := range children {
		if s, ok := parseSeq(c, markers); ok {
			nodes = append(nodes, node{c, s})
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return zk.CompareSequence(nodes[i].seq, nodes[j].seq) < 0 })
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.name
	}
	return names
}

// Diagram renders the machine's states and transitions as a Mermaid state
// diagram (the same as FSM().Mermaid() of a new machine; docs/diagrams is
// generated from it).
func Diagram() string {
	f, err := runtime.NewFSM(events.States, events.StateStart, transitions)
	if err != nil {
		return err.Error()
	}
	return f.Mermaid()
}
