package queue

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

// Config is what a consumer's Machine is made for.
type Config struct {
	Path      string // the queue's path
	ClaimData []byte // what our claims hold (the handle's id)
	SessionID int64  // the connection's session when the machine starts
	// ClaimAhead: how long the item an Ack claimed ahead (see claimAhead)
	// waits for a TakeItem before it is given back; 0: Ack claims nothing.
	ClaimAhead time.Duration
}

// Consumers racing for the head spread over lanes: an item's lane is its
// sequence modulo lanes. A consumer that loses a race for an item (its
// delete, claim or read finds it gone or claimed) avoids that lane from
// that item on, for its next laneMemory items, and takes the oldest item
// it does not avoid. So each lane ends with one consumer, and consumers
// stop deleting items others already took (their caches learn of those
// only from a failed write or read, or a listing).
//
// A consumer left with nothing it does not avoid lists the queue again and
// steals the lane with the most items, from its oldest: it does not avoid
// the lane for its next stealInsist lost races, while the consumer it took
// the lane from, which loses one race to it, avoids the lane from that
// item on. (A thief that gave up at its first lost race met the holder on
// the item it was deleting, lost, and listed again, often several times in
// a row; one that found no lane walked its stale cache of one, a failed
// read per item. One that left the holder the lane's first items took them
// itself, late, when the holder stopped taking.) A consumer that would
// pass over laneScan items it avoids in one lane does the same, so no lane
// starves, and a lane no one holds comes back when the belief expires.
// Each consumer takes a lane's items in order, but may take an item before
// older ones of another lane. laneScan bounds how far a lane falls behind
// the others: a consumer holding more lanes than the rest advances each
// more slowly. (At 256, while consumers took from a queue its producers
// were filling, a lane fell 2,000 sequence numbers behind; one in ten
// items reached its consumer after a later one of its producer. At 64, one
// in a hundred, with no fewer items taken per second.) Listing again to
// learn which items are gone costs more than the failed writes it saves
// (measured: a listing per 16 items passed over made 4 consumers slower
// than one). Without a lost race nothing is avoided: a lone consumer takes
// the head, in order.
const (
	lanes       = 8
	laneMemory  = 64
	laneScan    = 64
	stealInsist = 2 * readBatch
)

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
	{Trigger: trStopped, From: states, To: events.StateStop},
}

// Machine is one queue handle's consumer and producer: a pure machine,
// (state, input) → (state, commands, events, replies). It keeps a sorted
// cache of the queue's items, fed by one child watch, and gives the head
// to its waiting calls: a take deletes it (the consumer whose delete
// succeeds owns it), a claim creates an ephemeral claim under it. The next
// item's data is read while the head's delete or claim is in flight.
type Machine struct {
	cfg       Config
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
	freshNext  bool              // a takers wants a listing made after a sync
	listed     bool              // a listing completed: the cache means something
	watchArmed bool              // our child watch is set
	stale      bool              // the children changed since the last listing
	lanes      [lanes]lane       // what we believe of each lane
	wins       uint64            // items we took or claimed

	takers []*taker         // calls waiting for an item, in arrival order
	claims map[string]int64 // our claims: item → the session they were made on
	acks   map[string]ackOp // endClaim in flight, by item
	// heldAcks: acks and nacks asked while the connection was down. Sent
	// then, a request waits in the client and goes out on whatever session
	// comes next: after an expiry, on a new one, where its delete of the
	// claim node would delete another consumer's claim of the same item
	// (and the item with it). They go once the same session is back, and
	// are refused (ErrClaimLost) when it is lost.
	heldAcks []ackCall
	joints   map[uint64]*joint // calls whose ack went in one multi with the next claim
	// ahead: the item an Ack claimed for the next TakeItem (see
	// claimAhead), claimed and read, that no call has taken yet; aheadWait
	// is the waitAhead command whose end gives it back.
	ahead     *entry
	aheadWait uint64
	uncert    map[string]bool   // items whose last write of ours has an unknown outcome
	offers    map[uint64]uint64 // createItems in flight → the call
	counts    map[uint64]uint64 // countItems in flight → the call
	owed      int               // writes in flight the shutdown waits for
	closing   uint64            // the shutdown call, once one came
	connGone  bool              // the connection was closed
	restore   map[string][]byte // items taken for a withdrawn call, to put back
	// restoreLater: put-backs the connection failed, sent again once it
	// is up.
	restoreLater []string
}

// entry is one cached item.
type entry struct {
	itemName
	data    []byte
	hasData bool
	reading bool
	// claimRead: the read sent behind our claim (0: none). Only its data
	// is delivered with the claim: a read sent before it may be of
	// another item of the same name (see ensureQueue).
	claimRead uint64
	taker     *taker // the call it is being taken or claimed for
	busy      bool   // our remove or claim of it is in flight
	mine      bool   // we hold its claim (an Item is out)
	others    bool   // another consumer holds its claim
	watching  bool   // our watch on that claim is set
	again     bool   // its claim went away: the next delivery is a redelivery
	dead      bool   // gone from the queue (and from entries)
	// retried: our delete, claim or ack of it is made again after a lost
	// reply, the check having found the first not applied; the first may
	// land yet, and be what the second finds: a miss of the second's
	// target (the item or claim gone, the claim there) is checked again.
	retried bool
}

// lane is what a consumer believes of one lane (see lanes), in items it
// has won (Machine.wins): an item of the lane is avoided when it is at or
// after avoidFrom while wins < avoidUntil (another consumer took
// avoidFrom). insist: lost races left before one makes us avoid it.
type lane struct {
	avoidUntil uint64
	avoidFrom  uint32
	insist     int
}

// ackOp is an endClaim in flight: for the call req (0: the machine's own,
// giving back a claim no one waits for).
type ackOp struct {
	req     uint64
	nack    bool
	back    bool  // the give-back of an item claimed ahead that no call took: no NACKED, no redelivery
	session int64 // the claim's session when it was sent
}

// joint is an ack (or nack) call with Next whose ack went out in one multi
// with the claim of the next item: the call is answered once both parts
// are. The ack part answers to the call's request id, the claim part (a
// taker) to that id with claimPart set.
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

// errClaimSessionEnded answers an endClaim not sent because the
// connection's session is no longer the claim's: the claim went with its
// session, as when the multi finds it gone (zk.ErrNoNode), and nothing
// was applied.
var errClaimSessionEnded = fmt.Errorf("%w: the claim's session ended; not sent", zk.ErrNoNode)

