package queue

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

const sess = 0x100

// transcript drives a machine with scripted inputs and records, for each
// input, the events, replies and commands it produced and the state after.
type transcript struct {
	*golden.Transcript
	m    *machine
	sent []command // the commands the machine sent, in order
}

func newTranscript(t *testing.T) *transcript {
	m, err := newMachine(config{Path: "/app/q", ClaimData: []byte("me"), SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	tr := &transcript{m: m, Transcript: &golden.Transcript{T: t, State: m.State,
		Event: func(e events.Event) string {
			if e.Node == "" {
				return fmt.Sprintf("%s state=%s", e.Type, e.State)
			}
			return fmt.Sprintf("%s state=%s node=%s", e.Type, e.State, e.Node)
		},
		Value: func(v any) string {
			switch v := v.(type) {
			case nil:
				return ""
			case taken:
				s := fmt.Sprintf("item=%s data=%q", v.Name, v.Data)
				if v.Session != 0 {
					s += fmt.Sprintf(" claim.session=%#x", v.Session)
				}
				return s
			default:
				return fmt.Sprint(v)
			}
		},
	}}
	record(m.fsm)
	golden.Record(tr.Transcript, "(start)", runtime.Output[shownCommand]{Events: m.Start().Events})
	t.Cleanup(func() {
		if err := m.Bug(); err != nil {
			t.Errorf("an illegal transition: %v", err)
		}
	})
	return tr
}

func (tr *transcript) step(in input) runtime.Output[command] {
	out := tr.m.Step(in)
	shown := runtime.Output[shownCommand]{Events: out.Events, Replies: out.Replies, Done: out.Done}
	for _, c := range out.Commands {
		shown.Commands = append(shown.Commands, shownCommand{c})
	}
	golden.Record(tr.Transcript, show(in), shown)
	tr.sent = append(tr.sent, out.Commands...)
	return out
}

// shownCommand is a command as a transcript shows it (see show).
type shownCommand struct{ command }

func (c shownCommand) String() string { return show(c.command) }

// show is an input or command as a transcript shows it: its type and its
// fields that are set, data as text and sessions in hex; the shell's
// standard inputs in their own form.
func show(v any) string {
	switch v.(type) {
	case runtime.SessionChange, runtime.Cancel, runtime.Shutdown, runtime.Handover:
		return fmt.Sprint(v)
	}
	rv := reflect.ValueOf(v)
	b := []string{rv.Type().Name()}
	for i := range rv.NumField() {
		f, name := rv.Field(i), strings.ToLower(rv.Type().Field(i).Name)
		if f.IsZero() {
			continue
		}
		switch x := f.Interface().(type) {
		case []byte:
			b = append(b, fmt.Sprintf("%s=%q", name, x))
		case int64:
			b = append(b, fmt.Sprintf("%s=%#x", name, x))
		case taken:
			b = append(b, fmt.Sprintf("%s=%s/%q/%#x", name, x.Name, x.Data, x.Session))
		default:
			b = append(b, fmt.Sprintf("%s=%v", name, x))
		}
	}
	return strings.Join(b, " ")
}

// last is the id of the last command of type C the machine sent for item
// name ("" for a command with no item).
func last[C command](tr *transcript, name string) uint64 {
	tr.T.Helper()
	for i := len(tr.sent) - 1; i >= 0; i-- {
		if c, ok := tr.sent[i].(C); ok && itemOf(c) == name {
			return c.ID()
		}
	}
	var c C
	tr.T.Fatalf("no %T sent for %q", c, name)
	return 0
}

// itemOf is the item a command is about ("" for none).
func itemOf(c command) string {
	switch c := c.(type) {
	case readItem:
		return c.Name
	case removeItem:
		return c.Name
	case claimItem:
		return c.Name
	case watchClaim:
		return c.Name
	case endClaim:
		return c.Name
	case checkItem:
		return c.Name
	case restoreItem:
		return c.Name
	}
	return ""
}

// claimHead has TakeItem (req 1) list qn-0000000001, qn-0000000002 and
// the items more, read them, and claim the head, "a" (version 1 after the
// claim).
func (tr *transcript) claimHead(more ...string) {
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	tr.step(listed{Cmd: 1, Children: append([]string{"qn-0000000001", "qn-0000000002"}, more...), Watched: true})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000002"), Name: "qn-0000000002", Data: []byte("b")})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000001"), Name: "qn-0000000001", Data: []byte("a")})
	tr.step(claimed{Cmd: last[claimItem](tr, "qn-0000000001"), Name: "qn-0000000001", Session: sess, Version: 1})
}

