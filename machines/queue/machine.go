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

// config is what a consumer's machine is made for.
type config struct {
	Path      string // the queue's path
	ClaimData []byte // what our claims hold (the handle's id)
	SessionID int64  // the connection's session when the machine starts
	// ClaimAhead: how long the item an Ack claimed ahead (see claimAhead)
	// waits for a TakeItem before it is given back; 0: Ack claims nothing.
	ClaimAhead time.Duration
}

// Consumers racing for the head split the queue into blocks: an item's
// block is its sequence number divided by blockSize, so a block is a run
// of items offered one after another. A consumer that loses a race for an
// item (its delete, claim or read finds it gone or claimed) avoids that
// item's block from that item on, for its next blockMemory items, and
// takes the oldest item it does not avoid: the next block no one took
// from. So each block is taken by one consumer, in order, and consumers
// stop deleting items others already took (their caches learn of those
// only from a failed write or read, or a listing). A race lost on an item
// that came again says nothing of its block (every consumer may race for
// it, the holder too); one lost while our take or claim of a later item
// of the block is in flight waits for that write's answer (see
// writingPast); and a consumer that wins in a block it avoids (a write
// sent before the loss) holds the block again, and finishes it.
//
// A consumer never goes back: it takes only items after the last one it
// took or claimed (its mark), so it gets items in the queue's order, and
// each producer's in the order offered. Items before its mark are in the
// blocks of consumers behind it, which take them. Exceptions: an item
// that came again (a claim gone, a nack), one of its own that went to no
// one (put back, given back, a write not applied), the rest of a block it
// won back, and a block whose holder stopped taking (below). A loss
// answered for an item before the mark is old news and changes nothing.
//
// A consumer left with nothing it may take lists the queue again and
// steals the upper half of the block with the most items after its mark,
// if that is stealMin items or more: it takes the block from that half's
// first item on, and the holder, which loses that item's race, stops
// there. Both keep their order: the holder takes the lower half, the
// thief the upper. (Stealing a lane of every eighth item from its oldest
// item instead, the thief took a backlog after later items: 4 producers
// and 4 consumers on one real server, 1 item in 100 reached its consumer
// after a later one of its producer. Stealing such a lane from the
// thief's mark, a consumer ran ahead of every holder and could not help
// them: 4 consumers drained a queue four times slower than one.) A block
// with fewer items left is its holder's for waitThief: a thief would meet
// the holder on the items it reads ahead; then the idle consumer takes
// its oldest item, still after its own mark. An item behind our mark
// that stayed the oldest for waitHolder, whether or not we have items
// after the mark, has no holder taking it (closed, or no longer taking,
// or its session lost for that long, or its claim gone unseen): the
// consumer goes back for it, and takes the rest of its block (see
// stuck). Listing again to learn which items are gone costs more than the
// failed writes it saves (measured: a listing per 16 items passed over
// made 4 consumers slower than one). Without a lost race nothing is
// avoided: a lone consumer takes the head, in order.
const (
	blockSize   = 32
	blockMemory = 2 * blockSize
	stealMin    = 2 * readBatch
	waitHolder  = time.Second
	waitThief   = 10 * time.Millisecond
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
	{Trigger: trStopped, From: []events.State{events.StateStart, events.StateDetermine, events.StateReady, events.StateFailed}, To: events.StateStop},
}