// taker is a waiting call.
type taker struct {
	req       uint64
	kind      takeKind
	ahead     bool   // no call yet: an Ack's claim of the next item (see claimAhead)
	fresh     bool   // a listing made after a sync completed since it came
	wantFresh bool   // it needs one
	freshList uint64 // the synced listing in flight it waits for
	entry     *entry // the item it is being given, if any
	withdrawn bool   // its caller stopped waiting; what it gets is given back
}

// taken is the reply value of a take or a claim.
type taken struct {
	Name    string
	Data    []byte
	Session int64 // the claim's session
}

// Errors the machine answers with; the handle exports them.
var errs = struct{ empty, claimLost, closed, sessionLost error }{ErrEmpty, ErrClaimLost, ErrClosed, ErrSessionLost}

// NewMachine returns a machine for cfg.
func NewMachine(cfg Config) (*Machine, error) {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		return nil, err
	}
	return &Machine{
		cfg: cfg, fsm: f, session: cfg.SessionID, connected: cfg.SessionID != 0,
		entries: make(map[string]*entry), gone: make(map[string]uint64),
		claims: make(map[string]int64), acks: make(map[string]ackOp), uncert: make(map[string]bool), joints: make(map[uint64]*joint),
		offers: make(map[uint64]uint64), counts: make(map[uint64]uint64), restore: make(map[string][]byte),
	}, nil
}

// State is the machine's state.
func (m *Machine) State() events.State { return m.fsm.Current() }

// Mermaid renders the machine's states as a Mermaid diagram.
func (m *Machine) Mermaid() string { return m.fsm.Mermaid() }

// out collects one step's output.
type out = runtime.Output[Command]

// Start begins: nothing is read until a call needs it.
func (m *Machine) Start() out {
	var o out
	m.event(&o, events.Start, "", nil)
	return o
}

// Step handles one input.
func (m *Machine) Step(in Input) out {
	var o out
	switch i := in.(type) {
	case takeCall:
		if m.closing != 0 {
			m.reply(&o, i.Req, nil, errs.closed)
			break
		}
		if m.adopt(i) || i.Kind == kindClaim && m.takeAhead(&o, i.Req) {
			break
		}
		if i.Kind != kindClaim {
			m.giveAheadBack(&o) // a plain take, poll or peek: it comes to it like any other item
		}
		m.takers = append(m.takers, &taker{req: i.Req, kind: i.Kind})
	case offerCall:
		if m.closing != 0 {
			m.reply(&o, i.Req, nil, errs.closed)
			break
		}
		c := m.cmd()
		m.offers[c] = i.Req
		m.owed++
		o.Commands = append(o.Commands, createItems{Cmd: c, Prefix: i.Prefix, Items: i.Items})
	case lenCall:
		c := m.cmd()
		m.counts[c] = i.Req
		o.Commands = append(o.Commands, countItems{Cmd: c})
	case ackCall:
		m.ack(&o, i)
	case cancelReq:
		m.cancel(&o, i.Req)
	case refused:
		m.refused(&o, i.Taken)
	case shutdown:
		m.shutdown(&o, i.Req)
	case handover:
		m.handover(&o, i.Req)
	case sessionChange:
		m.sessionChange(&o, i)
	case listed:
		m.listedItems(&o, i)
	case childrenChanged:
		m.watchArmed, m.stale = false, true
	case dataRead:
		m.dataRead(&o, i)
	case removed:
		m.removed(&o, i)
	case claimed:
		m.claimed(&o, i)
	case claimWatched:
		if e := m.entries[i.Name]; e != nil {
			e.watching = i.Err == nil && i.Exists
			if i.Err == nil && !i.Exists {
				e.others, e.again = false, true
			}
		}
	case claimGone:
		if e := m.entries[i.Name]; e != nil {
			e.watching = false
			if i.Deleted {
				e.others, e.again = false, true
			}
		}
	case acked:
		m.acked(&o, i)
	case checked:
		m.checked(&o, i)
	case offered:
		m.offered(&o, i)
	case restored:
		m.restored(&o, i)
	case aheadWaited:
		m.aheadWaited(&o, i)
	case counted:
		req := m.counts[i.Cmd]
		delete(m.counts, i.Cmd)
		m.reply(&o, req, i.N, i.Err)
	}
	m.pump(&o)
	m.finishShutdown(&o)
	// A take's delete or claim is the write its caller waits for: it goes
	// last. The shell starts one goroutine per command, in order, and the
	// one started last runs first (see runtime.Shell.apply), so the write
	// leaves ahead of the reads made with it: a take's delete is not
	// queued behind the read of the next item, and a claim's read goes
	// out behind the claim, as it should (see advance). (Goroutines on
	// two processors may still swap them: the order is likely, not sure.)
	slices.SortStableFunc(o.Commands, func(a, b Command) int {
		wa, wb := takeWrite(a), takeWrite(b)
		switch {
		case wa == wb:
			return 0
		case wa:
			return 1
		}
		return -1
	})
	return o
}