// ackReplyLost claims the head (see claimHead) and acks it (request 2);
// the ack's reply is lost, and a check of the item is asked.
func (tr *transcript) ackReplyLost() {
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess})
	tr.step(acked{Cmd: last[endClaim](tr, "qn-0000000001"), Name: "qn-0000000001", Err: zk.ErrConnectionLoss})
}

// takeHead has Take (req 1) list qn-0000000001 and qn-0000000002 and
// read their data, "a" and "b": the delete of the head is in flight.
func (tr *transcript) takeHead() {
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001", "qn-0000000002"}, Watched: true})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000001"), Name: "qn-0000000001", Data: []byte("a")})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000002"), Name: "qn-0000000002", Data: []byte("b")})
}

// claimInFlight has TakeItem (req 1) list item alone and read its data,
// "a": the claim it returns is in flight.
func (tr *transcript) claimInFlight(item string) claimItem {
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	tr.step(listed{Cmd: 1, Children: []string{item}, Watched: true})
	out := tr.step(dataRead{Cmd: last[readItem](tr, item), Name: item, Data: []byte("a")})
	return commands[claimItem](out)[0]
}

// replies returns the replies of out to req.
func replied(out runtime.Output[command], req uint64) (runtime.Reply, bool) {
	for _, r := range out.Replies {
		if r.Req == req {
			return r, true
		}
	}
	return runtime.Reply{}, false
}

// One take: listed, the head's data read (and the next ones' ahead), the
// head deleted; the next take finds the next item's data already there.
func TestTranscriptTakeReadsAhead(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000002", "qn-0000000001", "lock"}, Watched: true})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000001"), Name: "qn-0000000001", Data: []byte("a")})
	tr.step(takeCall{Req: 2, Kind: kindTake})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000002"), Name: "qn-0000000002", Data: []byte("b")})
	out := tr.step(removed{Cmd: last[removeItem](tr, "qn-0000000001"), Name: "qn-0000000001"})
	if r, ok := replied(out, 1); !ok || string(r.Value.(taken).Data) != "a" {
		t.Fatalf("the first take got %v", out.Replies)
	}
	tr.step(removed{Cmd: last[removeItem](tr, "qn-0000000002"), Name: "qn-0000000002"})
	tr.Check("take_reads_ahead")
}

// Our claim's session ends before the ack: the ack is refused with
// ErrClaimLost, and the item comes again (here to us, after a listing).
func TestTranscriptClaimLost(t *testing.T) {
	tr := newTranscript(t)
	claim := tr.claimInFlight("qn-0000000001")
	tr.step(claimed{Cmd: claim.Cmd, Name: "qn-0000000001", Session: sess, Version: 1})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(runtime.SessionChange{State: zk.StateLost})
	tr.step(childrenChanged{Cmd: 1})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: 0x200})
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess})
	tr.step(listed{Cmd: last[listItems](tr, ""), Children: []string{"qn-0000000001"}, Watched: true})
	out := tr.step(takeCall{Req: 3, Kind: kindClaim})
	if c := commands[claimItem](out); len(c) != 1 || c[0].Version != 1 {
		t.Fatalf("TakeItem: %v, want a claim of the item at version 1", out.Commands)
	}
	out = tr.step(claimed{Cmd: last[claimItem](tr, "qn-0000000001"), Name: "qn-0000000001", Session: 0x200, Version: 2})
	if len(out.Events) != 2 || out.Events[0].Type != events.Redelivered {
		t.Fatalf("events %v, want REDELIVERED and CLAIMED", out.Events)
	}
	tr.Check("claim_lost")
}

