package queue

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// config is what a consumer's machine is made for.
type config struct {
	Path      string // the queue's path
	ClaimData []byte // what our claims hold (the handle's id)
	SessionID int64  // the connection's session when the machine starts
}

// readBatch: how many items' data a consumer reads ahead at once (see
// readAhead). It bounds the data cached ahead: readBatch items.
const readBatch = 4

// The machine's states: START before its first listing, DETERMINE while
// a listing is in flight, READY with the queue's items cached and watched,
// FAILED after the session was lost (until the next listing), STOP once
// shut down.
var states = []events.State{events.StateStart, events.StateDetermine, events.StateReady, events.StateFailed, events.StateStop}

const (
	trList    runtime.Trigger = "list"
	trListed  runtime.Trigger = "listed"
	trLost    runtime.Trigger = "lost"
	trStopped runtime.Trigger = "stopped"
)

var transitions = []runtime.Transition{
	{Trigger: trList, From: []events.State{events.StateStart, events.StateReady, events.StateFailed, events.StateDetermine}, To: events.StateDetermine},
	{Trigger: trListed, From: []events.State{events.StateDetermine}, To: events.StateReady},
	{Trigger: trLost, From: []events.State{events.StateStart, events.StateDetermine, events.StateReady, events.StateFailed}, To: events.StateFailed},
	{Trigger: trStopped, From: []events.State{events.StateStart, events.StateDetermine, events.StateReady, events.StateFailed}, To: events.StateStop},
}

// machine is one queue handle's consumer and producer: a pure machine,
// (state, input) → (state, commands, events, replies). It keeps a sorted
// cache of the queue's items, fed by one child watch, and gives its
// waiting calls the next item by the consumer rule (see candidate).
type machine struct {
	cfg       config
	fsm       *runtime.FSM
	session   int64
	connected bool
	nextCmd   uint64

	entries    map[string]*entry
	order      []*entry          // entries, sorted by compareItems, and some dead ones
	head       int               // order[:head] are dead
	dead       int               // dead entries in order
	gone       map[string]uint64 // items known gone → the listing count when learnt
	dir        int64             // the queue node's czxid at the last listing (0: unknown)
	lists      uint64            // listings issued
	listing    bool              // a listing is in flight
	listSynced bool              // the listing in flight was made after a sync
	synced     uint64            // the last listing made after a sync that completed
	listed     bool              // a listing completed: the cache means something
	watchArmed bool              // our child watch is set
	stale      bool              // the children changed since the last listing

	takers       []*taker          // calls waiting for an item, in arrival order
	claims       map[string]claim  // our claims, by item
	acks         map[string]ackOp  // endClaim in flight, by item
	joints       map[uint64]*joint // calls whose ack went in one multi with the next claim
	uncert       map[string]bool   // items whose last write of ours has an unknown outcome
	owed         int               // writes in flight the shutdown waits for
	closing      uint64            // the shutdown call, once one came
	connGone     bool              // the connection was closed
	restore      map[string][]byte // items taken for a withdrawn call, to put back
	restoreLater []string          // put-backs the connection failed, sent again once it is up
}

// entry is one cached item.
type entry struct {
	itemName
	data    []byte
	hasData bool
	version int32  // the item's data version as read, or as our claim left it (see claimItem)
	taker   *taker // the call it is being taken or claimed for
	mine    bool   // we hold its claim (an Item is out)
	others  bool   // another consumer holds its claim
	// The commands in flight on it (0: none): our read of its data, our
	// remove or claim, our watch on another consumer's claim. A reply is
	// taken only from the command in flight: one for an entry made again
	// since is not its.
	read, write, watch uint64
	again              bool // its claim went away: the next delivery is a redelivery
	// ours: we gave its claim back unclaimed (see ackOp.back): the next
	// claim finds a claim before it, and is no redelivery.
	ours bool
	dead bool // gone from the queue (and from entries)
	// retried: our delete, claim or ack of it is made again after a lost
	// reply, the check having found the first not applied; the first may
	// land yet, and be what the second finds: a miss of the second's
	// target (the item or claim gone, the claim there) is checked again.
	retried bool
}

// claim is one of ours: the session it was made on, the version it left.
type claim struct {
	session int64
	version int32
}

