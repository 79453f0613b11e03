package cache

import (
	"errors"
	"maps"
	"slices"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// A cache's machine is START while its first load runs, READY once it is
// done (INITIALIZED), STOP once closed.
const (
	trInitialized runtime.Trigger = "initialized"
	trStopped     runtime.Trigger = "stopped"
)

var (
	states      = []events.State{events.StateStart, events.StateReady, events.StateStop}
	transitions = []runtime.Transition{
		{Trigger: trInitialized, From: []events.State{events.StateStart}, To: events.StateReady},
		{Trigger: trStopped, From: []events.State{events.StateStart, events.StateReady}, To: events.StateStop},
	}
)

// config is what a machine is made with.
type config struct {
	Path        string
	MaxDepth    int  // the deepest level cached below Path (Path is 0)
	HideRoot    bool // Path is followed but neither published nor in the view (a children cache)
	Data        bool // keep the nodes' data
	MaxInFlight int  // requests in flight at most
	Up          bool // the connection has a session when the machine starts
	View        *view
}

// kind is what a queued request asks.
type kind uint8

const (
	kData   kind = iota // read the node's data (readData)
	kExists             // wait for the absent root (watchExists)
	kList               // list the node's children (readKids)
)

// entry is a node the cache follows: one named by the latest listing of
// its parent (or the root), present or not.
//
// Each node has at most one data read (or the root's exists) and one
// listing in flight: the next is made once the last is answered, so the
// replies about one path come in the server's order. Across paths the
// replies reach the actor in any order (each request is its own
// goroutine), so a node is dropped only on evidence newer than what was
// seen of it: the ticks say which request was made after which reply was
// applied (a request made after a reply was applied reads a state at
// least as new).
type entry struct {
	path    string
	depth   int
	present bool // published: the server had it at our last look
	czxid   int64
	mzxid   int64
	version int32
	kids    map[string]struct{} // the latest listing's names (and kept ones)
	listed  bool                // a listing of this incarnation, this session, was applied
	kept    bool                // not in its parent's latest listing, but seen after it: looked at again
	loading bool                // its first load is not done (counted in machine.loading)

	dataQ, listQ         bool   // a read, a listing queued
	readCmd, listCmd     uint64 // in flight (0: none)
	readAgain, listAgain bool   // asked for again while in flight
	watchCmd             uint64 // the read whose data (or exists) watch is followed
	watchIssued          uint64 // the tick that read was made at
	kidsWatch            uint64 // the listing whose child watch is followed
	readAnswered         uint64 // the tick the last data reply was applied at
	listAnswered         uint64 // the tick the last listing was applied at
}

// queued is a request waiting for room in flight.
type queued struct {
	path string
	kind kind
}

// pending is a request in flight: whose, and the tick it was made at.
type pending struct {
	path   string
	issued uint64
}

// machine is a node, children or tree cache: a pure machine run by a
// runtime.Shell. It reads each node with a data watch and each node above
// the deepest level with a child watch, reads again what a watch says
// changed, and publishes each difference it sees. After a connection loss
// the watches survive and only the requests that failed are made again;
// after a session's end every node is read again and only differences are
// published. It writes the nodes it publishes to its view as it publishes
// them, so a subscriber that got an event finds it (or later) in the view.
type machine struct {
	cfg         config
	fsm         *runtime.FSM
	nodes       map[string]*entry
	queue       []queued
	inflight    map[uint64]pending
	cmds        uint64 // commands made so far
	tick        uint64 // inputs stepped so far
	down        bool   // the connection is down: no request is made
	expired     bool   // the session ended: every node is read again once a new one is there
	initialized bool
	loading     int      // entries whose first load is not done
	waiters     []uint64 // Initialized calls
	stopped     bool
}

type out = runtime.Output[command]

func newMachine(cfg config) (*machine, error) {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		return nil, err
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = defaultInFlight
	}
	if cfg.View == nil {
		cfg.View = newView()
	}
	m := &machine{cfg: cfg, fsm: f, nodes: make(map[string]*entry),
		inflight: make(map[uint64]pending), down: !cfg.Up}
	m.add(cfg.Path, 0)
	return m, nil
}