// Another consumer holds the head's claim; when its claim goes (nack or
// expiry), our waiting claim gets the item: REDELIVERED, then CLAIMED.
// The claim that failed bumped nothing; ours is made at the version read
// again.
func TestTranscriptRedelivery(t *testing.T) {
	tr := newTranscript(t)
	claim := tr.claimInFlight("qn-0000000001")
	tr.step(claimed{Cmd: claim.Cmd, Name: "qn-0000000001", Err: zk.ErrNodeExists})
	tr.step(claimWatched{Cmd: last[watchClaim](tr, "qn-0000000001"), Name: "qn-0000000001", Exists: true})
	out := tr.step(claimGone{Cmd: last[watchClaim](tr, "qn-0000000001"), Name: "qn-0000000001", Deleted: true})
	if c := commands[claimItem](out); len(c) != 1 {
		t.Fatalf("the claim gone: %v, want our claim", out.Commands)
	}
	tr.step(claimed{Cmd: last[claimItem](tr, "qn-0000000001"), Name: "qn-0000000001", Err: zk.ErrBadVersion})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000001"), Name: "qn-0000000001", Data: []byte("a"), Version: 1})
	tr.step(claimed{Cmd: last[claimItem](tr, "qn-0000000001"), Name: "qn-0000000001", Session: sess, Version: 2})
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess})
	if c := commands[endClaim](tr.step(acked{Cmd: last[endClaim](tr, "qn-0000000001"), Name: "qn-0000000001"})); len(c) != 0 {
		t.Fatal(c)
	}
	if c, _ := tr.sent[len(tr.sent)-1].(endClaim); c.Version != 2 {
		t.Fatalf("the ack checks version %d, want 2 (our claim's)", c.Version)
	}
	tr.Check("redelivery")
}

// An item of a higher priority arrives while a take chooses among cached
// items of a lower one: the take syncs and lists before it chooses, and
// gets the new item.
func TestTranscriptPriorityArrivesDuringTake(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000005-0000000001", "qn-0000000005-0000000002"}, Watched: true})
	// Offered meanwhile, priority 1; the watch has not fired yet.
	tr.step(listed{Cmd: last[listItems](tr, ""), Children: []string{"qn-0000000005-0000000001", "qn-0000000005-0000000002", "qn-0000000001-0000000003"}})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000001-0000000003"), Name: "qn-0000000001-0000000003", Data: []byte("urgent")})
	out := tr.step(removed{Cmd: last[removeItem](tr, "qn-0000000001-0000000003"), Name: "qn-0000000001-0000000003"})
	if r, ok := replied(out, 1); !ok || string(r.Value.(taken).Data) != "urgent" {
		t.Fatalf("the take got %v, want the urgent item", out.Replies)
	}
	tr.Check("priority_arrives_during_take")
}

// The reply to our claim comes after the session was lost and before the
// next one is known: the claim may live on either session (a request sent
// while disconnected is made on the next session). It is asked about once
// the session is back, and found ours on the new one: delivered with it,
// and with the version the check read, so that its Ack deletes it.
func TestTranscriptClaimReplyBetweenSessions(t *testing.T) {
	tr := newTranscript(t)
	claim := tr.claimInFlight("qn-0000000001")
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(claimed{Cmd: claim.Cmd, Name: "qn-0000000001", Session: sess + 1, Version: 1})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	out := tr.step(checked{Cmd: last[checkItem](tr, "qn-0000000001"), Name: "qn-0000000001", Session: sess + 1, ItemExists: true, ClaimOwner: sess + 1, Version: 1})
	r, ok := replied(out, 1)
	if !ok || r.Err != nil || r.Value.(taken).Session != sess+1 {
		t.Fatalf("the claim = %+v, want it delivered on session %#x", r, sess+1)
	}
	if end := commands[endClaim](tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess + 1})); len(end) != 1 || end[0].Version != 1 {
		t.Fatalf("the ack: %v, want a multi at version 1", end)
	}
	tr.Check("claim_reply_between_sessions")
}

func TestItemNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		prio int64
		seq  uint32
	}{
		{"qn-0000000007", true, 0, 7},
		{"qn-0000000003-0000000007", true, 3, 7},
		{"qn-2147483647", true, 0, 2147483647},
		{"qn-2147483648", false, 0, 0}, // ZooKeeper writes -2147483648
		{"qn-4294967296", false, 0, 0},
		{"qn-000000007", false, 0, 0},
		{"qn-00000000a7", false, 0, 0},
		{"qn-0000000003_0000000007", false, 0, 0},
		// ZooKeeper's counter after 2147483647: -2147483648 .. -000000001.
		{"qn--2147483648", true, 0, 2147483648},
		{"qn--000000001", true, 0, 4294967295},
		{"qn-0000000003--2147483647", true, 3, 2147483649},
		{"qn--2147483649", false, 0, 0},
		{"qn--0000000001", false, 0, 0},
		{"qn--000000000", false, 0, 0},
		{"_c_x-lock-0000000001", false, 0, 0},
		{"qn-", false, 0, 0},
	} {
		n, ok := parseItem(c.name)
		if ok != c.ok || ok && (n.prio != c.prio || n.seq != c.seq) {
			t.Errorf("parseItem(%q) = %+v, %t", c.name, n, ok)
		}
	}
	if p := itemPrefix(42, true); p != "qn-0000000042-" {
		t.Errorf("itemPrefix(42) = %q", p)
	}
	// Serial order: a sequence that wrapped past 2^32 stays after the
	// ones before the wrap.
	if compareItems(itemName{seq: 4294967295}, itemName{seq: 2}) >= 0 {
		t.Error("a wrapped sequence sorts before the ones before the wrap")
	}
}