// ackOp is an endClaim in flight, command cmd: for the call req (0: the
// machine's own, giving back a claim no one waits for).
type ackOp struct {
	cmd  uint64
	req  uint64
	nack bool
	back bool // the give-back of a claim no call took: no NACKED, no redelivery
}

// joint is an ack (or nack) call with Next whose ack went out in one multi
// with the claim of the next item, answered once both parts are: the ack
// part under the call's request id, the claim part (a taker) under that
// id with claimPart set.
type joint struct {
	ackDone, claimDone bool
	ackErr             error
	next               taken // the next item, claimed (Name "": none)
}

// claimPart marks the request id of a joint's claim part.
const claimPart = 1 << 63

// errNotApplied answers the part of an endClaim with Next whose multi
// failed on the other part's op: nothing of it was applied.
var errNotApplied = errors.New("not applied: the multi failed on another op")

// taker is a waiting call.
type taker struct {
	req       uint64
	kind      takeKind
	try       bool   // ErrEmpty at once when the cache has nothing (see takeCall)
	came      uint64 // the listings issued when it came: a synced one after is fresh for it (see fresh)
	entry     *entry // the item it is being given, if any
	withdrawn bool   // its caller stopped waiting; what it gets is given back
}

// taken is the reply value of a take or a claim.
type taken struct {
	Name    string
	Data    []byte
	Session int64 // the claim's session
}

// newMachine returns a machine for cfg.
func newMachine(cfg config) (*machine, error) {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		return nil, err
	}
	return &machine{
		cfg: cfg, fsm: f, session: cfg.SessionID, connected: cfg.SessionID != 0,
		entries: make(map[string]*entry), gone: make(map[string]uint64),
		claims: make(map[string]claim), acks: make(map[string]ackOp), uncert: make(map[string]bool), joints: make(map[uint64]*joint),
		restore: make(map[string][]byte),
	}, nil
}

// State is the machine's state.
func (m *machine) State() events.State { return m.fsm.Current() }

// Bug is the first illegal transition the machine fired (nil: none); the
// Shell reports it as a FAILED event.
func (m *machine) Bug() error { return m.fsm.Bug() }

// out collects one step's output.
type out = runtime.Output[command]

// Start begins: nothing is read until a call needs it.
func (m *machine) Start() out {
	var o out
	m.event(&o, events.Start, "", nil)
	return o
}

// Step handles one input.
func (m *machine) Step(in input) out {
	var o out
	switch i := in.(type) {
	case takeCall:
		if m.closing != 0 {
			m.reply(&o, i.Req, nil, ErrClosed)
			break
		}
		m.takers = append(m.takers, &taker{req: i.Req, kind: i.Kind, try: i.Try, came: m.lists})
	case offerCall:
		if m.closing != 0 {
			m.reply(&o, i.Req, nil, ErrClosed)
			break
		}
		m.owed++
		o.Commands = append(o.Commands, createItems{Cmd: m.cmd(), offerCall: i})
	case lenCall:
		o.Commands = append(o.Commands, countItems{Cmd: m.cmd(), lenCall: i})
	case ackCall:
		m.ack(&o, i)
	case runtime.Cancel:
		m.cancel(i.Req)
	case refused:
		m.refused(&o, i.Taken)
	case runtime.Shutdown:
		m.shutdown(&o, i.Req)
	case runtime.Handover:
		m.handover(&o, i.Req)
	case runtime.SessionChange:
		m.sessionChange(&o, i)
	case listed:
		m.listedItems(&o, i)
	case childrenChanged:
		m.watchArmed, m.stale = false, true
	case dataRead:
		m.dataRead(&o, i)
	case removed:
		m.wrote(&o, i.Cmd, i.Name, i.Err, false, 0, 0)
	case claimed:
		m.wrote(&o, i.Cmd, i.Name, i.Err, true, i.Session, i.Version)
	case claimWatched:
		m.claimSeen(i.Cmd, i.Name, i.Err == nil && i.Exists, i.Err == nil && !i.Exists)
	case claimGone:
		m.claimSeen(i.Cmd, i.Name, false, i.Deleted)
	case acked:
		m.acked(&o, i)
	case checked:
		m.checked(&o, i)
	case offered:
		m.offered(&o, i)
	case restored:
		m.restored(&o, i)
	case counted:
		m.reply(&o, i.Req, i.N, i.Err)
	}
	m.pump(&o)
	m.finishShutdown(&o)
	return o
}

