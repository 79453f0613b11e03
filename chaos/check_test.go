package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/queue"
)

// holdKind says what a hold conflicts with.
type holdKind int

const (
	exclusive holdKind = iota // a lock hold or a leadership term
	readHold                  // a read lock: conflicts with writes only
	writeHold                 // a write lock: conflicts with everything
	leaseHold                 // a semaphore lease: at most maxLeases at once
)

func (k holdKind) String() string {
	return [...]string{"exclusive", "read", "write", "lease"}[k]
}

func conflict(a, b holdKind) bool {
	switch {
	case a == leaseHold || b == leaseHold:
		return false // counted instead
	case a == readHold && b == readHold:
		return false
	}
	return true
}

// hold is one grant as its handle reported it: from the grant (the
// ELECTED_COMPLETE event, published before the caller hears of it) to its
// end (FAILED, LOST or STOP_START, published before the grant's Lost
// closes and before any request that could let another holder in).
type hold struct {
	resource string // the lock's, election's or semaphore's path
	who      string
	kind     holdKind
	term     uint64
	token    int64
	start    time.Time
	end      time.Time
	open     bool // never ended (end is when the recording stopped)
}

func (h hold) String() string {
	s := fmt.Sprintf("%s %s term %d token %#x from %s to %s", h.who, h.kind, h.term, h.token,
		h.start.Format("15:04:05.000000"), h.end.Format("15:04:05.000000"))
	if h.open {
		s += " (never ended)"
	}
	return s
}

// holdsFromEvents turns a handle's lifecycle events into its holds. A
// handle with several instances (a semaphore's leases) has its terms told
// apart by instance. It also returns a problem if events were missed.
func holdsFromEvents(resource, who string, kind holdKind, evs []events.Event, stopped time.Time) ([]hold, []string) {
	type key struct {
		inst string
		term uint64
	}
	var (
		out      []hold
		problems []string
		open     = map[key]*hold{}
	)
	for _, ev := range evs {
		k := key{ev.Instance, ev.Term}
		switch ev.Type {
		case events.Overflow:
			problems = append(problems, fmt.Sprintf("%s: %d events missed", who, ev.Missed))
		case events.ElectedComplete:
			open[k] = &hold{resource: resource, who: who, kind: kind, term: ev.Term, token: ev.Token, start: ev.Time}
		case events.Failed, events.Lost, events.StopStart:
			if h, ok := open[k]; ok {
				h.end = ev.Time
				out = append(out, *h)
				delete(open, k)
			}
		}
	}
	for _, h := range open {
		h.end, h.open = stopped, true
		out = append(out, *h)
	}
	return out, problems
}

// checkExclusion reports every pair of conflicting holds on one resource
// that overlap in time, and every instant more than maxLeases leases were
// out (maxLeases 0: no leases expected).
func checkExclusion(holds []hold, maxLeases int) []string {
	var bad []string
	byRes := map[string][]hold{}
	for _, h := range holds {
		byRes[h.resource] = append(byRes[h.resource], h)
	}
	for _, res := range slices.Sorted(maps.Keys(byRes)) {
		hs := byRes[res]
		slices.SortFunc(hs, func(a, b hold) int { return a.start.Compare(b.start) })
		var active []hold
		for _, h := range hs {
			active = slices.DeleteFunc(active, func(a hold) bool { return !a.end.After(h.start) })
			leases := 1
			for _, a := range active {
				if a.kind == leaseHold && h.kind == leaseHold {
					leases++
				}
				if conflict(a.kind, h.kind) && len(bad) < 20 {
					bad = append(bad, fmt.Sprintf("%s: two holds overlap: %v and %v", res, a, h))
				}
			}
			if h.kind == leaseHold && leases > maxLeases && len(bad) < 20 {
				bad = append(bad, fmt.Sprintf("%s: %d leases out at once (max %d), the last %v", res, leases, maxLeases, h))
			}
			active = append(active, h)
		}
	}
	return bad
}