// defaultInFlight bounds the requests in flight: the first load of a
// large tree is pipelined, not one round trip at a time, without queueing
// thousands of requests in the client at once.
const defaultInFlight = 256

func (m *machine) State() events.State { return m.fsm.Current() }

// Bug is the first illegal transition the machine fired (nil: none).
func (m *machine) Bug() error { return m.fsm.Bug() }

// Start publishes START and reads the root.
func (m *machine) Start() out {
	var o out
	o.Events = append(o.Events, events.Event{Type: events.Start, State: m.State()})
	m.enqueue(m.nodes[m.cfg.Path], kData)
	m.pump(&o)
	return o
}

func (m *machine) Step(in input) out {
	var o out
	if m.stopped {
		return o
	}
	m.tick++
	if h, ok := in.(runtime.Handover); ok {
		in = runtime.Shutdown(h) // never needed: nothing to delete
	}
	switch i := in.(type) {
	case initCall:
		if m.initialized {
			o.Replies = append(o.Replies, runtime.Reply{Req: i.Req})
		} else {
			m.waiters = append(m.waiters, i.Req)
		}
	case runtime.Cancel:
		m.waiters = slices.DeleteFunc(m.waiters, func(r uint64) bool { return r == i.Req })
	case runtime.Shutdown: // Close: there is nothing to delete
		m.stop(&o)
		o.Replies = append(o.Replies, runtime.Reply{Req: i.Req})
		return o
	case runtime.SessionChange:
		m.session(&o, i)
	case dataRead:
		m.dataRead(&o, i)
	case kidsRead:
		m.kidsRead(&o, i)
	case existsRead:
		m.existsRead(&o, i)
	case fired:
		m.fired(&o, i)
	}
	if m.stopped {
		return o
	}
	m.pump(&o)
	if !m.initialized && m.loading == 0 {
		m.initialized = true
		m.fsm.Fire(trInitialized)
		o.Events = append(o.Events, events.Event{Type: events.Initialized, State: m.State()})
		for _, r := range m.waiters {
			o.Replies = append(o.Replies, runtime.Reply{Req: r})
		}
		m.waiters = nil
	}
	return o
}

func (m *machine) session(o *out, i runtime.SessionChange) {
	switch i.State {
	case zk.StateSuspended:
		m.down = true
		m.event(o, events.Suspended)
	case zk.StateReconnected:
		m.down = false // the watches survived: only what failed is asked again
		m.event(o, events.Reconnected)
	case zk.StateLost:
		m.down, m.expired = true, true
		m.event(o, events.Lost)
		m.forget()
	case zk.StateConnected:
		m.down = false
		if m.expired {
			m.expired = false
			for _, p := range slices.Sorted(maps.Keys(m.nodes)) { // the root first
				m.enqueue(m.nodes[p], kData)
			}
		}
	case zk.StateClosed:
		m.stop(o)
	}
}

// forget: the session ended, and every watch and request with it. The
// nodes stay as they were until read again.
func (m *machine) forget() {
	for _, e := range m.nodes {
		e.readCmd, e.listCmd, e.watchCmd, e.kidsWatch = 0, 0, 0, 0
		e.dataQ, e.listQ, e.readAgain, e.listAgain, e.listed = false, false, false, false, false
	}
	m.queue = nil
}

// answered takes request cmd out of flight and returns its entry, if it
// is still the one that entry waits for.
func (m *machine) answered(cmd uint64, slot func(*entry) *uint64) (*entry, pending, bool) {
	p, ok := m.inflight[cmd]
	if !ok {
		return nil, p, false
	}
	delete(m.inflight, cmd)
	e := m.nodes[p.path]
	if e == nil || *slot(e) != cmd {
		return nil, p, false
	}
	*slot(e) = 0
	return e, p, true
}