// pump gives the waiting calls what the cache has, and asks for what it
// lacks: a listing, an item's data, a watch.
func (m *machine) pump(o *out) {
	if m.closing != 0 || !m.connected {
		return
	}
	needList, needSync := !m.listed && len(m.takers) > 0, false
	givingBack := m.givingBack() // it comes first: takers wait for it
	for _, t := range slices.Clone(m.takers) {
		if e := t.entry; e != nil {
			m.advance(o, e) // again, if a lost connection failed its read
			continue
		}
		if t.withdrawn {
			m.dropTaker(t)
			continue
		}
		if t.req&claimPart != 0 { // a joint's claim that did not go through: no next item
			m.answer(o, t, nil, nil)
			continue
		}
		if givingBack {
			continue
		}
		e := m.candidate()
		switch {
		case e == nil && (!m.listed || m.stale || m.listing):
			needList = needList || !m.listing
		case e == nil && t.try: // a sharded handle's look at one shard: no sync
			m.answer(o, t, nil, ErrEmpty)
		case e == nil && (t.kind == kindPeek || t.kind == kindPoll) && !m.fresh(t):
			needSync = true
		case e == nil && (t.kind == kindPeek || t.kind == kindPoll):
			m.answer(o, t, nil, ErrEmpty)
		case e == nil:
			needList = needList || !m.watchArmed // wait for the watch
		case e.prio > 0 && !m.fresh(t): // a lower number offered meanwhile must not be passed over
			needSync = true
		case t.kind == kindWait:
			m.answer(o, t, nil, nil)
		case t.kind == kindPeek:
			if e.hasData {
				m.answer(o, t, taken{Name: e.name, Data: e.data}, nil)
			} else {
				m.readData(o, e)
			}
		default:
			e.taker, t.entry = t, e
			m.advance(o, e)
		}
	}
	if len(m.takers) > 0 {
		m.readAhead(o)
	}
	switch {
	case m.listing:
	case needSync:
		m.list(o, true)
	case needList:
		m.list(o, false)
	}
}

// The consumer rule. A consumer takes or claims the oldest item of its
// sorted cache not known to be taken: not gone, not claimed by another
// consumer, with no write of ours in flight on it. When it loses the race
// (its delete or claim finds the item gone or claimed) it moves on to the
// next; a claim it meets is watched, and when that claim goes (acked: the
// item is gone; nacked or gone with its session: the item is there again)
// the item is free again, and the oldest (a redelivery). Sequence numbers
// grow, so an item becomes free again behind the items a consumer took
// only when it came again or went to no one (put back for a withdrawn
// take, given back unclaimed, our write not applied): the exceptions the
// package doc names. So each consumer takes the items of a priority in
// the queue's order otherwise, with several consumers as with one, and
// every item is tried by every consumer until it is taken: none is left
// behind. A lower priority number always comes first.
//
// candidate is the item a take gets next by that rule (nil: none cached).
func (m *machine) candidate() *entry {
	for i := m.head; i < len(m.order); i++ {
		e := m.order[i]
		if e.dead && i == m.head {
			m.head++
		}
		if m.free(e) {
			return e
		}
	}
	return nil
}

// free: e may be given to a take: in the queue, not being taken, claimed
// by no one, with no write of ours of unknown outcome or ack in flight.
func (m *machine) free(e *entry) bool {
	if e.dead || e.taker != nil || e.mine || e.others {
		return false
	}
	if len(m.uncert) > 0 && m.uncert[e.name] { // (the maps are mostly empty: cheaper)
		return false
	}
	if len(m.acks) > 0 {
		if _, ending := m.acks[e.name]; ending {
			return false
		}
	}
	return true
}

// search is the index of the first entry of order at or after the item
// of priority prio and sequence seq.
func (m *machine) search(prio int64, seq uint32) int {
	at := itemName{prio: prio, seq: seq}
	i, _ := slices.BinarySearchFunc(m.order, at, func(e *entry, at itemName) int { return compareItems(e.itemName, at) })
	return i
}