// checkTermTokens reports terms of one resource whose token is not above
// that of the term before (in grant order).
func checkTermTokens(holds []hold) []string {
	var bad []string
	byRes := map[string][]hold{}
	for _, h := range holds {
		byRes[h.resource] = append(byRes[h.resource], h)
	}
	for _, res := range slices.Sorted(maps.Keys(byRes)) {
		hs := byRes[res]
		slices.SortFunc(hs, func(a, b hold) int { return a.start.Compare(b.start) })
		for i := 1; i < len(hs) && len(bad) < 20; i++ {
			if hs[i].token <= hs[i-1].token {
				bad = append(bad, fmt.Sprintf("%s: token went down: %v after %v", res, hs[i], hs[i-1]))
			}
		}
	}
	return bad
}

// fencedWrite is one guarded write the server accepted: the fence node's
// mzxid after it orders them as the server applied them.
type fencedWrite struct {
	fence string
	who   string
	token int64
	mzxid int64
}

// checkFencing reports accepted guarded writes whose token is below the
// one accepted before it on the same fence node.
func checkFencing(ws []fencedWrite) []string {
	var bad []string
	byFence := map[string][]fencedWrite{}
	for _, w := range ws {
		byFence[w.fence] = append(byFence[w.fence], w)
	}
	for _, f := range slices.Sorted(maps.Keys(byFence)) {
		ws := byFence[f]
		slices.SortFunc(ws, func(a, b fencedWrite) int { return cmp.Compare(a.mzxid, b.mzxid) })
		for i := 1; i < len(ws) && len(bad) < 20; i++ {
			if ws[i].token < ws[i-1].token {
				bad = append(bad, fmt.Sprintf("%s: guarded write by %s with token %#x accepted after %s's token %#x",
					f, ws[i].who, ws[i].token, ws[i-1].who, ws[i-1].token))
			}
		}
	}
	return bad
}

// queueLedger is what the queue's producers and consumers did.
type queueLedger struct {
	mu        sync.Mutex
	offered   map[string]bool // item → its Offer returned nil (false: the outcome is unknown)
	delivered map[string]int  // item → times TakeItem returned it
	acked     map[string]int  // item → Acks that returned nil
	ackMaybe  map[string]int  // item → Acks whose outcome is unknown
	ackedAt   map[string]time.Time
	node      map[string]string // item → the node TakeItem first returned it as
	item      map[string]string // node → the item TakeItem first returned from it
	pending   int               // offered for sure and not settled by an ack yet
	problems  []string
	start     time.Time
	trail     map[string][]string // item → its offer, deliveries and acks, for a report
	events    []consumerEvent     // every consumer's lifecycle events, for a report
}

// consumerEvent is a lifecycle event of consumer who, at its time from the
// ledger's start.
type consumerEvent struct {
	at  time.Duration
	who string
	ev  events.Event
}

func newQueueLedger() *queueLedger {
	return &queueLedger{offered: map[string]bool{}, delivered: map[string]int{}, acked: map[string]int{},
		ackMaybe: map[string]int{}, ackedAt: map[string]time.Time{}, node: map[string]string{}, item: map[string]string{},
		start: time.Now(), trail: map[string][]string{}}
}

// note adds what just happened to item to its trail, timed from the
// ledger's start. The caller holds l.mu.
func (l *queueLedger) note(item, format string, args ...any) {
	at := time.Since(l.start).Seconds()
	l.trail[item] = append(l.trail[item], fmt.Sprintf("%.3fs ", at)+fmt.Sprintf(format, args...))
}

// record keeps consumer who's lifecycle events until its handle closes.
func (l *queueLedger) record(who string, q *queue.Queue) {
	sub := q.Subscribe()
	go func() {
		for ev := range sub.C {
			l.mu.Lock()
			l.events = append(l.events, consumerEvent{at: ev.Time.Sub(l.start), who: who, ev: ev})
			l.mu.Unlock()
		}
	}()
}