// pump gives the waiting calls what the cache has, and asks for what it
// lacks: a listing, an item's data, a watch.
func (m *Machine) pump(o *out) {
	if m.closing != 0 || !m.connected {
		return
	}
	needList := !m.listed && len(m.takers) > 0
	// An item on its way back to its place comes before the item any
	// taker would get now: they wait for it.
	givingBack := m.givingBack()
	for _, t := range slices.Clone(m.takers) {
		if e := t.entry; e != nil {
			m.read(o, e) // again, if a lost connection failed it
			continue
		}
		if t.withdrawn || t.ahead {
			// An Ack's claim ahead that did not go through is not tried
			// again: a TakeItem claims for itself.
			m.dropTaker(t)
			continue
		}
		if t.req&claimPart != 0 {
			// A joint's claim that did not go through (the item was gone
			// or claimed, or the multi failed on the ack): the call
			// answers without a next item, and its caller takes one.
			m.dropTaker(t)
			m.reply(o, t.req, nil, nil)
			continue
		}
		if givingBack {
			continue
		}
		e := m.candidate(t)
		switch {
		case e == nil && (!m.listed || m.stale || m.listing):
			needList = needList || !m.listing
		case e == nil && (t.kind == kindPeek || t.kind == kindPoll):
			if !t.fresh {
				t.wantFresh, m.freshNext = true, true
				continue
			}
			if m.aheadOut() {
				continue // not empty: the item claimed ahead comes back
			}
			m.dropTaker(t)
			m.reply(o, t.req, nil, errs.empty)
		case e == nil:
			needList = needList || !m.watchArmed // wait for the watch
		case e.prio > 0 && !t.fresh:
			// An item of a higher priority offered meanwhile must not be
			// passed over: choose after a sync and a listing.
			t.wantFresh, m.freshNext = true, true
		case t.kind == kindPeek:
			if e.hasData {
				m.dropTaker(t)
				m.reply(o, t.req, taken{Name: e.name, Data: e.data}, nil)
			} else {
				m.read(o, e)
			}
		default:
			m.bind(e, t)
			m.advance(o, e)
		}
	}
	// Read ahead: the next items' data comes while the head is taken. A
	// claim reads behind itself (see advance): claims alone read nothing
	// ahead.
	if slices.ContainsFunc(m.takers, func(t *taker) bool { return t.kind != kindClaim }) {
		m.readAhead(o)
	}
	switch {
	case m.listing:
	case m.freshNext:
		m.list(o, true)
	case needList:
		m.list(o, false)
	}
}

// readAhead reads the data of the next readBatch items a take would get,
// once the next one has none and none is being read. A read sent beside a
// take's delete delays that delete on the server (about a sixth of a
// delete's round trip here, measured): read one at a time, every delete
// pays it; read in batches, one take in readBatch does, and the others'
// deletes go alone.
func (m *Machine) readAhead(o *out) {
	if e := m.candidate(nil); e == nil || e.hasData || e.reading {
		return
	}
	for i, n := m.head, 0; i < len(m.order) && n < readBatch; i++ {
		if e := m.order[i]; m.free(e) && !(m.avoiding() && m.avoided(e)) { // not another consumer's lane
			m.read(o, e)
			n++
		}
	}
}

// free: e may be given to a take: in the queue, not being taken, claimed
// by no one, and with no write of ours of unknown outcome on it, nor an
// ack or nack of ours in flight. (An ack sent on a session that ended
// meanwhile fails on the claim gone with it; a claim of ours made on the
// next session before that reply would be taken for the lost one, and
// held by no one.)
func (m *Machine) free(e *entry) bool {
	if e.dead || e.taker != nil || e.mine || e.others {
		return false
	}
	// The maps are mostly empty: the scan for the next item asks this of
	// every entry it passes, and a lookup costs more than all the rest.
	if len(m.uncert) > 0 && m.uncert[e.name] {
		return false
	}
	if len(m.acks) > 0 {
		if _, ending := m.acks[e.name]; ending {
			return false
		}
	}
	return true
}

// takeWrite: c is the delete or claim of an item for a take.
func takeWrite(c Command) bool {
	switch c := c.(type) {
	case removeItem, claimItem:
		return true
	case endClaim:
		return c.Next != ""
	}
	return false
}

// advance takes the next step for an entry bound to a take or claim.
func (m *Machine) advance(o *out, e *entry) {
	if e.busy || m.uncert[e.name] {
		return
	}
	switch {
	case e.taker.kind == kindClaim:
		m.owed++
		m.claimWith(o, e, claimItem{Cmd: m.cmd(), Name: e.name, Data: m.cfg.ClaimData})
	case !e.hasData:
		m.read(o, e)
	default:
		e.busy = true
		m.owed++
		o.Commands = append(o.Commands, removeItem{Cmd: m.cmd(), Name: e.name})
	}
}

// candidate is the item t gets next (nil: none cached, or none it does
// not avoid until a listing says which are left): the head, or after a
// lost race the oldest item it does not avoid (see lanes). With t nil,
// the item the next take would get (for reading ahead).
func (m *Machine) candidate(t *taker) *entry {
	lanePick := (t == nil || t.kind != kindPeek) && m.avoiding()
	var first *entry
	var count [lanes]int // free items passed over, per lane
	for i := m.head; i < len(m.order); i++ {
		e := m.order[i]
		if e.dead && i == m.head {
			m.head++
		}
		if !m.free(e) {
			continue
		}
		switch {
		case first == nil:
			first = e
		case e.prio != first.prio:
			return first // never pass over an item of a lower priority
		}
		if !lanePick || !m.avoided(e) {
			return e
		}
		if count[e.seq%lanes]++; count[e.seq%lanes] == laneScan {
			break
		}
	}
	switch {
	case first == nil:
		return nil
	case m.stale || m.listing:
		return nil // list again: the items passed over may be long gone
	}
	// A listing made since the last change still shows laneScan items we
	// avoid in one lane before any we do not, or only items we avoid:
	// steal the lane with the most.
	best := first.seq % lanes
	for l := range count {
		if count[l] > count[best] {
			best = uint32(l)
		}
	}
	m.steal(best)
	return m.candidate(t)
}

// steal takes lane l over, from its oldest item: the next stealInsist
// races lost in it do not make us avoid it, so the consumer we took it
// from, which loses one race to us and avoids it, leaves it to us.
func (m *Machine) steal(l uint32) {
	m.lanes[l] = lane{insist: stealInsist}
}

// avoiding: some lane is avoided, in part or whole.
func (m *Machine) avoiding() bool {
	for _, l := range m.lanes {
		if l.avoidUntil > m.wins {
			return true
		}
	}
	return false
}

func (m *Machine) avoided(e *entry) bool {
	l := &m.lanes[e.seq%lanes]
	return l.avoidUntil > m.wins && e.seq >= l.avoidFrom
}

// lostRace notes that another consumer took or claimed e first: its lane,
// from e on, is avoided for a while, unless we insist on it (see steal).
func (m *Machine) lostRace(e *entry) {
	l := &m.lanes[e.seq%lanes]
	if l.insist > 0 {
		l.insist--
		return
	}
	if l.avoidUntil <= m.wins || e.seq < l.avoidFrom {
		l.avoidFrom = e.seq
	}
	l.avoidUntil = m.wins + laneMemory
}

func (m *Machine) bound(t *taker) bool { return t.entry != nil }

// bind gives e to t.
func (m *Machine) bind(e *entry, t *taker) { e.taker, t.entry = t, e }