func readSlot(e *entry) *uint64 { return &e.readCmd }
func listSlot(e *entry) *uint64 { return &e.listCmd }

func (m *machine) dataRead(o *out, i dataRead) {
	e, p, ok := m.answered(i.Cmd, readSlot)
	if !ok {
		return
	}
	again := e.readAgain
	e.readAgain = false
	switch {
	case i.Err == nil:
		e.readAnswered = m.tick
		e.watchCmd, e.watchIssued = i.Cmd, p.issued
		m.found(o, e, i.Data, i.Stat)
		if again {
			m.enqueue(e, kData)
		}
	case errors.Is(i.Err, zk.ErrNoNode):
		m.gone(o, e, p.issued)
	default:
		m.failed(o, e, kData, i.Err)
	}
}

// found applies what a read of e saw.
func (m *machine) found(o *out, e *entry, data []byte, st zk.Stat) {
	if !m.cfg.Data {
		data = nil
	}
	if e.present && st.Czxid != e.czxid {
		m.remove(o, e, true) // deleted and made again: the old one, and what was under it, went
	}
	switch {
	case !e.present:
		e.present, e.czxid, e.mzxid, e.version = true, st.Czxid, st.Mzxid, st.Version
		m.show(e, data, st)
		m.publish(o, events.NodeAdded, e.path, data, st.Version)
		if e.depth >= m.cfg.MaxDepth {
			m.loaded(e)
		}
	case st.Mzxid != e.mzxid:
		e.mzxid, e.version = st.Mzxid, st.Version
		m.show(e, data, st)
		m.publish(o, events.NodeUpdated, e.path, data, st.Version)
	default:
		m.restat(e, st)
	}
	if e.depth < m.cfg.MaxDepth && !e.listed {
		m.enqueue(e, kList)
	}
}

// gone applies that e was found absent by a request made at tick issued
// (a read's NoNode, or its watch's NodeDeleted).
func (m *machine) gone(o *out, e *entry, issued uint64) {
	if e.present {
		m.remove(o, e, true)
	}
	if e.path == m.cfg.Path {
		m.enqueue(e, kExists) // an absent root is waited for
		return
	}
	q := m.nodes[zk.Parent(e.path)]
	var named bool
	if q != nil {
		_, named = q.kids[zk.Base(e.path)]
	}
	switch {
	case !named || e.kept:
		m.remove(o, e, false)
	case q.listAnswered > issued:
		// A listing applied after that request was made names it: it may
		// be newer, and the node there again. Look again.
		m.enqueue(e, kData)
	default:
		// Named by a listing older than that look: the parent's child
		// watch, left by that listing, fires for its deletion (or its
		// return), and the next listing settles it.
		m.loaded(e)
	}
}

func (m *machine) kidsRead(o *out, i kidsRead) {
	e, p, ok := m.answered(i.Cmd, listSlot)
	if !ok {
		return
	}
	again := e.listAgain
	e.listAgain = false
	switch {
	case i.Err == nil:
		e.kidsWatch, e.listAnswered, e.listed = i.Cmd, m.tick, true
		if e.present && i.Stat.Czxid == e.czxid && i.Stat.Mzxid == e.mzxid {
			m.restat(e, i.Stat)
		}
		m.listing(o, e, i.Names, p.issued)
		m.loaded(e)
		if again {
			m.enqueue(e, kList)
		}
	case errors.Is(i.Err, zk.ErrNoNode):
		m.loaded(e) // it went: its data watch says so
	default:
		m.failed(o, e, kList, i.Err)
	}
}