// readAhead reads the data of the next readBatch items a take would get,
// once the next one has none: a read beside a delete delays it on the
// server, and in batches only one take in readBatch pays that.
func (m *machine) readAhead(o *out) {
	next := m.candidate()
	if next == nil || next.hasData || next.read != 0 {
		return
	}
	for i, n := m.search(next.prio, next.seq), 0; i < len(m.order) && n < readBatch; i++ {
		if e := m.order[i]; m.free(e) {
			m.readData(o, e)
			n++
		}
	}
}

// advance takes the next step for an entry bound to a take or claim: its
// data first, then the delete or the claim (see claimItem).
func (m *machine) advance(o *out, e *entry) {
	switch {
	case e.write != 0 || m.uncert[e.name]:
	case !e.hasData:
		m.readData(o, e)
	case e.taker.kind == kindClaim:
		e.write = m.cmd()
		m.owed++
		o.Commands = append(o.Commands, claimItem{Cmd: e.write, Name: e.name, Data: m.cfg.ClaimData, Item: e.data, Version: e.version})
	default:
		e.write = m.cmd()
		m.owed++
		o.Commands = append(o.Commands, removeItem{Cmd: e.write, Name: e.name})
	}
}

// unbind takes e back from its taker, which waits for another item.
func (m *machine) unbind(e *entry) {
	if e.taker != nil {
		e.taker.entry = nil
		e.taker = nil
	}
}

func (m *machine) readData(o *out, e *entry) {
	if e.hasData || e.read != 0 {
		return
	}
	e.read = m.cmd()
	o.Commands = append(o.Commands, readItem{Cmd: e.read, Name: e.name})
}

// fresh: a listing made after a sync, and issued after t came, completed:
// it shows every item offered before t came.
func (m *machine) fresh(t *taker) bool { return m.synced > t.came }

func (m *machine) list(o *out, synced bool) {
	m.listing, m.listSynced, m.lists = true, synced, m.lists+1
	m.fsm.Fire(trList)
	o.Commands = append(o.Commands, listItems{Cmd: m.cmd(), Sync: synced, Watch: !m.watchArmed})
	m.watchArmed = true // a second watch would fire twice
}

// kept: e stays cached whatever a listing says: a write of ours is bound
// to it, or our ack or nack of it is in flight.
func (m *machine) kept(e *entry) bool {
	_, ending := m.acks[e.name]
	return e.taker != nil || e.mine || e.write != 0 || ending || m.uncert[e.name]
}

func (m *machine) listedItems(o *out, i listed) {
	m.listing = false
	if i.Err != nil {
		m.watchArmed = false
		if !errors.Is(i.Err, zk.ErrConnectionLoss) && !errors.Is(i.Err, zk.ErrSessionExpired) && !errors.Is(i.Err, zk.ErrClosed) {
			m.event(o, events.Failed, "", i.Err)
			m.failTakers(o, i.Err)
		}
		return
	}
	m.watchArmed = i.Watched
	m.stale, m.listed = false, true
	m.fsm.Fire(trListed)
	// Recreated: the queue's node was deleted (an empty container is
	// reaped) and created again; its sequence numbers started over, and
	// the names we know are those of old items. Forget them, but for
	// those a write of ours is bound to.
	recreated := i.Dir != 0 && m.dir != 0 && i.Dir != m.dir
	if recreated {
		clear(m.gone)
	}
	m.dir = cmp.Or(i.Dir, m.dir)
	present := make(map[string]bool, len(i.Children))
	for _, c := range i.Children {
		present[c] = true
	}
	for name, e := range m.entries {
		if (recreated || !present[name]) && !m.kept(e) {
			delete(m.entries, name)
		}
	}
	for _, c := range i.Children {
		n, ok := parseItem(c)
		if _, gone := m.gone[c]; !ok || gone || m.entries[c] != nil {
			continue
		}
		m.entries[c] = &entry{itemName: n}
	}
	for name, at := range m.gone {
		if at < m.lists { // this listing went out after we learnt it
			delete(m.gone, name)
		}
	}
	m.order, m.head, m.dead = m.order[:0], 0, 0
	for _, e := range m.entries {
		m.order = append(m.order, e)
	}
	slices.SortFunc(m.order, func(a, b *entry) int { return compareItems(a.itemName, b.itemName) })
	if m.listSynced {
		m.synced = m.lists
	}
}