// unbind takes e back from its taker, which waits for another item.
func (m *Machine) unbind(e *entry) {
	if e.taker != nil {
		e.taker.entry = nil
		e.taker = nil
	}
}

func (m *Machine) read(o *out, e *entry) {
	if e.hasData || e.reading {
		return
	}
	e.reading = true
	o.Commands = append(o.Commands, readItem{Cmd: m.cmd(), Name: e.name})
}

func (m *Machine) list(o *out, synced bool) {
	m.listing, m.listSynced, m.lists = true, synced, m.lists+1
	if synced {
		// The takers that wanted a fresh listing when this one went out
		// get it when it comes back.
		m.freshNext = false
		for _, t := range m.takers {
			if t.wantFresh {
				t.wantFresh, t.freshList = false, m.lists
			}
		}
	}
	_ = m.fsm.Fire(trList)
	o.Commands = append(o.Commands, listItems{Cmd: m.cmd(), Sync: synced, Watch: !m.watchArmed})
	if !m.watchArmed {
		m.watchArmed = true // a second one would fire twice
	}
}

func (m *Machine) listedItems(o *out, i listed) {
	m.listing = false
	synced := m.listSynced
	if i.Err != nil {
		m.watchArmed = false
		if !errors.Is(i.Err, zk.ErrConnectionLoss) && !errors.Is(i.Err, zk.ErrSessionExpired) && !errors.Is(i.Err, zk.ErrClosed) {
			m.event(o, events.Failed, "", i.Err)
			m.failTakers(o, i.Err)
		}
		for _, t := range m.takers {
			if synced && t.freshList == m.lists {
				t.wantFresh, m.freshNext = true, true
			}
		}
		return
	}
	m.watchArmed = i.Watched
	m.stale, m.listed = false, true
	_ = m.fsm.Fire(trListed)
	if i.Dir != 0 {
		if m.dir != 0 && i.Dir != m.dir {
			// The queue's node was deleted (an empty container is
			// reaped) and created again: its sequence numbers started
			// over, and the names we know are those of old items. Forget
			// them, but for those a write of ours is bound to.
			clear(m.gone)
			for name, e := range m.entries {
				if e.taker == nil && !e.mine && !e.busy && !m.uncert[name] {
					delete(m.entries, name)
				}
			}
		}
		m.dir = i.Dir
	}
	present := make(map[string]bool, len(i.Children))
	for _, c := range i.Children {
		n, ok := parseItem(c)
		if !ok {
			continue
		}
		present[c] = true
		if _, gone := m.gone[c]; gone || m.entries[c] != nil {
			continue
		}
		m.entries[c] = &entry{itemName: n}
	}
	for name, e := range m.entries {
		if !present[name] && e.taker == nil && !e.mine && !e.busy && !m.uncert[name] {
			delete(m.entries, name)
		}
	}
	for name, at := range m.gone {
		if at < m.lists { // this listing went out after we learnt it
			delete(m.gone, name)
		}
	}
	m.sortOrder()
	for _, t := range m.takers {
		if synced && t.freshList == m.lists {
			t.fresh = true
		}
	}
}

func (m *Machine) sortOrder() {
	m.order, m.head, m.dead = m.order[:0], 0, 0
	for _, e := range m.entries {
		m.order = append(m.order, e)
	}
	slices.SortFunc(m.order, func(a, b *entry) int { return compareItems(a.itemName, b.itemName) })
}