// listing applies e's children as a listing made at tick issued saw them.
func (m *machine) listing(o *out, e *entry, names []string, issued uint64) {
	now := make(map[string]struct{}, len(names))
	for _, n := range names {
		now[n] = struct{}{}
	}
	for _, n := range slices.Sorted(maps.Keys(e.kids)) {
		if _, ok := now[n]; ok {
			continue
		}
		k := m.nodes[zk.Join(e.path, n)]
		switch {
		case k == nil:
		case k.present && k.readAnswered >= issued:
			// Seen after the listing was made: it may be the newer; look
			// again before removing it.
			k.kept = true
			now[n] = struct{}{}
			m.enqueue(k, kData)
		default:
			m.remove(o, k, false)
		}
	}
	listed := make(map[string]struct{}, len(names))
	for _, n := range names {
		listed[n] = struct{}{}
	}
	for _, n := range slices.Sorted(maps.Keys(now)) {
		k := m.nodes[zk.Join(e.path, n)]
		_, named := listed[n]
		switch {
		case k == nil:
			m.enqueue(m.add(zk.Join(e.path, n), e.depth+1), kData)
		case named:
			k.kept = false
			if !k.present && k.readCmd == 0 {
				m.enqueue(k, kData) // named again while absent: look again
			}
		}
	}
	e.kids = now
}

func (m *machine) existsRead(o *out, i existsRead) {
	e, _, ok := m.answered(i.Cmd, readSlot)
	if !ok {
		return
	}
	switch {
	case i.Err == nil && i.Exists:
		e.readAgain = false
		m.enqueue(e, kData)
	case i.Err == nil:
		e.watchCmd = i.Cmd
		m.loaded(e) // absent, and waited for
		if e.readAgain {
			e.readAgain = false
			m.enqueue(e, kData)
		}
	default:
		m.failed(o, e, kExists, i.Err)
	}
}

func (m *machine) fired(o *out, i fired) {
	e := m.nodes[i.Path]
	switch {
	case e == nil:
	case e.watchCmd == i.Cmd:
		e.watchCmd = 0
		switch i.Type {
		case zk.EventNodeDataChanged, zk.EventNodeCreated:
			m.enqueue(e, kData)
		case zk.EventNodeDeleted:
			m.gone(o, e, e.watchIssued)
		}
	case e.kidsWatch == i.Cmd:
		e.kidsWatch = 0
		if i.Type == zk.EventNodeChildrenChanged {
			m.enqueue(e, kList)
		}
	}
}

// failed: request k of e failed. The connection's errors ask again (once
// it is back); the session's end and a closed connection ask nothing (a
// LOST or CLOSED follows); any other error is published as FAILED and
// the node is left as it was.
func (m *machine) failed(o *out, e *entry, k kind, err error) {
	switch {
	case retryable(err):
		m.enqueue(e, k)
	case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosed):
	default:
		m.loaded(e)
		o.Events = append(o.Events, events.Event{Type: events.Failed, State: m.State(), Node: e.path, Err: err})
	}
}

func retryable(err error) bool { return errors.Is(err, zk.ErrConnectionLoss) }

// add makes the entry of a named node.
func (m *machine) add(path string, depth int) *entry {
	e := &entry{path: path, depth: depth, loading: !m.initialized}
	if e.loading {
		m.loading++
	}
	m.nodes[path] = e
	return e
}

// loaded: e's first load is done.
func (m *machine) loaded(e *entry) {
	if e.loading {
		e.loading = false
		m.loading--
	}
}

// remove publishes the removal of e and what is under it (the deepest
// first); unless keep, e is forgotten too.
func (m *machine) remove(o *out, e *entry, keep bool) {
	for _, n := range slices.Sorted(maps.Keys(e.kids)) {
		if k := m.nodes[zk.Join(e.path, n)]; k != nil {
			m.remove(o, k, false)
		}
	}
	e.kids, e.listed, e.listCmd, e.listQ, e.listAgain, e.kidsWatch = nil, false, 0, false, false, 0
	if e.present {
		e.present = false
		n := m.cfg.View.remove(e.path)
		m.publish(o, events.NodeRemoved, e.path, n.Data, e.version)
	}
	if keep {
		return
	}
	m.loaded(e)
	delete(m.nodes, e.path)
	if q := m.nodes[zk.Parent(e.path)]; q != nil && e.path != m.cfg.Path {
		delete(q.kids, zk.Base(e.path))
	}
}