// eventsAround lists the events of node, and the session events of the
// consumers it went to, from 3 s before its first to 3 s after its last.
// The caller holds l.mu.
func (l *queueLedger) eventsAround(node string) []string {
	var first, last time.Duration = -1, -1
	whos := map[string]bool{}
	for _, c := range l.events {
		if c.ev.Node == node {
			if first < 0 {
				first = c.at
			}
			last = c.at
			whos[c.who] = true
		}
	}
	var out []string
	for _, c := range l.events {
		if c.ev.Node == node || whos[c.who] && c.ev.Node == "" && c.at >= first-3*time.Second && c.at <= last+3*time.Second {
			line := fmt.Sprintf("%.3fs %s: %s session=%x", c.at.Seconds(), c.who, c.ev.Type, c.ev.SessionID)
			if c.ev.Err != nil {
				line += fmt.Sprintf(" (%v)", c.ev.Err)
			}
			out = append(out, line)
		}
	}
	return out
}

// offer records who's Offer of item and its answer: nil, the item is in
// the queue; an error, its outcome is unknown.
func (l *queueLedger) offer(item, who string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.note(item, "%s: Offer: %v", who, err)
	l.offered[item] = err == nil
	if err == nil && l.acked[item] == 0 && l.ackMaybe[item] == 0 {
		l.pending++
	}
}

// deliver records that who's TakeItem returned item, as node. An item
// has one node (it comes again at its place), and a node one item: a
// delivery that pairs them otherwise gave one item's data for another's
// node, whose ack then removes the other item, counted for this one.
func (l *queueLedger) deliver(item, who, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.note(item, "%s: TakeItem: %s", who, node)
	l.delivered[item]++
	if _, ok := l.ackedAt[item]; ok {
		l.problem("%s delivered to %s after its ack succeeded", item, who)
	}
	if n, ok := l.node[item]; !ok {
		l.node[item] = node
	} else if n != node {
		l.problem("%s delivered to %s as %s, before as %s", item, who, node, n)
	}
	if it, ok := l.item[node]; !ok {
		l.item[node] = item
	} else if it != item {
		l.problem("%s delivered to %s with %s's data, before with %s's", node, who, item, it)
	}
}

// problem keeps a report of something that must not happen, up to 20.
// The caller holds l.mu.
func (l *queueLedger) problem(format string, args ...any) {
	if len(l.problems) < 20 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

// ack records who's Ack of item and its answer: nil, acked; ErrClaimLost,
// nothing was removed (the item comes again); another error, maybe acked.
func (l *queueLedger) ack(item, who string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.note(item, "%s: Ack: %v", who, err)
	if errors.Is(err, queue.ErrClaimLost) {
		return
	}
	if l.offered[item] && l.acked[item] == 0 && l.ackMaybe[item] == 0 {
		l.pending--
	}
	if err == nil {
		l.acked[item]++
		l.ackedAt[item] = time.Now()
	} else {
		l.ackMaybe[item]++
	}
}

// backlog is the number of items offered (for sure) and not yet acked.
func (l *queueLedger) backlog() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending
}

// unacked returns the items offered successfully that no ack (certain or
// not) has settled yet.
func (l *queueLedger) unacked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for it, ok := range l.offered {
		if ok && l.acked[it] == 0 && l.ackMaybe[it] == 0 {
			out = append(out, it)
		}
	}
	slices.Sort(out)
	return out
}