// The queue's node, an empty container, was reaped and created again by
// the next offers: its sequence numbers started over, so the new head has
// the name of an item we acked before. The listing tells by the node's
// czxid, and the new head is claimed first. (Found by the chaos suite: the
// old name was held as gone for one listing, and the item after it was
// delivered first, breaking FIFO order with a single consumer.)
func TestTranscriptQueueNodeRecreated(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000000"}, Watched: true, Dir: 0x10})
	tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000000"), Name: "qn-0000000000", Data: []byte("old")})
	tr.step(claimed{Cmd: last[claimItem](tr, "qn-0000000000"), Name: "qn-0000000000", Session: sess, Version: 1})
	tr.step(ackCall{Req: 2, Name: "qn-0000000000", Session: sess})
	tr.step(acked{Cmd: last[endClaim](tr, "qn-0000000000"), Name: "qn-0000000000"})
	tr.step(childrenChanged{Cmd: 1})
	tr.step(takeCall{Req: 3, Kind: kindClaim})
	out := tr.step(listed{Cmd: last[listItems](tr, ""), Children: []string{"qn-0000000001", "qn-0000000000"}, Watched: true, Dir: 0x20})
	if r := commands[readItem](out); len(r) == 0 || r[0].Name != "qn-0000000000" {
		t.Fatalf("the take after the queue node was recreated reads %v first, want the new head qn-0000000000", r)
	}
	out = tr.step(dataRead{Cmd: last[readItem](tr, "qn-0000000000"), Name: "qn-0000000000", Data: []byte("new")})
	if c := commands[claimItem](out); len(c) != 1 || c[0].Name != "qn-0000000000" || string(c[0].Item) != "new" {
		t.Fatalf("claims %v, want the new head with its new data", c)
	}
	tr.Check("queue_node_recreated")
}

// A read of an item's data answers only the read in flight on that item.
// Here a take waits for a listing after a sync (its head has a priority)
// while the head's data is read ahead; the listing shows the queue's node
// made again, with an item of the same name. The old read's reply must
// not give the new item its data (a claim would write that data into it,
// and deliver it); the new item's own read does.
func TestTranscriptReadOfAnOldItemOfTheSameName(t *testing.T) {
	tr := newTranscript(t)
	const item = "qn-0000000001-0000000000"
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	out := tr.step(listed{Cmd: 1, Children: []string{item}, Watched: true, Dir: 0x10})
	old, synced := last[readItem](tr, item), commands[listItems](out)
	if len(synced) != 1 || !synced[0].Sync {
		t.Fatalf("commands %v, want a listing after a sync", out.Commands)
	}
	tr.step(listed{Cmd: synced[0].Cmd, Children: []string{item}, Dir: 0x20})
	if out := tr.step(dataRead{Cmd: old, Name: item, Data: []byte("old")}); len(commands[claimItem](out)) != 0 {
		t.Fatalf("claims %v with the old item's data", commands[claimItem](out))
	}
	out = tr.step(dataRead{Cmd: last[readItem](tr, item), Name: item, Data: []byte("new")})
	if c := commands[claimItem](out); len(c) != 1 || string(c[0].Item) != "new" {
		t.Fatalf("claims %v, want the new item with its own data", c)
	}
	tr.Check("read_of_an_old_item_of_the_same_name")
}