// machine is one queue handle's consumer and producer: a pure machine,
// (state, input) → (state, commands, events, replies). It keeps a sorted
// cache of the queue's items, fed by one child watch, and gives the head
// to its waiting calls: a take deletes it (the consumer whose delete
// succeeds owns it), a claim creates an ephemeral claim under it. The next
// item's data is read while the head's delete or claim is in flight.
type machine struct {
	cfg config
	// fsm is a *runtime.FSM (an interface: the tests record what it fires).
	fsm interface {
		Current() events.State
		Fire(runtime.Trigger) error
		Bug() error
	}
	session   int64
	connected bool
	nextCmd   uint64

	entries    map[string]*entry
	order      []*entry           // entries, sorted by compareItems, and some dead ones
	head       int                // order[:head] are dead
	dead       int                // dead entries in order
	gone       map[string]uint64  // items known gone → the listing count when learnt
	dir        int64              // the queue node's czxid at the last listing (0: unknown)
	lists      uint64             // listings issued
	listing    bool               // a listing is in flight
	listSynced bool               // the listing in flight was made after a sync
	freshNext  bool               // a takers wants a listing made after a sync
	listed     bool               // a listing completed: the cache means something
	watchArmed bool               // our child watch is set
	stale      bool               // the children changed since the last listing
	blocks     map[uint32]*belief // what we believe of the blocks others hold, by block
	wins       uint64             // items we took or claimed
	mark       itemName           // the last of them, in the queue's order (see blockSize)
	marked     bool               // mark is set
	marks      map[int64]uint32   // our marks in the priorities other than mark's
	// back: the block we went back to (see goBack): its items from
	// backFrom on are not behind our mark.
	back, backFrom uint32
	backSet        bool
	// exceptHint: an item that came again, or of ours that went to no one,
	// may be before our mark (see scanFrom); set with those flags.
	exceptHint bool
	// lagFor: the item we would take once its holder has had waitThief to
	// take it (see overdue), as the last pump found it; lagArmed: as it
	// was when the wait lagWait began; lagDue: the item whose wait ended
	// with it still there.
	lagFor, lagArmed, lagDue string
	lagWait                  uint64
	// stuckFor: the oldest item cached, when it is behind our mark, as the
	// last pump found it; stuckArmed: as it was when the wait stuckWait
	// began. stuckDue: the item still the oldest when that wait ended;
	// stuckListed: a listing made since shows it still there (stuckLists:
	// the listings issued when the wait ended). See stuck.
	stuckFor, stuckArmed, stuckDue string
	stuckWait, stuckLists          uint64
	stuckListed                    bool

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
	// is the wait whose end gives it back.
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
	// another item of the same name (see Queue.create).
	claimRead uint64
	taker     *taker // the call it is being taken or claimed for
	busy      bool   // our remove or claim of it is in flight
	mine      bool   // we hold its claim (an Item is out)
	others    bool   // another consumer holds its claim
	watching  bool   // our watch on that claim is set
	again     bool   // its claim went away: the next delivery is a redelivery
	// ours: we took or claimed it and it went to no one: put back for a
	// withdrawn take, given back unclaimed, or our write not applied. Not
	// behind our mark: it is ours to take again (see behind).
	ours bool
	dead bool // gone from the queue (and from entries)
	// retried: our delete, claim or ack of it is made again after a lost
	// reply, the check having found the first not applied; the first may
	// land yet, and be what the second finds: a miss of the second's
	// target (the item or claim gone, the claim there) is checked again.
	retried bool
}