// check reports items acked twice, acked items never offered, and offered
// items never acked.
func (l *queueLedger) check() []string {
	l.mu.Lock()
	bad := slices.Clone(l.problems)
	for it, n := range l.acked {
		if n > 1 {
			bad = append(bad, fmt.Sprintf("%s acked %d times", it, n))
		}
	}
	for it := range l.delivered {
		if _, ok := l.offered[it]; !ok {
			bad = append(bad, fmt.Sprintf("%s delivered but never offered", it))
		}
	}
	l.mu.Unlock()
	lost := l.unacked()
	l.mu.Lock()
	for _, it := range lost {
		report := fmt.Sprintf("%s offered but never acked (lost): %s", it, strings.Join(l.trail[it], "; "))
		if node, ok := l.node[it]; ok {
			report += fmt.Sprintf("; the events of %s and its consumers' sessions: %s", node, strings.Join(l.eventsAround(node), "; "))
		}
		bad = append(bad, report)
	}
	l.mu.Unlock()
	if len(bad) > 30 {
		bad = append(bad[:30], fmt.Sprintf("... and %d more", len(bad)-30))
	}
	return bad
}

func (l *queueLedger) counts() (offered, uncertain, delivered, acked int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ok := range l.offered {
		if ok {
			offered++
		} else {
			uncertain++
		}
	}
	for _, n := range l.delivered {
		delivered += n
	}
	for _, n := range l.acked {
		acked += n
	}
	return
}

// A lost item is reported with its trail: who offered it, who took it
// and what each Ack said.
func TestLedgerReportsALostItemsTrail(t *testing.T) {
	l := newQueueLedger()
	l.offer("a", "producer0", nil)
	l.deliver("a", "consumer1", "/q/qn-0000000001")
	l.ack("a", "consumer1", fmt.Errorf("%w: /q/qn-0000000001", queue.ErrClaimLost))
	l.events = []consumerEvent{
		{at: time.Second, who: "consumer1", ev: events.Event{Type: events.Suspended, SessionID: 0x1f}},
		{at: 2 * time.Second, who: "consumer1", ev: events.Event{Type: events.Claimed, Node: "/q/qn-0000000001", SessionID: 0x1f}},
		{at: 9 * time.Second, who: "consumer1", ev: events.Event{Type: events.Reconnected, SessionID: 0x1f}},
		{at: 3 * time.Second, who: "consumer2", ev: events.Event{Type: events.Suspended, SessionID: 0x2f}},
	}
	l.offer("b", "producer0", nil)
	l.ack("b", "consumer1", nil)
	bad := l.check()
	if len(bad) != 1 {
		t.Fatalf("check() = %q, want one report (a lost)", bad)
	}
	if strings.Contains(bad[0], "RECONNECTED") || strings.Contains(bad[0], "consumer2") {
		t.Errorf("the report %q has events more than 3 s away, or of a consumer the item never went to", bad[0])
	}
	for _, want := range []string{"a offered but never acked (lost): ", "producer0: Offer: <nil>; ", "consumer1: TakeItem: /q/qn-0000000001; ", "consumer1: Ack: queue: claim lost",
		"the events of /q/qn-0000000001 and its consumers' sessions: 1.000s consumer1: SUSPENDED session=1f; 2.000s consumer1: CLAIMED session=1f"} {
		if !strings.Contains(bad[0], want) {
			t.Errorf("the report %q lacks %q", bad[0], want)
		}
	}
}

// A delivery that pairs an item with another item's node is reported.
func TestLedgerReportsAnItemDeliveredFromAnotherNode(t *testing.T) {
	l := newQueueLedger()
	l.offer("a", "producer0", nil)
	l.offer("b", "producer0", nil)
	l.deliver("a", "consumer0", "/q/qn-0000000001")
	l.deliver("a", "consumer1", "/q/qn-0000000001") // again at its place: fine
	l.deliver("b", "consumer1", "/q/qn-0000000001")
	l.deliver("a", "consumer0", "/q/qn-0000000002")
	l.ack("a", "consumer0", nil)
	l.ack("b", "consumer1", nil)
	bad := strings.Join(l.check(), "\n")
	for _, want := range []string{
		"/q/qn-0000000001 delivered to consumer1 with b's data, before with a's",
		"a delivered to consumer0 as /q/qn-0000000002, before as /q/qn-0000000001",
	} {
		if !strings.Contains(bad, want) {
			t.Errorf("check() = %q, lacks %q", bad, want)
		}
	}
}