// commands are out's commands of type C, in order.
func commands[C any](o out) []C {
	var cs []C
	for _, c := range o.Commands {
		if c, ok := c.(C); ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// Consume's ack claims the next item in the same multi (one write round
// trip for both), at the version read ahead: the call answers once the
// ack is through and the next item is claimed, with its data.
func TestTranscriptAckClaimsNextInOneMulti(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	out := tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: true})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Next != "qn-0000000002" || ends[0].Version != 1 || string(ends[0].NextData) != "b" {
		t.Fatalf("the ack's commands %v, want one EndClaim with the next claim", out.Commands)
	}
	end := last[endClaim](tr, "qn-0000000001")
	tr.step(acked{Cmd: end, Name: "qn-0000000001"})
	out = tr.step(claimed{Cmd: end, Name: "qn-0000000002", Session: sess, Version: 1})
	if r, ok := replied(out, 2); !ok || r.Err != nil || string(r.Value.(taken).Data) != "b" {
		t.Fatalf("the joint call = %+v, want acked and item b", out.Replies)
	}
	// Nothing next in the cache: the ack alone, answered with no item.
	out = tr.step(ackCall{Req: 3, Name: "qn-0000000002", Session: sess, Next: true})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Next != "" {
		t.Fatalf("the ack's commands %v, want one EndClaim alone", out.Commands)
	}
	tr.step(acked{Cmd: last[endClaim](tr, "qn-0000000002"), Name: "qn-0000000002"})
	tr.Check("ack_claims_next_in_one_multi")
}

// The next item was claimed by another consumer first: the multi fails on
// its claim, so nothing of it is applied; the ack is sent again alone, the
// other's claim is watched, and the call answers with no next item once
// the ack is through.
func TestTranscriptJointClaimLostToAnother(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: true})
	end := last[endClaim](tr, "qn-0000000001")
	if out := tr.step(acked{Cmd: end, Name: "qn-0000000001", Err: errNotApplied}); len(out.Replies) != 0 {
		t.Fatalf("answered before the ack went through: %v", out.Replies)
	}
	tr.step(claimed{Cmd: end, Name: "qn-0000000002", Err: zk.ErrNodeExists})
	out := tr.step(acked{Cmd: last[endClaim](tr, "qn-0000000001"), Name: "qn-0000000001"})
	if r, ok := replied(out, 2); !ok || r.Err != nil || r.Value.(taken).Name != "" {
		t.Fatalf("the joint call = %+v, want acked and no item", out.Replies)
	}
	tr.Check("joint_claim_lost_to_another")
}

// An ack with Next asked while the handle shuts down claims nothing: the
// ack goes alone (a claim made now would outlive the shutdown, which
// gives the claims back), sent at once though the connection is down: it
// checks our claim's version, so on another session it cannot end
// another consumer's claim.
func TestTranscriptNoJointClaimWhileClosing(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(runtime.Shutdown{Req: 2})
	out := tr.step(ackCall{Req: 3, Name: "qn-0000000001", Session: sess, Next: true})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Next != "" || ends[0].Nack || ends[0].Version != 1 {
		t.Fatalf("commands %v, want the ack alone", out.Commands)
	}
	tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	tr.step(acked{Cmd: last[endClaim](tr, "qn-0000000001"), Name: "qn-0000000001"})
	tr.Check("no_joint_claim_while_closing")
}

// Two checks of one claim whose reply was lost are in flight (one sent at
// once, one at RECONNECTED). The first finds the claim not made, and the
// claim goes again; the second, answered after that new claim was made,
// must not settle it: the new claim's own reply does. (Settled by the
// check, the item was delivered, and the new claim's reply then found no
// caller bound: a nil dereference that crashed the actor in CI.)
func TestTranscriptStaleCheckDuringANewClaim(t *testing.T) {
	tr := newTranscript(t)
	const item = "qn-0000000001"
	claim := tr.claimInFlight(item)
	first := commands[checkItem](tr.step(claimed{Cmd: claim.Cmd, Name: item, Err: zk.ErrConnectionLoss}))[0]
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	second := commands[checkItem](tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess}))[0]
	out := tr.step(checked{Cmd: first.Cmd, Name: item, Session: sess, ItemExists: true})
	claim = commands[claimItem](out)[0]
	if out := tr.step(checked{Cmd: second.Cmd, Name: item, Session: sess, ItemExists: true, ClaimOwner: sess, Version: 1}); len(out.Replies) != 0 {
		t.Fatalf("a stale check settled the claim in flight: %+v", out.Replies)
	}
	out = tr.step(claimed{Cmd: claim.Cmd, Name: item, Session: sess, Version: 1})
	if r, ok := replied(out, 1); !ok || r.Err != nil || string(r.Value.(taken).Data) != "a" {
		t.Fatalf("the claim's reply delivered %+v, want the item", out.Replies)
	}
	tr.Check("stale_check_during_a_new_claim")
}