// markGone forgets an item that is no longer in the queue.
func (m *machine) markGone(e *entry) {
	delete(m.entries, e.name)
	delete(m.uncert, e.name)
	m.gone[e.name] = m.lists
	// Removed lazily: order keeps it, marked, until half of it is dead.
	e.dead = true
	if m.dead++; m.dead > 64 && m.dead > len(m.order)/2 {
		m.order = slices.DeleteFunc(m.order, func(e *entry) bool { return e.dead })
		m.head, m.dead = 0, 0
	}
}

func (m *machine) dataRead(o *out, i dataRead) {
	e := m.entries[i.Name]
	if e == nil || e.read != i.Cmd {
		return
	}
	e.read = 0
	switch {
	case i.Err == nil:
		e.data, e.hasData, e.version = i.Data, true, i.Version
	case errors.Is(i.Err, zk.ErrNoNode):
		if e.write != 0 || e.mine || m.uncert[e.name] {
			return // our own remove, claim or ack took it; its reply says the rest
		}
		m.unbind(e)
		m.markGone(e)
	}
}

// wrote handles the answer to our delete of item name, or (claim) our
// claim of it, made by command cmd on session (0: it changed meanwhile)
// and leaving the item at version.
func (m *machine) wrote(o *out, cmd uint64, name string, err error, claim bool, session int64, version int32) {
	m.owed--
	e := m.entries[name]
	if e == nil || e.write != cmd {
		return
	}
	e.write = 0
	// What a write made again meets when the first, landed since, made it:
	// the item gone (a delete), our claim there (a claim). What another
	// consumer's claim makes it meet: a child (a delete), a claim.
	ours, others := zk.ErrNoNode, zk.ErrNotEmpty
	if claim {
		ours, others = zk.ErrNodeExists, zk.ErrNodeExists
	}
	switch {
	case err == nil && claim && !m.onOurSession(session):
		// Made on another session than the machine's (the client sends
		// what it had queued on the next one, whose news has not come
		// yet): whose it is, is asked once the session is known.
		m.uncertain(o, e)
	case err == nil && claim:
		m.claimedOurs(o, e, version)
	case err == nil:
		e.retried = false
		m.deliverTaken(o, e, nil)
	case errors.Is(err, ours) && e.retried:
		m.uncertain(o, e) // ours, perhaps: the first write, landed since
	case errors.Is(err, others): // another consumer's claim: move on
		m.unbind(e)
		m.othersClaim(o, e)
	case errors.Is(err, zk.ErrNoNode): // another consumer took it: move on
		m.unbind(e)
		m.markGone(e)
	case errors.Is(err, zk.ErrBadVersion): // a claim's: claimed and given back since read: read again
		e.hasData = false
	case errors.Is(err, errNotApplied), errors.Is(err, zk.ErrNoAuth):
		// Nothing was applied: a joint claim's multi failed on the ack,
		// or the server refused the write for our identity; then the call
		// fails, as another try, on e or the next item, would be refused.
		t := e.taker
		m.unbind(e)
		if t != nil && errors.Is(err, zk.ErrNoAuth) {
			m.answer(o, t, nil, err)
		}
	default:
		m.uncertain(o, e)
	}
}

// deliverTaken gives a removed item to its caller, or puts it back when
// the caller stopped waiting.
func (m *machine) deliverTaken(o *out, e *entry, uncertain error) {
	t := e.taker
	m.markGone(e)
	m.dropTaker(t)
	if t.withdrawn {
		m.restoreItem(o, e.name, e.data)
		return
	}
	m.event(o, events.Taken, m.node(e.name), uncertain)
	m.reply(o, t.req, taken{Name: e.name, Data: e.data}, nil)
}

// restoreItem puts back at its place (its own name) an item we removed
// for a caller that did not take it.
func (m *machine) restoreItem(o *out, name string, data []byte) {
	m.restore[name] = data
	m.owed++
	o.Commands = append(o.Commands, restoreItem{Cmd: m.cmd(), Name: name, Data: data})
}