// markGone forgets an item that is no longer in the queue.
func (m *Machine) markGone(e *entry) {
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

func (m *Machine) dataRead(o *out, i dataRead) {
	e := m.entries[i.Name]
	if e == nil || e.claimRead != 0 && i.Cmd != e.claimRead {
		return // gone, or read ahead before our claim, whose read comes behind
	}
	e.reading, e.claimRead = false, 0
	switch {
	case i.Err == nil:
		e.data, e.hasData = i.Data, true
	case errors.Is(i.Err, zk.ErrNoNode):
		if e.busy || e.mine || m.uncert[e.name] {
			return // our own remove, claim or ack took it; its reply says the rest
		}
		if e.taker != nil {
			m.unbind(e)
		}
		m.lostRace(e)
		m.markGone(e)
		return
	default:
		return // read again when the connection is back
	}
	switch {
	case e.mine && e.taker != nil: // claimed before the data came
		m.deliverClaim(o, e)
	case e.taker != nil:
		m.advance(o, e)
	}
}

func (m *Machine) removed(o *out, i removed) {
	m.owed--
	e := m.entries[i.Name]
	if e == nil {
		return
	}
	e.busy = false
	switch {
	case i.Err == nil:
		m.wins++
		e.retried = false
		m.deliverTaken(o, e, nil)
	case errors.Is(i.Err, zk.ErrNoNode) && e.retried:
		m.uncertain(o, e) // gone with our first delete, perhaps, landed since
	case errors.Is(i.Err, zk.ErrNoNode):
		m.unbind(e)
		m.lostRace(e)
		m.markGone(e)
	case errors.Is(i.Err, zk.ErrNotEmpty): // claimed by an acknowledged consumer
		m.unbind(e)
		m.othersClaim(o, e)
	default:
		m.uncertain(o, e)
	}
}

// deliverTaken gives a removed item to its caller, or puts it back when
// the caller stopped waiting.
func (m *Machine) deliverTaken(o *out, e *entry, uncertain error) {
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

// restoreItem creates again, at its place (its own name), an item we
// removed for a caller that did not take it.
func (m *Machine) restoreItem(o *out, name string, data []byte) {
	m.restore[name] = data
	m.owed++
	o.Commands = append(o.Commands, restoreItem{Cmd: m.cmd(), Name: name, Data: data})
}

// restored: an item put back is in the queue again, or, when the
// connection failed first, is put back once it is up again (a create
// applied before its reply was lost then finds the item there).
func (m *Machine) restored(o *out, i restored) {
	m.owed--
	switch {
	case i.Err == nil || errors.Is(i.Err, zk.ErrNodeExists):
		m.cacheAgain(i.Name, m.restore[i.Name])
		delete(m.restore, i.Name)
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

// cacheAgain puts an item we put back into the cache at once, with its
// data: the takes that waited for it (givingBack) get it first, with no
// listing.
func (m *Machine) cacheAgain(name string, data []byte) {
	delete(m.gone, name)
	n, ok := parseItem(name)
	if !ok || m.entries[name] != nil {
		return
	}
	m.entries[name] = &entry{itemName: n, data: data, hasData: true}
	m.sortOrder()
}

// restoreAgain sends again, once connected, the put-backs the connection
// failed.
func (m *Machine) restoreAgain(o *out) {
	later := m.restoreLater
	m.restoreLater = nil
	for _, name := range later {
		m.restoreItem(o, name, m.restore[name])
	}
}

// refused gives back what an answer no caller took had given (see
// runtime.Spec.Refused): the item a take removed is put back at its
// place; the claim a TakeItem, or an ack's next claim, made is given back
// like a claim ahead no one took (no NACKED, not a redelivery; takes wait
// for it).
func (m *Machine) refused(o *out, t taken) {
	if t.Session == 0 {
		m.restoreItem(o, t.Name, t.Data)
		return
	}
	m.ack(o, ackCall{Name: t.Name, Session: t.Session, Nack: true, Back: true})
}

func (m *Machine) claimed(o *out, i claimed) {
	m.owed--
	e := m.entries[i.Name]
	if e == nil {
		return
	}
	e.busy = false
	switch {
	case i.Err == nil && !m.onOurSession(i.Session):
		// Made on another session than the machine's: asked on the one
		// that ended, it went out on the next (the client sends what it
		// had queued), whose news has not come yet; or the session
		// changed while it was in flight. Recorded under the machine's
		// session, it would be forgotten when that session's end is
		// handled, and the item then waited on as another consumer's for
		// as long as ours lived. Whose it is, is asked once the session
		// is known (see checked).
		m.uncertain(o, e)
	case i.Err == nil:
		m.wins++
		e.mine, e.retried = true, false
		m.claims[e.name] = m.session
		if e.hasData {
			m.deliverClaim(o, e)
		}
	case errors.Is(i.Err, zk.ErrNodeExists) && e.retried:
		m.uncertain(o, e) // ours, perhaps: the first claim, landed since
	case errors.Is(i.Err, zk.ErrNodeExists):
		m.unbind(e)
		m.lostRace(e)
		m.othersClaim(o, e)
	case errors.Is(i.Err, zk.ErrNoNode):
		m.unbind(e)
		m.lostRace(e)
		m.markGone(e)
	case errors.Is(i.Err, errNotApplied): // the ack failed the multi
		m.unbind(e)
	default:
		m.uncertain(o, e)
	}
}

// deliverClaim gives a claimed item to its caller, or gives the claim
// back when the caller stopped waiting.
func (m *Machine) deliverClaim(o *out, e *entry) {
	t := e.taker
	m.unbind(e)
	m.dropTaker(t)
	switch {
	case t.ahead && !t.withdrawn && !m.plainWaiting():
		m.ahead = e
		m.waitAhead(o)
		return
	case t.ahead: // the handle is closing, or a plain take, poll or peek waits (see giveAheadBack)
		m.endClaim(o, e.name, ackOp{nack: true, back: true})
		return
	case t.withdrawn: // never out: given back as a claim ahead is
		m.endClaim(o, e.name, ackOp{nack: true, back: true})
		return
	}
	m.handOut(o, e, t.req)
}

// handOut gives our claim of e to call req: CLAIMED (and REDELIVERED when
// it came again).
func (m *Machine) handOut(o *out, e *entry, req uint64) {
	if e.again {
		m.event(o, events.Redelivered, m.node(e.name), nil)
		e.again = false
	}
	m.event(o, events.Claimed, m.node(e.name), nil)
	m.reply(o, req, taken{Name: e.name, Data: e.data, Session: m.claims[e.name]}, nil)
}

// othersClaim notes that another consumer holds e's claim, and watches it.
func (m *Machine) othersClaim(o *out, e *entry) {
	e.others = true
	if !e.watching {
		e.watching = true
		o.Commands = append(o.Commands, watchClaim{Cmd: m.cmd(), Name: e.name})
	}
}

// uncertain notes that our last write on e may or may not have been
// applied (its reply was lost); it is checked once the session is back.
func (m *Machine) uncertain(o *out, e *entry) {
	m.uncert[e.name] = true
	if m.connected {
		m.owed++
		o.Commands = append(o.Commands, checkItem{Cmd: m.cmd(), Name: e.name})
	}
}

func (m *Machine) checked(o *out, i checked) {
	m.owed--
	e := m.entries[i.Name]
	if e == nil {
		delete(m.uncert, i.Name)
		return
	}
	if !m.uncert[i.Name] {
		return // an earlier check settled it
	}
	if i.Err != nil {
		if m.connected {
			m.uncertain(o, e)
		}
		return
	}
	if !m.onOurSession(i.Session) {
		// Read on another session than the machine's (the news of the
		// change still to come, or already handled), or while it
		// changed: judged against our claims, the reads could take our
		// own claim for another consumer's, or another's ack for ours.
		// The change brings a check again (see recheck).
		return
	}
	delete(m.uncert, i.Name)
	if a, ok := m.acks[i.Name]; ok { // an ack or nack whose reply was lost
		delete(m.acks, i.Name)
		req, nack := a.req, a.nack
		// No session ended since the claim.
		ours := m.claims[e.name] == m.session
		switch {
		// While our claim lived, no one else could remove the item or
		// claim it: gone means our ack went through. Once the session has
		// ended, someone else may have claimed and acked it since: the
		// ack is not counted as ours (the item may come again).
		case ours && !i.ItemExists && !nack, ours && nack && i.ClaimOwner != m.session:
			m.claimEnded(o, i.Name, e, a, nil)
		case i.ClaimOwner == m.session && m.claims[e.name] == m.session:
			e.retried = true
			m.endClaim(o, e.name, a)
		case !nack && !i.ItemExists:
			// Gone for good: removed by our ack, or by another
			// consumer's after a redelivery; it will not come again.
			delete(m.claims, e.name)
			e.mine = false
			m.markGone(e)
			m.reply(o, req, nil, fmt.Errorf("%w: %s: the ack's reply was lost with the session", ErrUncertain, m.node(e.name)))
		default:
			delete(m.claims, e.name)
			e.mine = false
			m.reply(o, req, nil, fmt.Errorf("%w: %s", errs.claimLost, m.node(e.name)))
		}
		return
	}
	if e.busy {
		// A write of ours on e went out after the one this check is about
		// (an earlier check found that one not made): its reply decides.
		return
	}
	e.retried = false
	switch t := e.taker; {
	case t == nil:
	case t.kind == kindClaim && i.ClaimOwner == m.session:
		e.mine = true
		m.claims[e.name] = m.session
		if e.hasData {
			m.deliverClaim(o, e)
		}
	case t.kind != kindClaim && !i.ItemExists:
		// Our delete may have been the one that removed it, or another
		// consumer's: we cannot tell, and an item is never lost, so it is
		// delivered, and its TAKEN event says so (ErrUncertain).
		m.deliverTaken(o, e, fmt.Errorf("%w: %s", ErrUncertain, m.node(e.name)))
	case !i.ItemExists:
		m.unbind(e)
		m.markGone(e)
	case i.ClaimOwner != 0 && t.kind == kindClaim:
		m.unbind(e)
		m.othersClaim(o, e)
	default:
		e.retried = true
		m.unbind(e) // not applied: try again
	}
}

func (m *Machine) ack(o *out, i ackCall) {
	session, ok := m.claims[i.Name]
	switch {
	case !ok || session != i.Session || session != m.session:
		m.reply(o, i.Req, nil, fmt.Errorf("%w: %s", errs.claimLost, m.node(i.Name)))
	case m.acks[i.Name] != (ackOp{}) || slices.ContainsFunc(m.heldAcks, func(h ackCall) bool { return h.Name == i.Name }):
		m.reply(o, i.Req, nil, fmt.Errorf("%w: %s: an ack or nack is in flight", ErrAcked, m.node(i.Name)))
	case !m.connected:
		m.heldAcks = append(m.heldAcks, i)
	case i.Next == claimForCall && m.joinNext(o, i):
	case i.Next == claimAheadOf && !i.Nack && m.claimAhead(o, i):
	default:
		m.endClaim(o, i.Name, ackOp{req: i.Req, nack: i.Nack, back: i.Back})
	}
}

// joinNext sends ack call i's endClaim in one multi with the claim of the
// item a TakeItem would get now (see claimNext), for the call: it answers
// with both.
func (m *Machine) joinNext(o *out, i ackCall) bool {
	if !m.claimNext(o, i, &taker{req: i.Req | claimPart, kind: kindClaim}) {
		return false
	}
	m.joints[i.Req] = &joint{}
	return true
}

// claimAhead sends Ack call i's multi with the claim of the item the next
// TakeItem would get, for no call yet: TakeItem then Ack cost two writes
// in turn, and with the next claim made by the Ack, a caller that takes
// again costs one. The Ack answers once its own part is applied. The item
// claimed ahead goes to the next TakeItem (see takeAhead), or, when none
// comes within Config.ClaimAhead, is given back (see aheadWaited) with no
// NACKED event: it was never out. Meanwhile no other consumer can take it,
// as with any claim. Not when a claim ahead is already out or in flight.
func (m *Machine) claimAhead(o *out, i ackCall) bool {
	if m.cfg.ClaimAhead <= 0 || m.aheadOut() {
		return false
	}
	return m.claimNext(o, i, &taker{kind: kindClaim, ahead: true})
}

// claimNext sends ack call i's endClaim in one multi with the claim of the
// item a TakeItem would get now, for taker t, and the read of that item
// behind it. It sends nothing when there is no such item in the cache, or
// when it has a priority (choosing one needs a listing after a sync
// first), or once the machine is shutting down.
func (m *Machine) claimNext(o *out, i ackCall, t *taker) bool {
	if m.closing != 0 || m.givingBack() {
		return false
	}
	e := m.candidate(t)
	if e == nil || e.prio > 0 || e.busy {
		return false
	}
	m.takers = append(m.takers, t)
	m.bind(e, t)
	session := m.beginAck(i.Name, ackOp{req: i.Req, nack: i.Nack})
	m.owed += 2 // answered as acked and claimed
	m.claimWith(o, e, endClaim{Cmd: m.cmd(), Name: i.Name, Nack: i.Nack, Next: e.name, Data: m.cfg.ClaimData, Session: session})
	return true
}

// takeAhead gives TakeItem call req the item an Ack claimed ahead: at
// once when its claim and read are done, else when they are. Not while
// the connection is down: the session, and the claim with it, may be
// ending, and a call given the item then would hold an item another
// consumer may get; such a call waits, and gets it once the same session
// is back (see aheadToTaker).
func (m *Machine) takeAhead(o *out, req uint64) bool {
	if e := m.ahead; e != nil {
		if !m.connected {
			return false
		}
		m.ahead = nil
		m.handOut(o, e, req)
		return true
	}
	if t := m.aheadInFlight(); t != nil && !t.withdrawn {
		t.ahead, t.req = false, req
		return true
	}
	return false
}

// aheadInFlight is the claim ahead whose multi or read is in flight (nil:
// none).
func (m *Machine) aheadInFlight() *taker {
	for _, t := range m.takers {
		if t.ahead {
			return t
		}
	}
	return nil
}

// dropAheadInFlight drops, as its session ends, the claim ahead still in
// flight: its claim goes with the session and no call waits for it. Kept,
// it would be claimed again on the next session once its read came back,
// and hold the item from every other consumer until its wait ended. When
// its multi is still out, the multi's reply unbinds it (a claim whose
// session is unknown is checked, then found not ours), and pump drops it.
func (m *Machine) dropAheadInFlight() {
	t := m.aheadInFlight()
	if t == nil {
		return
	}
	t.withdrawn = true
	if e := t.entry; e != nil {
		if e.busy || m.uncert[e.name] {
			return
		}
		e.mine = false // never out: not a redelivery when it comes again
		m.unbind(e)
	}
	m.dropTaker(t)
}

// aheadToTaker gives the item claimed ahead to the first TakeItem that
// came while the connection was down, now that the same session is back.
func (m *Machine) aheadToTaker(o *out) {
	if m.ahead == nil {
		return
	}
	for _, t := range m.takers {
		if t.kind == kindClaim && t.entry == nil && !t.withdrawn && t.req&claimPart == 0 {
			e := m.ahead
			m.ahead = nil
			m.dropTaker(t)
			m.handOut(o, e, t.req)
			return
		}
	}
}

// aheadWaited: the item claimed ahead waited Config.ClaimAhead and no
// TakeItem came: its claim is given back. While the connection is down it
// waits again (a request sent now could go out on the next session, see
// heldAcks).
func (m *Machine) aheadWaited(o *out, i aheadWaited) {
	e := m.ahead
	switch {
	case e == nil || i.Cmd != m.aheadWait:
	case !m.connected:
		m.waitAhead(o)
	default:
		m.ahead = nil
		m.endClaim(o, e.name, ackOp{nack: true, back: true})
	}
}

// giveAheadBack gives back the item claimed ahead, now: a plain take,
// poll or peek came, which a claimed item is hidden from. (While the
// connection is down it stays until its wait ends; see aheadWaited.)
func (m *Machine) giveAheadBack(o *out) {
	if e := m.ahead; e != nil && m.connected {
		m.ahead = nil
		m.endClaim(o, e.name, ackOp{nack: true, back: true})
	}
}

// plainWaiting: a take, poll or peek waits.
func (m *Machine) plainWaiting() bool {
	return slices.ContainsFunc(m.takers, func(w *taker) bool { return w.kind != kindClaim })
}

// givingBack: an item that was never out is on its way back to its
// place: a claim ahead or a claim no caller took being given back, an
// item a take removed for no caller being put back, or the delete or
// claim of a withdrawn call still in flight (what it brings is given
// back). It comes before the items a take would get now: until it is
// back, takes and claims wait, or they would hand the items out of order.
// (A nacked item was out: it comes again later, as any redelivery does.)
func (m *Machine) givingBack() bool {
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

// adopt gives take call i the item whose delete or claim a withdrawn call
// of the same kind left in flight: the item is the head, and it goes to
// i once the write is through, as it would have to that call (given
// back, it would come later than the items after it). Not a claim
// ahead's (see takeAhead), nor a joint's.
func (m *Machine) adopt(i takeCall) bool {
	if i.Kind == kindPeek {
		return false
	}
	for _, t := range m.takers {
		if t.withdrawn && t.entry != nil && !t.ahead && t.req&claimPart == 0 && (t.kind == kindClaim) == (i.Kind == kindClaim) {
			t.withdrawn, t.req, t.kind = false, i.Req, i.Kind
			return true
		}
	}
	return false
}

// aheadOut: an item claimed ahead is held, or its claim or read is in
// flight.
func (m *Machine) aheadOut() bool {
	return m.ahead != nil || m.aheadInFlight() != nil
}

// waitAhead starts the wait of the item claimed ahead.
func (m *Machine) waitAhead(o *out) {
	m.aheadWait = m.cmd()
	o.Commands = append(o.Commands, waitAhead{Cmd: m.aheadWait, For: m.cfg.ClaimAhead})
}

// claimWith sends write, the request that claims e, and the read of e's
// data behind it: the claim and the read go out together, the read
// behind, so its data is the claimed node's, whatever was read ahead.
func (m *Machine) claimWith(o *out, e *entry, write Command) {
	e.busy = true
	o.Commands = append(o.Commands, write)
	e.data, e.hasData, e.reading = nil, false, true
	e.claimRead = m.cmd()
	o.Commands = append(o.Commands, readItem{Cmd: e.claimRead, Name: e.name})
}

// releaseAcks sends the held acks (the session is back) or refuses them
// (it is lost: m.claims is empty, so ack says ErrClaimLost).
func (m *Machine) releaseAcks(o *out) {
	held := m.heldAcks
	m.heldAcks = nil
	for _, i := range held {
		m.ack(o, i)
	}
}

// beginAck notes a, the ack or nack of our claim on item name, in flight,
// with the claim's session, which it returns.
func (m *Machine) beginAck(name string, a ackOp) int64 {
	a.session = m.claims[name]
	m.acks[name] = a
	return a.session
}

// onOurSession: a request made on session (0: while the session changed)
// was made on the session the machine knows.
func (m *Machine) onOurSession(session int64) bool {
	return session != 0 && session == m.session
}

// endClaim acks or nacks our claim on item name, as a says.
func (m *Machine) endClaim(o *out, name string, a ackOp) {
	session := m.beginAck(name, a)
	m.owed++
	o.Commands = append(o.Commands, endClaim{Cmd: m.cmd(), Name: name, Nack: a.nack, Session: session})
}

func (m *Machine) acked(o *out, i acked) {
	m.owed--
	a, ok := m.acks[i.Name]
	if !ok {
		return
	}
	e := m.entries[i.Name]
	req, nack := a.req, a.nack
	switch {
	case errors.Is(i.Err, errNotApplied): // the next claim failed the multi: the ack alone
		m.endClaim(o, i.Name, a)
	case i.Err == nil:
		delete(m.acks, i.Name)
		var other error
		if s := a.session; i.Session != s {
			// Asked as the connection was lost, it went out on the next
			// session (see claimed), where our claim was gone: the claim
			// it deleted may be another consumer's, which had the item
			// since. Nothing undoes that; the event says so.
			on := fmt.Sprintf("on session %#x", i.Session)
			if i.Session == 0 {
				on = "while the session changed"
			}
			other = fmt.Errorf("%w: %s: made %s, the claim on %#x: another consumer's claim of the item may have gone with it", ErrUncertain, m.node(i.Name), on, s)
		}
		m.claimEnded(o, i.Name, e, a, other)
	case errors.Is(i.Err, zk.ErrNoNode) && e != nil && e.retried:
		// Our claim was gone, and nothing of this multi applied; but the
		// first one, sent before the check that saw the claim, may have
		// landed since and taken the item with the claim (a chaos run on
		// the ensemble saw it, see package chaos). Look again: gone with
		// our session's claim, the item is acked.
		m.uncertain(o, e)
	case errors.Is(i.Err, zk.ErrNoNode): // our claim was gone: nothing was applied
		delete(m.acks, i.Name)
		delete(m.claims, i.Name)
		if e != nil {
			e.mine = false
		}
		m.reply(o, req, nil, fmt.Errorf("%w: %s", errs.claimLost, m.node(i.Name)))
	case e != nil:
		// The reply was lost (perhaps with the session): the write may
		// have been applied. checked tells once the item is looked at.
		m.uncertain(o, e)
	case !nack && (errors.Is(i.Err, zk.ErrConnectionLoss) || errors.Is(i.Err, zk.ErrSessionExpired)):
		delete(m.acks, i.Name)
		delete(m.claims, i.Name)
		m.reply(o, req, nil, fmt.Errorf("%w: %s: the ack's reply was lost with the session", ErrUncertain, m.node(i.Name)))
	default:
		delete(m.acks, i.Name)
		m.reply(o, req, nil, i.Err)
	}
}

// claimEnded: our ack (the item is gone) or nack (the item is back at its
// place) went through; its event carries uncertain, when not nil.
func (m *Machine) claimEnded(o *out, name string, e *entry, a ackOp, uncertain error) {
	delete(m.claims, name)
	switch {
	case a.back && uncertain != nil:
		m.event(o, events.Failed, m.node(name), uncertain)
	case a.back:
	case a.nack:
		m.event(o, events.Nacked, m.node(name), uncertain)
	default:
		m.event(o, events.Acked, m.node(name), uncertain)
	}
	switch {
	case e != nil && a.nack:
		e.mine, e.again, e.retried = false, e.again || !a.back, false
	case e != nil:
		m.markGone(e)
	default:
		m.gone[name] = m.lists
	}
	m.reply(o, a.req, nil, nil)
}

func (m *Machine) offered(o *out, i offered) {
	m.owed--
	req := m.offers[i.Cmd]
	delete(m.offers, i.Cmd)
	if i.Err == nil {
		for _, n := range i.Names {
			m.event(o, events.Offered, m.node(n), nil)
		}
	}
	m.reply(o, req, i.Names, i.Err)
}

func (m *Machine) cancel(o *out, req uint64) {
	delete(m.joints, req) // its ack goes on; no one waits for the answer
	for _, t := range m.takers {
		if t.req&^claimPart != req {
			continue
		}
		if e := t.entry; e != nil {
			if e.busy || m.uncert[e.name] || e.mine {
				t.withdrawn = true // its remove or claim is in flight: what it brings is given back
				return
			}
			m.unbind(e)
		}
		m.dropTaker(t)
		return
	}
}

func (m *Machine) sessionChange(o *out, i sessionChange) {
	switch i.State {
	case zk.StateSuspended:
		m.connected = false
		m.event(o, events.Suspended, "", nil)
	case zk.StateReconnected:
		m.connected = true
		m.event(o, events.Reconnected, "", nil)
		m.releaseAcks(o)
		m.recheck(o)
		m.restoreAgain(o)
		m.giveBackClaims(o)
		m.aheadToTaker(o)
		for _, e := range m.order {
			if !e.dead && e.others && !e.watching {
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
		m.recheck(o)
		m.restoreAgain(o)
		if m.listed && !m.listing {
			m.list(o, false) // the cache, and its watch, again
		}
	case zk.StateClosed:
		m.connected, m.connGone = false, true
		m.ahead = nil
		clear(m.claims) // gone with the session
		m.releaseAcks(o)
		m.failTakers(o, errs.closed)
	}
}

// recheck asks, once the session is back, what became of the writes whose
// replies were lost.
func (m *Machine) recheck(o *out) {
	for _, name := range slices.Sorted(maps.Keys(m.uncert)) {
		m.owed++
		o.Commands = append(o.Commands, checkItem{Cmd: m.cmd(), Name: name})
	}
}

// sessionLost: the session ended, and with it our claims (their items
// come again, to us or to another consumer) and our watches.
func (m *Machine) sessionLost(o *out) {
	if m.session == 0 {
		return
	}
	m.session = 0
	_ = m.fsm.Fire(trLost)
	m.event(o, events.Lost, "", errs.sessionLost)
	if m.ahead != nil {
		m.ahead.mine, m.ahead = false, nil // never out: not a redelivery when it comes again
	}
	m.dropAheadInFlight()
	for _, e := range m.order {
		if e.mine || e.others {
			e.again = true // it comes again, claimed by no one
		}
		e.mine, e.others, e.watching = false, false, false
	}
	clear(m.claims)
	m.releaseAcks(o)
	m.watchArmed, m.stale = false, true
}

func (m *Machine) failTakers(o *out, err error) {
	for _, t := range slices.Clone(m.takers) {
		if m.bound(t) {
			continue
		}
		m.dropTaker(t)
		m.reply(o, t.req, nil, err)
	}
}

func (m *Machine) dropTaker(t *taker) {
	if i := slices.Index(m.takers, t); i >= 0 {
		m.takers = slices.Delete(m.takers, i, i+1)
	}
}

func (m *Machine) shutdown(o *out, req uint64) {
	if m.closing != 0 {
		m.reply(o, req, nil, nil)
		return
	}
	m.closing = req
	_ = m.fsm.Fire(trStopped)
	m.event(o, events.StopStart, "", nil)
	for _, t := range m.takers {
		t.withdrawn = true
	}
	m.failTakers(o, errs.closed)
	for _, i := range m.heldAcks {
		m.reply(o, i.Req, nil, errs.closed) // the claim is given back when the session is
	}
	m.heldAcks = nil
	m.giveBackClaims(o)
}

// giveBackClaims nacks the claims of the Items still out when the
// machine shuts down: their items come again.
func (m *Machine) giveBackClaims(o *out) {
	if m.closing == 0 || !m.connected {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(m.claims)) {
		if _, ending := m.acks[name]; !ending {
			a := ackOp{nack: true}
			if m.ahead != nil && m.ahead.name == name {
				m.ahead, a.back = nil, true
			}
			m.endClaim(o, name, a)
		}
	}
}

func (m *Machine) finishShutdown(o *out) {
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
func (m *Machine) handover(o *out, req uint64) {
	l := runtime.Leftovers{Session: m.session}
	for name, s := range m.claims {
		if s == m.session {
			l.Nodes = append(l.Nodes, zk.Join(m.node(name), ClaimName))
		}
	}
	slices.Sort(l.Nodes)
	m.reply(o, req, l, nil)
	o.Done = true
}

func (m *Machine) node(name string) string { return zk.Join(m.cfg.Path, name) }

func (m *Machine) cmd() uint64 {
	m.nextCmd++
	return m.nextCmd
}

func (m *Machine) reply(o *out, req uint64, v any, err error) {
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

func (m *Machine) event(o *out, t events.Type, node string, err error) {
	o.Events = append(o.Events, events.Event{Type: t, State: m.fsm.Current(), Node: node, Err: err})
}

// Diagram renders the machine's states and transitions as a Mermaid state
// diagram (the same as Mermaid of a new machine; docs/diagrams is
// generated from it).
func Diagram() string {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		return err.Error()
	}
	return f.Mermaid()
}