// An ack with Next goes out, and the session ends before its reply. On
// the next session the acked item is free again (its claim went with the
// session), but a take does not claim it while the ack is in flight: its
// reply would clear the bookkeeping of the new claim. Once the ack's
// reply says the claim was lost, the item is claimed again.
func TestTranscriptNoClaimWhileItsAckIsInFlight(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: true})
	end := last[endClaim](tr, "qn-0000000001")
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	tr.step(listed{Cmd: last[listItems](tr, ""), Children: []string{"qn-0000000001", "qn-0000000002"}, Watched: true})
	out := tr.step(takeCall{Req: 3, Kind: kindClaim})
	for _, c := range commands[claimItem](out) {
		if c.Name == "qn-0000000001" {
			t.Fatalf("commands %v: qn-0000000001 claimed while its ack is in flight", out.Commands)
		}
	}
	tr.step(acked{Cmd: end, Name: "qn-0000000001", Err: zk.ErrNoNode})
	out = tr.step(claimed{Cmd: end, Name: "qn-0000000002", Err: errNotApplied})
	if r, ok := replied(out, 2); !ok || !errors.Is(r.Err, ErrClaimLost) {
		t.Fatalf("the ack = %+v, want claim lost", out.Replies)
	}
	tr.Check("no_claim_while_its_ack_is_in_flight")
}

// A take's answer that no caller took (its ctx ended as the answer came:
// runtime.Spec.Refused) puts the item back at its place, under its own
// name; a put-back whose connection failed is sent again once the
// connection is back.
func TestTranscriptRefusedTakePutsTheItemBack(t *testing.T) {
	tr := newTranscript(t)
	tr.takeHead()
	tr.step(removed{Cmd: last[removeItem](tr, "qn-0000000001"), Name: "qn-0000000001"})
	out := tr.step(refused{Taken: taken{Name: "qn-0000000001", Data: []byte("a")}})
	put := commands[restoreItem](out)
	if len(put) != 1 || put[0].Name != "qn-0000000001" || string(put[0].Data) != "a" {
		t.Fatalf("refused take: %v, want qn-0000000001 put back with its data", out.Commands)
	}
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	if out := tr.step(restored{Cmd: put[0].Cmd, Name: "qn-0000000001", Err: zk.ErrConnectionLoss}); len(out.Commands) != 0 || len(out.Events) != 0 {
		t.Fatalf("put-back failed with the connection: %+v, want it held until the connection is back", out)
	}
	out = tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	if put := commands[restoreItem](out); len(put) != 1 || put[0].Name != "qn-0000000001" {
		t.Fatalf("reconnected: %v, want the put-back sent again", out.Commands)
	}
	tr.step(restored{Cmd: commands[restoreItem](out)[0].Cmd, Name: "qn-0000000001", Err: zk.ErrNodeExists}) // the first one was applied
	tr.Check("refused_take_puts_the_item_back")
}

// A TakeItem's answer that no caller took gives its claim back: no
// NACKED, and a TakeItem coming meanwhile waits for it and claims that
// item, the head, not the next.
func TestTranscriptRefusedClaimIsGivenBack(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead("qn-0000000003")
	out := tr.step(refused{Taken: taken{Name: "qn-0000000001", Data: []byte("a"), Session: sess}})
	ends := commands[endClaim](out)
	if len(ends) != 1 || ends[0].Name != "qn-0000000001" || !ends[0].Nack || slices.ContainsFunc(out.Events, func(e events.Event) bool { return e.Type == events.Nacked }) {
		t.Fatalf("refused claim: %+v, want its claim deleted, with no NACKED", out)
	}
	if out := tr.step(takeCall{Req: 2, Kind: kindClaim}); len(commands[claimItem](out)) != 0 {
		t.Fatalf("TakeItem during the give-back: %v, want it to wait", out.Commands)
	}
	out = tr.step(acked{Cmd: ends[0].Cmd, Name: "qn-0000000001"})
	if claim := commands[claimItem](out); len(claim) != 1 || claim[0].Name != "qn-0000000001" {
		t.Fatalf("given back: %v, want the claim of qn-0000000001, the head", out.Commands)
	}
	tr.Check("refused_claim_is_given_back")
}