// restored: an item put back is in the queue again, or is put back once
// the connection is up again (finding itself there if its create landed).
func (m *machine) restored(o *out, i restored) {
	m.owed--
	switch {
	case i.Err == nil || errors.Is(i.Err, zk.ErrNodeExists):
		data := m.restore[i.Name] // cached at once: the takes that waited get it first

		delete(m.restore, i.Name)
		delete(m.gone, i.Name)
		if n, ok := parseItem(i.Name); ok && m.entries[i.Name] == nil {
			e := &entry{itemName: n, data: data, hasData: true}
			m.entries[i.Name] = e
			at := m.search(n.prio, n.seq)
			m.order = slices.Insert(m.order, at, e)
			m.head = min(m.head, at)
		}
	case errors.Is(i.Err, zk.ErrConnectionLoss) || errors.Is(i.Err, zk.ErrSessionExpired):
		if m.connected {
			m.restoreItem(o, i.Name, m.restore[i.Name])
		} else {
			m.restoreLater = append(m.restoreLater, i.Name)
		}
	default:
		delete(m.restore, i.Name)
		m.event(o, events.Failed, m.node(i.Name), fmt.Errorf("%w: putting back an item taken for a withdrawn call: %w", ErrItemLost, i.Err))
	}
}

// givingBack: an item that was never out is on its way back to its
// place: a claim no caller took being given back, an item a take removed
// for no caller being put back, or the delete or claim of a withdrawn
// call still in flight (what it brings is given back). It comes before
// the items a take would get now: until it is back, takes and claims
// wait, or they would hand the items out of order. (A nacked item was
// out: it comes again later, as any redelivery does.)
func (m *machine) givingBack() bool {
	if len(m.restore) > 0 {
		return true
	}
	for _, a := range m.acks {
		if a.back {
			return true
		}
	}
	return slices.ContainsFunc(m.takers, func(t *taker) bool { return t.withdrawn && t.entry != nil })
}

func (m *machine) offered(o *out, i offered) {
	m.owed--
	if i.Err == nil {
		for _, n := range i.Names {
			m.event(o, events.Offered, m.node(n), nil)
		}
	}
	m.reply(o, i.Req, i.Names, i.Err)
}

// cancel withdraws call req. A take whose write is in flight is marked
// withdrawn: what the write brings is given back (see givingBack); one
// whose write was not sent leaves its item where it was.
func (m *machine) cancel(req uint64) {
	delete(m.joints, req) // its ack goes on; no one waits for the answer
	for _, t := range m.takers {
		if t.req&^claimPart != req {
			continue
		}
		if e := t.entry; e != nil {
			if e.write != 0 || m.uncert[e.name] || e.mine {
				t.withdrawn = true
				return
			}
			m.unbind(e)
		}
		m.dropTaker(t)
		return
	}
}

func (m *machine) sessionChange(o *out, i runtime.SessionChange) {
	switch i.State {
	case zk.StateSuspended:
		m.connected = false
		m.event(o, events.Suspended, "", nil)
	case zk.StateReconnected:
		m.connected = true
		m.event(o, events.Reconnected, "", nil)
		m.resend(o)
		m.giveBackClaims(o)
		for _, e := range m.order {
			if !e.dead && e.others && e.watch == 0 {
				m.othersClaim(o, e)
			}
		}
	case zk.StateLost:
		m.connected = false
		m.sessionLost(o)
	case zk.StateConnected:
		if m.session != 0 && m.session != i.SessionID {
			m.sessionLost(o) // a new session with no LOST seen before
		}
		m.session, m.connected = i.SessionID, true
		m.resend(o)
		if m.listed && !m.listing {
			m.list(o, false) // the cache, and its watch, again
		}
	case zk.StateClosed:
		m.connected, m.connGone = false, true
		clear(m.claims) // gone with the session
		m.failTakers(o, ErrClosed)
	}
}

// resend asks, once the connection is back, what became of the writes
// whose replies were lost, and sends again the put-backs it failed.
func (m *machine) resend(o *out) {
	for _, name := range slices.Sorted(maps.Keys(m.uncert)) {
		m.sendCheck(o, name)
	}
	later := m.restoreLater
	m.restoreLater = nil
	for _, name := range later {
		m.restoreItem(o, name, m.restore[name])
	}
}