// belief is what a consumer believes of a block another consumer holds
// (see blockSize): its items from from on, and before to (0: to the
// block's end), are avoided while wins < until.
type belief struct {
	from, to uint32
	until    uint64
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

// newMachine returns a machine for cfg.
func newMachine(cfg config) (*machine, error) {
	f, err := runtime.NewFSM(states, events.StateStart, transitions)
	if err != nil {
		return nil, err
	}
	return &machine{
		cfg: cfg, fsm: f, session: cfg.SessionID, connected: cfg.SessionID != 0,
		entries: make(map[string]*entry), gone: make(map[string]uint64), blocks: make(map[uint32]*belief),
		claims: make(map[string]int64), acks: make(map[string]ackOp), uncert: make(map[string]bool), joints: make(map[uint64]*joint),
		offers: make(map[uint64]uint64), counts: make(map[uint64]uint64), restore: make(map[string][]byte),
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
				e.others, e.again, m.exceptHint = false, true, true
			}
		}
	case claimGone:
		if e := m.entries[i.Name]; e != nil {
			e.watching = false
			if i.Deleted {
				e.others, e.again, m.exceptHint = false, true, true
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
	case waited:
		switch i.Cmd {
		case m.aheadWait:
			m.aheadWaited(&o)
		case m.lagWait:
			m.lagWaited()
		case m.stuckWait:
			m.stuckWaited()
		}
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
	slices.SortStableFunc(o.Commands, func(a, b command) int {
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
func (m *machine) pump(o *out) {
	if m.closing != 0 || !m.connected {
		return
	}
	m.lagFor = ""
	defer m.waitLag(o)
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
	m.watchStuck(o)
	switch {
	case m.listing:
	case m.freshNext:
		m.list(o, true)
	case needList, m.stuckDue != "" && !m.stuckListed && len(m.takers) > 0:
		m.list(o, false)
	}
}

// readAhead reads the data of the next readBatch items a take would get,
// once the next one has none and none is being read. A read sent beside a
// take's delete delays that delete on the server (about a sixth of a
// delete's round trip here, measured): read one at a time, every delete
// pays it; read in batches, one take in readBatch does, and the others'
// deletes go alone.
func (m *machine) readAhead(o *out) {
	next := m.candidate(nil)
	if next == nil || next.hasData || next.reading {
		return
	}
	// The next item, and those after it that are neither in another
	// consumer's block nor behind our mark.
	avoiding := m.avoiding()
	for i, n := m.search(next.prio, next.seq), 0; i < len(m.order) && n < readBatch; i++ {
		if e := m.order[i]; e == next || m.free(e) && !(avoiding && m.avoided(e)) && !m.behind(e) {
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
func (m *machine) free(e *entry) bool {
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
func takeWrite(c command) bool {
	switch c := c.(type) {
	case removeItem, claimItem:
		return true
	case endClaim:
		return c.Next != ""
	}
	return false
}

// advance takes the next step for an entry bound to a take or claim.
func (m *machine) advance(o *out, e *entry) {
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

// candidate is the item t gets next (nil: none cached, or none it may
// take until a listing says which are left, or until a holder has had
// its wait): the head, or after a lost race the oldest item it neither
// avoids nor would go back for (see blockSize). With t nil, the item the
// next take would get (for reading ahead).
func (m *machine) candidate(t *taker) *entry {
	first := m.firstFree()
	if first == nil || t != nil && t.kind == kindPeek {
		return first
	}
	if t != nil && m.stuck(first) {
		return first
	}
	// Items before our mark are behind it, but for the exceptions: start
	// at the mark, or at the first exception before it.
	from := m.scanFrom(first)
	blockPick := m.avoiding()
	var passed []*entry // items avoided, after our mark, in the queue's order
	for i := from; i < len(m.order); i++ {
		e := m.order[i]
		switch {
		case !m.free(e):
			continue
		case e.prio != first.prio:
			return first // never pass over an item of a lower priority
		case m.behind(e):
		case blockPick && m.avoided(e):
			passed = append(passed, e)
		default:
			return e
		}
	}
	// An item that came again, or went to no one, before our mark: the
	// hint that sends the scan there is set where such an item turns up,
	// but one can turn free later (a check answered, a write failed).
	// Nothing else to take, look for one.
	for i := m.head; i < from; i++ {
		if e := m.order[i]; m.free(e) && e.exempt() {
			return e
		}
	}
	switch {
	case t == nil:
		return nil
	case m.stale || m.listing:
		return nil // list again: the items passed over may be long gone
	}
	// A listing made since the last change shows only items we avoid or
	// would go back for.
	if e := m.stealHalf(passed); e != nil {
		return e
	}
	switch {
	case len(passed) > 0:
		// Taking the oldest we avoid keeps our order: it comes first.
		if !m.overdue(t, passed[0]) {
			return nil
		}
		delete(m.blocks, passed[0].seq/blockSize)
		return passed[0]
	case t.kind == kindPoll && m.behind(first):
		// Only items behind our mark: a poll takes the oldest at once
		// (an empty answer would be false); a take waits until it is
		// stuck.
		m.goBack(first)
		return first
	}
	return nil
}

// goBack takes e, behind our mark, and the rest of its block from e on,
// as if they were after it: their holder is not taking them.
func (m *machine) goBack(e *entry) {
	m.back, m.backFrom, m.backSet = e.seq/blockSize, e.seq, true
	delete(m.blocks, e.seq/blockSize)
}

// firstFree is the oldest item that may be given to a take (see free),
// whatever its block; nil if none is cached.
func (m *machine) firstFree() *entry {
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

// scanFrom is where the search for first's successor starts in order: at
// our mark in first's priority, or before it at the part of the block we
// went back to, or at an item that came again or went to no one
// (exceptHint says one may be there), which are not behind the mark.
func (m *machine) scanFrom(first *entry) int {
	mark, ok := m.markOf(first.prio)
	if !ok {
		return m.head
	}
	from := max(m.head, m.search(first.prio, mark))
	if m.backSet {
		// The block is done once a listing shows items past it and none
		// of it left (its items are listed before any later one).
		i := max(m.head, m.search(first.prio, m.backFrom))
		j := i
		for j < len(m.order) && m.order[j].seq/blockSize == m.back && m.order[j].dead {
			j++
		}
		switch {
		case j < len(m.order) && m.order[j].seq/blockSize == m.back:
			from = min(from, j)
		case j < len(m.order):
			m.backSet = false
		}
	}
	if m.exceptHint {
		m.exceptHint = false
		for i := m.head; i < from; i++ {
			if e := m.order[i]; m.free(e) && e.exempt() {
				m.exceptHint = true // until it is taken
				return i
			}
		}
	}
	return from
}

// markOf is our mark in priority prio, if we took or claimed an item of
// it.
func (m *machine) markOf(prio int64) (uint32, bool) {
	if m.marked && m.mark.prio == prio {
		return m.mark.seq, true
	}
	seq, ok := m.marks[prio]
	return seq, ok
}

// search is the index of the first entry of order at or after the item
// of priority prio and sequence seq.
func (m *machine) search(prio int64, seq uint32) int {
	at := itemName{prio: prio, seq: seq}
	i, _ := slices.BinarySearchFunc(m.order, at, func(e *entry, at itemName) int { return compareItems(e.itemName, at) })
	return i
}

// stealHalf takes over the upper half of the block with the most items
// in passed (items we avoid, after our mark, in the queue's order), if it
// has stealMin or more, and returns that half's first item; nil if none.
func (m *machine) stealHalf(passed []*entry) *entry {
	var best []*entry
	for i := 0; i < len(passed); {
		j := i + 1
		for j < len(passed) && passed[j].seq/blockSize == passed[i].seq/blockSize && passed[j].prio == passed[i].prio {
			j++
		}
		if j-i > len(best) {
			best = passed[i:j]
		}
		i = j
	}
	if len(best) < stealMin {
		return nil
	}
	e := best[len(best)/2]
	m.blocks[e.seq/blockSize].to = e.seq
	return e
}

// overdue: e, the oldest item of a block we avoid, after our mark, may
// be taken now. Its holder gets waitThief to take it (taking it keeps our
// order; the wait only spares the holder a race for its next item). A
// poll does not wait.
func (m *machine) overdue(t *taker, e *entry) bool {
	switch {
	case t.kind == kindPoll:
		return true
	case m.lagDue == e.name:
		m.lagDue = ""
		return true
	}
	m.lagFor = e.name
	return false
}

// waitLag starts the wait for the item whose holder lags (see overdue),
// unless one is on.
func (m *machine) waitLag(o *out) {
	if m.lagFor == "" || m.lagWait != 0 {
		return
	}
	m.lagWait, m.lagArmed = m.cmd(), m.lagFor
	o.Commands = append(o.Commands, wait{Cmd: m.lagWait, For: waitThief})
}

// lagWaited: the wait for a lagging holder is over; if the item it was
// for is still the one we would take, the next candidate takes it.
func (m *machine) lagWaited() {
	m.lagWait = 0
	if m.lagFor == m.lagArmed {
		m.lagDue = m.lagFor
	}
}

// stuck: first, the oldest item cached and behind our mark, stayed the
// oldest for waitHolder, and a listing made after that shows it still
// there: its block's holder is not taking it. Its claim went with a
// session no other consumer watched (a redelivery), or its holder stopped
// taking, or is gone. Consumers never go back, so without this it would
// wait until one had nothing after its mark: in a queue that never runs
// dry, forever. We go back for it and the rest of its block (see
// goBack); a race lost there (the holder was taking after all, or its
// claim is still there) makes us avoid the block again. The wait costs a
// listing a waitHolder at most. (A poll with nothing else to take does
// not wait: see candidate.)
func (m *machine) stuck(first *entry) bool {
	if m.stuckDue != first.name || !m.stuckListed || !m.behind(first) {
		return false
	}
	m.stuckFor, m.stuckDue = "", ""
	m.goBack(first)
	return true
}

// watchStuck times the oldest item cached while it is behind our mark
// (see stuck): one wait at a time, started while a call waits, so an item
// that becomes the oldest during another's wait waits up to two.
func (m *machine) watchStuck(o *out) {
	first := m.firstFree()
	if first == nil || !m.behind(first) {
		m.stuckFor, m.stuckDue = "", ""
		return
	}
	if first.name != m.stuckFor {
		m.stuckFor, m.stuckDue = first.name, ""
	}
	if m.stuckWait == 0 && m.stuckDue == "" && len(m.takers) > 0 {
		m.stuckWait, m.stuckArmed = m.cmd(), first.name
		o.Commands = append(o.Commands, wait{Cmd: m.stuckWait, For: waitHolder})
	}
}

// stuckWaited: the oldest item's wait is over; if it is still the oldest,
// it is due, once a listing shows it there (now, if nothing changed since
// the last one).
func (m *machine) stuckWaited() {
	m.stuckWait = 0
	if m.stuckFor == "" || m.stuckFor != m.stuckArmed {
		return
	}
	m.stuckDue, m.stuckLists = m.stuckFor, m.lists
	m.stuckListed = m.watchArmed && !m.stale && !m.listing
}

// exempt: e is taken out of the queue's order wherever it is: it came
// again, or it was ours and went to no one.
func (e *entry) exempt() bool { return e.again || e.ours }

// behind: taking e would go back, before the last item we won of its
// priority (our mark). An item that came again, one of ours that went to
// no one, and one of the block we went back to from there on, is not
// behind.
func (m *machine) behind(e *entry) bool {
	if e.exempt() || m.backSet && e.seq/blockSize == m.back && e.seq >= m.backFrom {
		return false
	}
	mark, ok := m.markOf(e.prio)
	return ok && e.seq < mark
}

// won notes an item we took or claimed: our mark moves up to it, and a
// block we avoided where we won it is ours; not for an item that came
// again.
func (m *machine) won(e *entry) {
	m.wins++
	if e.again {
		// A redelivery is out of the queue's order wherever it is: one
		// after our mark would move the mark past the rest of our block,
		// which no one else takes.
		return
	}
	if m.avoided(e) {
		// A write sent before the race we lost there landed: the block
		// is ours after all, and its items after e are ours to take even
		// if we took later ones meanwhile (for another call, believing
		// the block lost): no one else takes them.
		delete(m.blocks, e.seq/blockSize)
		m.back, m.backFrom, m.backSet = e.seq/blockSize, e.seq, true
	}
	switch {
	case !m.marked:
		m.mark, m.marked = e.itemName, true
		return
	case e.prio != m.mark.prio:
		// Keep the mark of the priority left; take up e's.
		if m.marks == nil {
			m.marks = make(map[int64]uint32)
		}
		m.marks[m.mark.prio] = m.mark.seq
		m.mark = itemName{prio: e.prio, seq: m.marks[e.prio]}
		delete(m.marks, e.prio)
	}
	if e.seq >= m.mark.seq {
		m.mark = e.itemName
	}
}

// avoiding: some block is avoided, in part or whole.
func (m *machine) avoiding() bool {
	for _, b := range m.blocks {
		if b.until > m.wins {
			return true
		}
	}
	return false
}

// avoided: e is in a part of a block another consumer holds. An item
// that came again, or one of ours that went to no one, is not.
func (m *machine) avoided(e *entry) bool {
	if e.exempt() {
		return false
	}
	b := m.blocks[e.seq/blockSize]
	return b != nil && b.until > m.wins && e.seq >= b.from && (b.to == 0 || e.seq < b.to)
}

// lostRace notes that another consumer took or claimed e first: its
// block, from e on, is avoided for a while (to the block's end, even in
// a half we stole: its holder took it back). A loss of an item before
// our mark is old news, and one of an item that came again (or of ours
// that went to no one) says nothing of who holds its block: every
// consumer may race for it, the holder too.
func (m *machine) lostRace(e *entry) {
	if e.exempt() || m.behind(e) || m.writingPast(e) {
		return
	}
	n := e.seq / blockSize
	b := m.blocks[n]
	if b == nil || b.until <= m.wins {
		m.forgetBlocks()
		b = &belief{from: e.seq}
		m.blocks[n] = b
	}
	b.from, b.to, b.until = min(b.from, e.seq), 0, m.wins+blockMemory
}

// writingPast: a take or claim of ours of a later item of e's block is in
// flight. We may hold the block past e: the loss waits for that write's
// answer, which says (a loss there is a loss of the block). Believed at
// once, the block is avoided while our write lands in it: a call after
// that takes from the next block, our mark moves there, and the rest of
// the block is left behind the marks of both consumers that took from it.
func (m *machine) writingPast(e *entry) bool {
	for _, t := range m.takers {
		if w := t.entry; w != nil && w.busy && w.prio == e.prio && w.seq > e.seq && w.seq/blockSize == e.seq/blockSize {
			return true
		}
	}
	return false
}

// forgetBlocks drops the beliefs that expired, once there are many.
func (m *machine) forgetBlocks() {
	if len(m.blocks) < 16 {
		return
	}
	for n, b := range m.blocks {
		if b.until <= m.wins {
			delete(m.blocks, n)
		}
	}
}

func (m *machine) bound(t *taker) bool { return t.entry != nil }

// bind gives e to t.
func (m *machine) bind(e *entry, t *taker) { e.taker, t.entry = t, e }

// unbind takes e back from its taker, which waits for another item.
func (m *machine) unbind(e *entry) {
	if e.taker != nil {
		e.taker.entry = nil
		e.taker = nil
	}
}

func (m *machine) read(o *out, e *entry) {
	if e.hasData || e.reading {
		return
	}
	e.reading = true
	o.Commands = append(o.Commands, readItem{Cmd: m.cmd(), Name: e.name})
}

func (m *machine) list(o *out, synced bool) {
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
	m.fsm.Fire(trList)
	o.Commands = append(o.Commands, listItems{Cmd: m.cmd(), Sync: synced, Watch: !m.watchArmed})
	if !m.watchArmed {
		m.watchArmed = true // a second one would fire twice
	}
}

func (m *machine) listedItems(o *out, i listed) {
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
	if m.stuckDue != "" && m.lists > m.stuckLists {
		m.stuckListed = true
	}
	m.fsm.Fire(trListed)
	if i.Dir != 0 {
		if m.dir != 0 && i.Dir != m.dir {
			// The queue's node was deleted (an empty container is
			// reaped) and created again: its sequence numbers started
			// over, and the names we know are those of old items. Forget
			// them, but for those a write of ours is bound to.
			clear(m.gone)
			m.marked, m.marks, m.backSet = false, nil, false
			clear(m.blocks)
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

func (m *machine) sortOrder() {
	m.order, m.head, m.dead = m.order[:0], 0, 0
	for _, e := range m.entries {
		m.order = append(m.order, e)
	}
	slices.SortFunc(m.order, func(a, b *entry) int { return compareItems(a.itemName, b.itemName) })
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
	if e == nil || e.claimRead != 0 && i.Cmd != e.claimRead {
		return // gone, or read ahead before our claim, whose read comes behind
	}
	claimRead := e.claimRead != 0
	e.reading, e.claimRead = false, 0
	switch {
	case i.Err == nil:
		e.data, e.hasData = i.Data, true
		if claimRead && !e.ours && i.Claims > 1 {
			// Read behind our claim, which made one change: the others
			// are a claim before ours and its end, whether we saw them or
			// not (a claim of a consumer whose session ended, that we
			// never raced for). Delivered again. (Not when it was our own
			// claim: one of ours that went to no one was never out.)
			e.again = true
		}
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

func (m *machine) removed(o *out, i removed) {
	m.owed--
	e := m.entries[i.Name]
	if e == nil {
		return
	}
	e.busy = false
	switch {
	case i.Err == nil:
		m.won(e)
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
	case errors.Is(i.Err, zk.ErrNoAuth):
		m.denied(o, e, i.Err)
	default:
		m.uncertain(o, e)
	}
}

// denied fails the call e was bound to with err, the server's refusal of
// its write for our identity (zk.ErrNoAuth): nothing was applied, and
// another try, on e or the next item, would be refused the same way.
func (m *machine) denied(o *out, e *entry, err error) {
	t := e.taker
	m.unbind(e)
	if t != nil {
		m.dropTaker(t)
		m.reply(o, t.req, nil, err)
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

// restoreItem creates again, at its place (its own name), an item we
// removed for a caller that did not take it.
func (m *machine) restoreItem(o *out, name string, data []byte) {
	m.restore[name] = data
	m.owed++
	o.Commands = append(o.Commands, restoreItem{Cmd: m.cmd(), Name: name, Data: data})
}

// restored: an item put back is in the queue again, or, when the
// connection failed first, is put back once it is up again (a create
// applied before its reply was lost then finds the item there).
func (m *machine) restored(o *out, i restored) {
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
func (m *machine) cacheAgain(name string, data []byte) {
	delete(m.gone, name)
	n, ok := parseItem(name)
	if !ok || m.entries[name] != nil {
		return
	}
	m.entries[name] = &entry{itemName: n, data: data, hasData: true, ours: true}
	m.exceptHint = true
	m.sortOrder()
}

// restoreAgain sends again, once connected, the put-backs the connection
// failed.
func (m *machine) restoreAgain(o *out) {
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
func (m *machine) refused(o *out, t taken) {
	if t.Session == 0 {
		m.restoreItem(o, t.Name, t.Data)
		return
	}
	m.ack(o, ackCall{Name: t.Name, Session: t.Session, Nack: true, Back: true})
}

func (m *machine) claimed(o *out, i claimed) {
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
		m.won(e)
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
		e.ours, m.exceptHint = true, true
		m.unbind(e)
	case errors.Is(i.Err, zk.ErrNoAuth):
		m.denied(o, e, i.Err)
	default:
		m.uncertain(o, e)
	}
}

// deliverClaim gives a claimed item to its caller, or gives the claim
// back when the caller stopped waiting.
func (m *machine) deliverClaim(o *out, e *entry) {
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
func (m *machine) handOut(o *out, e *entry, req uint64) {
	if e.again {
		m.event(o, events.Redelivered, m.node(e.name), nil)
		e.again = false
	}
	m.event(o, events.Claimed, m.node(e.name), nil)
	m.reply(o, req, taken{Name: e.name, Data: e.data, Session: m.claims[e.name]}, nil)
}

// othersClaim notes that another consumer holds e's claim, and watches it.
func (m *machine) othersClaim(o *out, e *entry) {
	e.others = true
	if !e.watching {
		e.watching = true
		o.Commands = append(o.Commands, watchClaim{Cmd: m.cmd(), Name: e.name})
	}
}

// uncertain notes that our last write on e may or may not have been
// applied (its reply was lost); it is checked once the session is back.
func (m *machine) uncertain(o *out, e *entry) {
	m.uncert[e.name] = true
	if m.connected {
		m.owed++
		o.Commands = append(o.Commands, checkItem{Cmd: m.cmd(), Name: e.name})
	}
}

func (m *machine) checked(o *out, i checked) {
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
			// The claim went with its session: the item comes again.
			delete(m.claims, e.name)
			e.mine, e.again, m.exceptHint = false, true, true
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
		e.retried, e.ours, m.exceptHint = true, true, true
		m.unbind(e) // not applied: try again
	}
}

func (m *machine) ack(o *out, i ackCall) {
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
func (m *machine) joinNext(o *out, i ackCall) bool {
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
// comes within config.ClaimAhead, is given back (see aheadWaited) with no
// NACKED event: it was never out. Meanwhile no other consumer can take it,
// as with any claim. Not when a claim ahead is already out or in flight.
func (m *machine) claimAhead(o *out, i ackCall) bool {
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
func (m *machine) claimNext(o *out, i ackCall, t *taker) bool {
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
func (m *machine) takeAhead(o *out, req uint64) bool {
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
func (m *machine) aheadInFlight() *taker {
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
func (m *machine) dropAheadInFlight() {
	t := m.aheadInFlight()
	if t == nil {
		return
	}
	t.withdrawn = true
	if e := t.entry; e != nil {
		if e.busy || m.uncert[e.name] {
			return
		}
		// Never out: not a redelivery when it comes again, but ours to
		// take, wherever our mark is now.
		e.mine, e.ours, m.exceptHint = false, true, true
		m.unbind(e)
	}
	m.dropTaker(t)
}

// aheadToTaker gives the item claimed ahead to the first TakeItem that
// came while the connection was down, now that the same session is back.
func (m *machine) aheadToTaker(o *out) {
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

// aheadWaited: the item claimed ahead waited config.ClaimAhead and no
// TakeItem came: its claim is given back. While the connection is down it
// waits again (a request sent now could go out on the next session, see
// heldAcks).
func (m *machine) aheadWaited(o *out) {
	e := m.ahead
	switch {
	case e == nil:
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
func (m *machine) giveAheadBack(o *out) {
	if e := m.ahead; e != nil && m.connected {
		m.ahead = nil
		m.endClaim(o, e.name, ackOp{nack: true, back: true})
	}
}

// plainWaiting: a take, poll or peek waits.
func (m *machine) plainWaiting() bool {
	return slices.ContainsFunc(m.takers, func(w *taker) bool { return w.kind != kindClaim })
}

// givingBack: an item that was never out is on its way back to its
// place: a claim ahead or a claim no caller took being given back, an
// item a take removed for no caller being put back, or the delete or
// claim of a withdrawn call still in flight (what it brings is given
// back). It comes before the items a take would get now: until it is
// back, takes and claims wait, or they would hand the items out of order.
// (A nacked item was out: it comes again later, as any redelivery does.)
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

// adopt gives take call i the item whose delete or claim a withdrawn call
// of the same kind left in flight: the item is the head, and it goes to
// i once the write is through, as it would have to that call (given
// back, it would come later than the items after it). Not a claim
// ahead's (see takeAhead), nor a joint's.
func (m *machine) adopt(i takeCall) bool {
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
func (m *machine) aheadOut() bool {
	return m.ahead != nil || m.aheadInFlight() != nil
}

// waitAhead starts the wait of the item claimed ahead.
func (m *machine) waitAhead(o *out) {
	m.aheadWait = m.cmd()
	o.Commands = append(o.Commands, wait{Cmd: m.aheadWait, For: m.cfg.ClaimAhead})
}

// claimWith sends write, the request that claims e, and the read of e's
// data behind it: the claim and the read go out together, the read
// behind, so its data is the claimed node's, whatever was read ahead.
func (m *machine) claimWith(o *out, e *entry, write command) {
	e.busy = true
	o.Commands = append(o.Commands, write)
	e.data, e.hasData, e.reading = nil, false, true
	e.claimRead = m.cmd()
	o.Commands = append(o.Commands, readItem{Cmd: e.claimRead, Name: e.name})
}

// releaseAcks sends the held acks (the session is back) or refuses them
// (it is lost: m.claims is empty, so ack says ErrClaimLost).
func (m *machine) releaseAcks(o *out) {
	held := m.heldAcks
	m.heldAcks = nil
	for _, i := range held {
		m.ack(o, i)
	}
}

// beginAck notes a, the ack or nack of our claim on item name, in flight,
// with the claim's session, which it returns.
func (m *machine) beginAck(name string, a ackOp) int64 {
	a.session = m.claims[name]
	m.acks[name] = a
	return a.session
}

// onOurSession: a request made on session (0: while the session changed)
// was made on the session the machine knows.
func (m *machine) onOurSession(session int64) bool {
	return session != 0 && session == m.session
}

// endClaim acks or nacks our claim on item name, as a says.
func (m *machine) endClaim(o *out, name string, a ackOp) {
	session := m.beginAck(name, a)
	m.owed++
	o.Commands = append(o.Commands, endClaim{Cmd: m.cmd(), Name: name, Nack: a.nack, Session: session})
}

func (m *machine) acked(o *out, i acked) {
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
			// Gone with its session, whose end we may learn only after
			// this reply (sessionLost then finds the item not ours): the
			// item comes again.
			e.mine, e.again, m.exceptHint = false, true, true
		}
		m.reply(o, req, nil, fmt.Errorf("%w: %s", errs.claimLost, m.node(i.Name)))
	case errors.Is(i.Err, zk.ErrNoAuth): // refused: nothing was applied, our claim stays
		delete(m.acks, i.Name)
		m.reply(o, req, nil, i.Err)
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
func (m *machine) claimEnded(o *out, name string, e *entry, a ackOp, uncertain error) {
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
		e.mine, e.again, e.ours, e.retried = false, e.again || !a.back, e.ours || a.back, false
		m.exceptHint = true
	case e != nil:
		m.markGone(e)
	default:
		m.gone[name] = m.lists
	}
	m.reply(o, a.req, nil, nil)
}

func (m *machine) offered(o *out, i offered) {
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

func (m *machine) cancel(o *out, req uint64) {
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

func (m *machine) sessionChange(o *out, i sessionChange) {
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
func (m *machine) recheck(o *out) {
	for _, name := range slices.Sorted(maps.Keys(m.uncert)) {
		m.owed++
		o.Commands = append(o.Commands, checkItem{Cmd: m.cmd(), Name: name})
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
	m.event(o, events.Lost, "", errs.sessionLost)
	if m.ahead != nil {
		// Never out: not a redelivery when it comes again.
		m.ahead.mine, m.ahead.ours, m.ahead = false, true, nil
		m.exceptHint = true
	}
	m.dropAheadInFlight()
	for _, e := range m.order {
		if e.mine || e.others {
			e.again, m.exceptHint = true, true // it comes again, claimed by no one
		}
		e.mine, e.others, e.watching = false, false, false
	}
	clear(m.claims)
	m.releaseAcks(o)
	m.watchArmed, m.stale = false, true
}

func (m *machine) failTakers(o *out, err error) {
	for _, t := range slices.Clone(m.takers) {
		if m.bound(t) {
			continue
		}
		m.dropTaker(t)
		m.reply(o, t.req, nil, err)
	}
}

func (m *machine) dropTaker(t *taker) {
	if i := slices.Index(m.takers, t); i >= 0 {
		m.takers = slices.Delete(m.takers, i, i+1)
	}
}

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
	m.failTakers(o, errs.closed)
	for _, i := range m.heldAcks {
		m.reply(o, i.Req, nil, errs.closed) // the claim is given back when the session is
	}
	m.heldAcks = nil
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
			a := ackOp{nack: true}
			if m.ahead != nil && m.ahead.name == name {
				m.ahead, a.back = nil, true
			}
			m.endClaim(o, name, a)
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
	for name, s := range m.claims {
		if s == m.session {
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