// A TakeItem coming while an item taken for no caller is being put back
// waits for it, and claims it: the item is back at its place, in the
// cache, with no listing.
func TestTranscriptClaimWaitsForThePutBack(t *testing.T) {
	tr := newTranscript(t)
	tr.takeHead()
	tr.step(removed{Cmd: last[removeItem](tr, "qn-0000000001"), Name: "qn-0000000001"})
	tr.step(refused{Taken: taken{Name: "qn-0000000001", Data: []byte("a")}})
	if out := tr.step(takeCall{Req: 2, Kind: kindClaim}); len(out.Commands) != 0 {
		t.Fatalf("TakeItem during the put-back: %v, want it to wait", out.Commands)
	}
	out := tr.step(restored{Cmd: last[restoreItem](tr, "qn-0000000001"), Name: "qn-0000000001"})
	if claim := commands[claimItem](out); len(claim) != 1 || claim[0].Name != "qn-0000000001" {
		t.Fatalf("put back: %v, want the claim of qn-0000000001, the head", out.Commands)
	}
	tr.step(claimed{Cmd: last[claimItem](tr, "qn-0000000001"), Name: "qn-0000000001", Session: sess, Version: 1})
	tr.Check("claim_waits_for_the_put_back")
}

// An ack's reply is lost; the check finds our claim still there, so the
// ack is sent again; the first lands just before it, and the second finds
// the claim gone. The item may have gone with the first: a second check
// finds it gone, and the Ack says nil, not ErrClaimLost.
func TestTranscriptAckSentAgainFindsItsFirstLanded(t *testing.T) {
	tr := newTranscript(t)
	tr.ackReplyLost()
	out := tr.step(checked{Cmd: last[checkItem](tr, "qn-0000000001"), Name: "qn-0000000001", Session: sess, ItemExists: true, ClaimOwner: sess, Version: 1})
	if ends := commands[endClaim](out); len(ends) != 1 {
		t.Fatalf("the ack not sent again: %v", out.Commands)
	}
	out = tr.step(acked{Cmd: last[endClaim](tr, "qn-0000000001"), Name: "qn-0000000001", Err: zk.ErrNoNode})
	if len(out.Replies) != 0 || len(commands[checkItem](out)) != 1 {
		t.Fatalf("the second multi's NoNode taken for an answer: %+v", out)
	}
	out = tr.step(checked{Cmd: last[checkItem](tr, "qn-0000000001"), Name: "qn-0000000001", Session: sess})
	if r, ok := replied(out, 2); !ok || r.Err != nil {
		t.Fatalf("Ack answered %+v, want nil", out.Replies)
	}
	tr.Check("ack_sent_again_finds_its_first_landed")
}

// An ack's reply is lost with its session; the check of the item is made
// on the next session and its reply comes before the news of the session
// change: it is not judged then (the item gone would be taken for our
// ack, and another consumer may have had it since). The news brings a
// check again, whose item gone is not counted as ours: the Ack says
// ErrUncertain.
func TestTranscriptAckCheckedOnTheNextSessionFirst(t *testing.T) {
	tr := newTranscript(t)
	tr.ackReplyLost()
	if out := tr.step(checked{Cmd: last[checkItem](tr, "qn-0000000001"), Name: "qn-0000000001", Session: sess + 1}); len(out.Replies) != 0 {
		t.Fatalf("a check made on a session the machine does not know yet answered %+v", out.Replies)
	}
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	out := tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	check := commands[checkItem](out)
	if len(check) != 1 {
		t.Fatalf("CONNECTED: %v, want the item checked again", out.Commands)
	}
	out = tr.step(checked{Cmd: check[0].Cmd, Name: "qn-0000000001", Session: sess + 1})
	if r, ok := replied(out, 2); !ok || !errors.Is(r.Err, ErrUncertain) {
		t.Fatalf("Ack answered %+v, want ErrUncertain", out.Replies)
	}
	tr.Check("ack_checked_on_the_next_session_first")
}