// sessionLost: the session ended, and with it our claims (their items
// come again, to us or to another consumer) and our watches.
func (m *machine) sessionLost(o *out) {
	if m.session == 0 {
		return
	}
	m.session = 0
	m.fsm.Fire(trLost)
	m.event(o, events.Lost, "", ErrSessionLost)
	for _, e := range m.order {
		if e.mine || e.others {
			e.again = true // it comes again, claimed by no one
		}
		e.mine, e.others, e.watch = false, false, 0
	}
	clear(m.claims)
	m.watchArmed, m.stale = false, true
}

func (m *machine) failTakers(o *out, err error) {
	for _, t := range slices.Clone(m.takers) {
		if t.entry != nil {
			continue
		}
		m.answer(o, t, nil, err)
	}
}

// answer drops taker t and replies to its call.
func (m *machine) answer(o *out, t *taker, v any, err error) {
	m.dropTaker(t)
	m.reply(o, t.req, v, err)
}

func (m *machine) dropTaker(t *taker) {
	if i := slices.Index(m.takers, t); i >= 0 {
		m.takers = slices.Delete(m.takers, i, i+1)
	}
}

// shutdown fails the waiting calls, gives back our claims and ends the
// machine once nothing it still owes is in flight.
func (m *machine) shutdown(o *out, req uint64) {
	if m.closing != 0 {
		m.reply(o, req, nil, nil)
		return
	}
	m.closing = req
	m.fsm.Fire(trStopped)
	m.event(o, events.StopStart, "", nil)
	for _, t := range m.takers {
		t.withdrawn = true
	}
	m.failTakers(o, ErrClosed)
	m.giveBackClaims(o)
}

// giveBackClaims nacks the claims of the Items still out when the
// machine shuts down: their items come again.
func (m *machine) giveBackClaims(o *out) {
	if m.closing == 0 || !m.connected {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(m.claims)) {
		if _, ending := m.acks[name]; !ending {
			m.endClaim(o, name, ackOp{nack: true})
		}
	}
}

func (m *machine) finishShutdown(o *out) {
	if m.closing == 0 || m.owed > 0 || o.Done {
		return
	}
	if (len(m.claims) > 0 || len(m.uncert) > 0 || len(m.restoreLater) > 0) && !m.connGone {
		return // until the session is back (or Close's timeout hands them over)
	}
	m.event(o, events.StopComplete, "", nil)
	m.reply(o, m.closing, nil, nil)
	o.Done = true
}

// handover answers with what is left to delete: our claims.
func (m *machine) handover(o *out, req uint64) {
	l := runtime.Leftovers{Session: m.session}
	for name, c := range m.claims {
		if c.session == m.session {
			l.Nodes = append(l.Nodes, zk.Join(m.node(name), ClaimName))
		}
	}
	slices.Sort(l.Nodes)
	m.reply(o, req, l, nil)
	o.Done = true
}

func (m *machine) node(name string) string { return zk.Join(m.cfg.Path, name) }

func (m *machine) cmd() uint64 {
	m.nextCmd++
	return m.nextCmd
}

func (m *machine) reply(o *out, req uint64, v any, err error) {
	if req == 0 {
		return // the machine's own
	}
	if j := m.joints[req&^claimPart]; j != nil {
		if req&claimPart != 0 {
			j.claimDone = true
			if t, ok := v.(taken); ok && err == nil {
				j.next = t
			}
		} else {
			j.ackDone, j.ackErr = true, err
		}
		if !j.ackDone || !j.claimDone {
			return
		}
		req &^= claimPart
		delete(m.joints, req)
		v, err = j.next, j.ackErr
	} else if req&claimPart != 0 {
		return // a joint's claim part whose caller stopped waiting
	}
	o.Replies = append(o.Replies, runtime.Reply{Req: req, Value: v, Err: err})
}

func (m *machine) event(o *out, t events.Type, node string, err error) {
	o.Events = append(o.Events, events.Event{Type: t, State: m.fsm.Current(), Node: node, Err: err})
}

// Diagram renders the machine's states and transitions as a Mermaid state
// diagram (docs/diagrams is generated from it).
func Diagram() string {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		return err.Error()
	}
	return f.Mermaid()
}