// enqueue asks for request k of e: made when there is room in flight and
// the connection is up; when one of its kind is in flight, once it is
// answered.
func (m *machine) enqueue(e *entry, k kind) {
	if k == kList {
		switch {
		case e.listCmd != 0:
			e.listAgain = true
		case !e.listQ:
			e.listQ = true
			m.queue = append(m.queue, queued{e.path, k})
		}
		return
	}
	switch {
	case e.readCmd != 0:
		e.readAgain = true
	case !e.dataQ:
		e.dataQ = true
		m.queue = append(m.queue, queued{e.path, k})
	}
}

// pump makes the queued requests there is room for.
func (m *machine) pump(o *out) {
	for !m.down && len(m.inflight) < m.cfg.MaxInFlight && len(m.queue) > 0 {
		q := m.queue[0]
		m.queue[0] = queued{}
		m.queue = m.queue[1:]
		e := m.nodes[q.path]
		if e == nil {
			continue
		}
		if q.kind == kList {
			if !e.listQ {
				continue
			}
			e.listQ = false
			m.cmds++
			e.listCmd = m.cmds
			o.Commands = append(o.Commands, readKids{Cmd: m.cmds, Path: e.path})
		} else {
			if !e.dataQ {
				continue
			}
			e.dataQ = false
			m.cmds++
			e.readCmd = m.cmds
			if q.kind == kExists {
				o.Commands = append(o.Commands, watchExists{Cmd: m.cmds, Path: e.path})
			} else {
				o.Commands = append(o.Commands, readData{Cmd: m.cmds, Path: e.path})
			}
		}
		m.inflight[m.cmds] = pending{path: e.path, issued: m.tick}
	}
	if len(m.queue) == 0 {
		m.queue = nil // let go of the backing array
	}
}

// show writes e's node to the view.
func (m *machine) show(e *entry, data []byte, st zk.Stat) {
	if m.hidden(e.path) {
		return
	}
	m.cfg.View.set(Node{Path: e.path, Data: data, Stat: st})
}

// restat writes e's newer Stat, of the same data (mzxid), to the view:
// a child came or went. No event: the data did not change.
func (m *machine) restat(e *entry, st zk.Stat) {
	if m.hidden(e.path) {
		return
	}
	m.cfg.View.restat(e.path, st)
}

func (m *machine) hidden(path string) bool { return m.cfg.HideRoot && path == m.cfg.Path }

func (m *machine) publish(o *out, t events.Type, path string, data []byte, version int32) {
	if m.hidden(path) {
		return
	}
	o.Events = append(o.Events, events.Event{Type: t, State: m.State(), Node: path, Data: data, Version: version})
}

func (m *machine) event(o *out, t events.Type) {
	o.Events = append(o.Events, events.Event{Type: t, State: m.State()})
}

// stop answers the waiting calls with ErrClosed and ends the machine.
func (m *machine) stop(o *out) {
	for _, r := range m.waiters {
		o.Replies = append(o.Replies, runtime.Reply{Req: r, Err: ErrClosed})
	}
	m.waiters, m.stopped = nil, true
	m.event(o, events.StopStart)
	m.fsm.Fire(trStopped)
	m.event(o, events.StopComplete)
	o.Done = true
}

// Diagram is the caches' machine as a Mermaid state diagram.
func Diagram() string {
	m, err := newMachine(config{Path: "/"})
	if err != nil {
		return err.Error()
	}
	return m.fsm.Mermaid()
}