// A claim asked on one session goes out on the next (the client sends what
// it had queued when the first ended), and its reply comes before the news
// of that session. It is not delivered as a claim of the session the
// machine knows: that one's end would forget it, and the item would then
// be waited on as another consumer's for as long as ours lived (a chaos
// run and TestConsumeThroughSessionExpiry left items so). It is checked
// once the new session is known, and delivered with it.
func TestTranscriptClaimMadeOnTheNextSessionFirst(t *testing.T) {
	tr := newTranscript(t)
	const item = "qn-0000000001"
	claim := tr.claimInFlight(item)
	out := tr.step(claimed{Cmd: claim.Cmd, Name: item, Session: sess + 1})
	if len(out.Replies) != 0 {
		t.Fatalf("a claim made on a session the machine does not know yet was delivered: %+v", out.Replies)
	}
	first := commands[checkItem](out)
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	out = tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	again := commands[checkItem](out)
	if len(first) != 1 || len(again) != 1 {
		t.Fatalf("checks %v, then at CONNECTED %v: want one each", first, again)
	}
	out = tr.step(checked{Cmd: first[0].Cmd, Name: item, Session: sess + 1, ItemExists: true, ClaimOwner: sess + 1})
	if r, ok := replied(out, 1); !ok || r.Err != nil || r.Value.(taken).Session != sess+1 || string(r.Value.(taken).Data) != "a" {
		t.Fatalf("the claim = %+v, want item a delivered on session %#x", out.Replies, sess+1)
	}
	if out := tr.step(checked{Cmd: again[0].Cmd, Name: item, Session: sess + 1, ItemExists: true, ClaimOwner: sess + 1}); len(out.Replies)+len(out.Commands)+len(out.Events) != 0 {
		t.Fatalf("the second check, once the first settled the claim: %+v, want nothing", out)
	}
	tr.Check("claim_made_on_the_next_session_first")
}

// A session lost before the first listing, on the next session before
// any, and during one: FAILED each time; closed then.
func TestTranscriptSessionsLostBeforeAListing(t *testing.T) {
	tr := newTranscript(t)
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess + 1})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 2})
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess + 2})
	tr.step(listed{Cmd: last[listItems](tr, ""), Err: zk.ErrSessionExpired})
	tr.step(runtime.Shutdown{Req: 2})
	tr.Check("sessions_lost_before_a_listing")
}

// A listing that fails is sent again once the connection is back; closed
// while it is out.
func TestTranscriptListingSentAgain(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(listed{Cmd: last[listItems](tr, ""), Err: zk.ErrConnectionLoss})
	tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	tr.step(runtime.Shutdown{Req: 2})
	tr.Check("listing_sent_again")
}

// Closed before anything was read.
func TestTranscriptClosedBeforeATake(t *testing.T) {
	tr := newTranscript(t)
	tr.step(runtime.Shutdown{Req: 1})
	tr.Check("closed_before_a_take")
}

// A late ack: sent on a session that ended, it reaches the server after
// another consumer claimed the item, and fails there on the version that
// claim left (zk.ErrBadVersion): the Ack says ErrClaimLost, and the item,
// the other consumer's now, is not ours to take.
func TestTranscriptStaleAckFailsOnTheServer(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	out := tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Version != 1 {
		t.Fatalf("Ack: %v, want a multi checking version 1", out.Commands)
	}
	out = tr.step(acked{Cmd: last[endClaim](tr, "qn-0000000001"), Name: "qn-0000000001", Err: zk.ErrBadVersion})
	if r, ok := replied(out, 2); !ok || !errors.Is(r.Err, ErrClaimLost) || len(out.Events) != 0 {
		t.Fatalf("Ack = %+v, want ErrClaimLost and no ACKED", out)
	}
	tr.Check("stale_ack_fails_on_the_server")
}

// A nacked item, older than the item claimed with its nack, is taken
// first, as a redelivery. (Found by TestConsume on the real server, when
// a consumer never went back before its last item: the nacked item was
// passed over for good, and the queue did not drain.)
func TestTranscriptNackedItemTakenFirst(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead("qn-0000000003")
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Nack: true, Next: true})
	end := last[endClaim](tr, "qn-0000000001")
	tr.step(acked{Cmd: end, Name: "qn-0000000001"})
	tr.step(claimed{Cmd: end, Name: "qn-0000000002", Session: sess, Version: 1})
	out := tr.step(takeCall{Req: 3, Kind: kindClaim})
	if c := commands[claimItem](out); len(c) != 1 || c[0].Name != "qn-0000000001" {
		t.Fatalf("TakeItem after the nack: %v, want qn-0000000001 (the nacked item) claimed first", out.Commands)
	}
	tr.Check("nacked_item_taken_first")
}
