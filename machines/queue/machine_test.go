package queue

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

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
	m     *machine
	waits []wait // the waits the machine started, in order
}

func newTranscript(t *testing.T) *transcript {
	m, err := newMachine(config{Path: "/app/q", ClaimData: []byte("me"), SessionID: sess, ClaimAhead: 100 * time.Millisecond})
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
	m.fsm = firing{m.fsm.(*runtime.FSM)}
	golden.Record(tr.Transcript, "(start)", m.Start())
	t.Cleanup(func() {
		if err := m.Bug(); err != nil {
			t.Errorf("an illegal transition: %v", err)
		}
	})
	return tr
}

func (tr *transcript) step(in input) runtime.Output[command] {
	out := tr.m.Step(in)
	golden.Record(tr.Transcript, in.String(), out)
	tr.waits = append(tr.waits, commands[wait](out)...)
	return out
}

// claimHead has TakeItem (req 1) claim the head of qn-0000000001,
// qn-0000000002 and the items more, and read its data, "a" (commands 1 to
// 3).
func (tr *transcript) claimHead(more ...string) {
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	tr.step(listed{Cmd: 1, Children: append([]string{"qn-0000000001", "qn-0000000002"}, more...), Watched: true})
	tr.step(claimed{Cmd: 2, Name: "qn-0000000001", Session: sess})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000001", Data: []byte("a")})
}

// claimAheadB has the Ack (req 2) of the head claimed by claimHead claim
// qn-0000000002 ahead, its data "b" read behind the claim (commands 4 and
// 5): the item waits for a TakeItem (WaitAhead, command 6). more are
// further items in the listing.
func (tr *transcript) claimAheadB(more ...string) {
	tr.claimHead(more...)
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: claimAheadOf})
	tr.step(acked{Cmd: 4, Name: "qn-0000000001", Session: sess})
	tr.step(claimed{Cmd: 4, Name: "qn-0000000002", Session: sess})
	tr.step(dataRead{Cmd: 5, Name: "qn-0000000002", Data: []byte("b")})
}

// takeBOnTheNewSession has TakeItem (req 3) claim qn-0000000002 on the
// session after sess, read it, and get it as a first delivery: the claim
// ahead it had on sess was never out.
func (tr *transcript) takeBOnTheNewSession() {
	tr.T.Helper()
	out := tr.step(takeCall{Req: 3, Kind: kindClaim})
	claim, read := commands[claimItem](out), commands[readItem](out)
	if len(claim) != 1 || claim[0].Name != "qn-0000000002" {
		tr.T.Fatalf("TakeItem on the new session: %v, want a claim of qn-0000000002", out.Commands)
	}
	tr.step(claimed{Cmd: claim[0].Cmd, Name: "qn-0000000002", Session: sess + 1})
	out = tr.step(dataRead{Cmd: read[0].Cmd, Name: "qn-0000000002", Data: []byte("b")})
	if r, ok := replied(out, 3); !ok || slices.ContainsFunc(out.Events, func(e events.Event) bool { return e.Type == events.Redelivered }) {
		tr.T.Fatalf("TakeItem: %+v, want item b, not as a redelivery", out)
	} else if r.Value.(taken).Session != sess+1 {
		tr.T.Fatalf("claim session %#x, want the new one", r.Value.(taken).Session)
	}
}

// ackReplyLost claims the head (see claimHead) and acks it (request 2);
// the ack's reply is lost, and a check of the item is asked (command 5).
func (tr *transcript) ackReplyLost() {
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess})
	tr.step(acked{Cmd: 4, Name: "qn-0000000001", Err: zk.ErrConnectionLoss})
}

// takeHead has Take (req 1) list qn-0000000001 and qn-0000000002 and
// read their data, "a" and "b" (commands 1 to 3): the delete of the head
// (command 4) is in flight.
func (tr *transcript) takeHead() {
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001", "qn-0000000002"}, Watched: true})
	tr.step(dataRead{Cmd: 2, Name: "qn-0000000001", Data: []byte("a")})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000002", Data: []byte("b")})
}

// claimInFlight has TakeItem (req 1) list item alone and read its data,
// "a": the claim it returns is in flight.
func (tr *transcript) claimInFlight(item string) claimItem {
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	out := tr.step(listed{Cmd: 1, Children: []string{item}, Watched: true})
	claim, read := commands[claimItem](out)[0], commands[readItem](out)[0]
	tr.step(dataRead{Cmd: read.Cmd, Name: item, Data: []byte("a")})
	return claim
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

// One take: listed, the head's data read (and the next one's ahead), the
// head deleted; the next take finds the next item's data already there.
func TestTranscriptTakeReadsAhead(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000002", "qn-0000000001", "lock"}, Watched: true})
	tr.step(dataRead{Cmd: 2, Name: "qn-0000000001", Data: []byte("a")})
	tr.step(takeCall{Req: 2, Kind: kindTake})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000002", Data: []byte("b")})
	out := tr.step(removed{Cmd: 4, Name: "qn-0000000001"})
	if r, ok := replied(out, 1); !ok || string(r.Value.(taken).Data) != "a" {
		t.Fatalf("the first take got %v", out.Replies)
	}
	tr.step(removed{Cmd: 5, Name: "qn-0000000002"})
	tr.Check("take_reads_ahead")
}

// Our claim's session ends before the ack: the ack is refused with
// ErrClaimLost, and the item comes again (here to us, after a listing).
func TestTranscriptClaimLost(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001"}, Watched: true})
	tr.step(claimed{Cmd: 2, Name: "qn-0000000001", Session: sess})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000001", Data: []byte("job")})
	tr.step(sessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(sessionChange{State: zk.StateLost})
	tr.step(childrenChanged{Cmd: 1})
	tr.step(sessionChange{State: zk.StateConnected, SessionID: 0x200})
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess})
	tr.step(listed{Cmd: 4, Children: []string{"qn-0000000001"}, Watched: true})
	tr.step(takeCall{Req: 3, Kind: kindClaim})
	tr.step(claimed{Cmd: 5, Name: "qn-0000000001", Session: 0x200})
	tr.step(dataRead{Cmd: 6, Name: "qn-0000000001", Data: []byte("job")})
	tr.Check("claim_lost")
}

// Another consumer holds the head's claim; when its claim goes (nack or
// expiry), our waiting claim gets the item: REDELIVERED, then CLAIMED.
func TestTranscriptRedelivery(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001"}, Watched: true})
	tr.step(claimed{Cmd: 2, Name: "qn-0000000001", Err: zk.ErrNodeExists})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000001", Data: []byte("job")})
	tr.step(claimWatched{Cmd: 4, Name: "qn-0000000001", Exists: true})
	tr.step(claimGone{Cmd: 4, Name: "qn-0000000001", Deleted: true})
	tr.step(claimed{Cmd: 5, Name: "qn-0000000001", Session: sess})
	tr.step(dataRead{Cmd: 6, Name: "qn-0000000001", Data: []byte("job")})
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess})
	tr.step(acked{Cmd: 7, Name: "qn-0000000001", Session: sess})
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
	tr.step(listed{Cmd: 4, Children: []string{"qn-0000000005-0000000001", "qn-0000000005-0000000002", "qn-0000000001-0000000003"}})
	tr.step(dataRead{Cmd: 5, Name: "qn-0000000001-0000000003", Data: []byte("urgent")})
	out := tr.step(removed{Cmd: 6, Name: "qn-0000000001-0000000003"})
	if r, ok := replied(out, 1); !ok || string(r.Value.(taken).Data) != "urgent" {
		t.Fatalf("the take got %v, want the urgent item", out.Replies)
	}
	tr.Check("priority_arrives_during_take")
}

// The reply to our claim comes after the session was lost and before the
// next one is known: the claim may live on either session (a request sent
// while disconnected is made on the next session). It is asked about once
// the session is back, and found ours on the new one: delivered with it,
// so that its Ack deletes it (it once stayed, holding the item for as long
// as that session lived).
func TestTranscriptClaimReplyBetweenSessions(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001"}, Watched: true})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000001", Data: []byte("a")})
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(claimed{Cmd: 2, Name: "qn-0000000001", Session: sess + 1})
	tr.step(sessionChange{State: zk.StateConnected, SessionID: sess + 1})
	out := tr.step(checked{Cmd: 4, Name: "qn-0000000001", Session: sess + 1, ItemExists: true, ClaimOwner: sess + 1})
	r, ok := replied(out, 1)
	if !ok || r.Err != nil || r.Value.(taken).Session != sess+1 {
		t.Fatalf("the claim = %+v, want it delivered on session %#x", r, sess+1)
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
	tr.step(claimed{Cmd: 2, Name: "qn-0000000000", Session: sess})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000000", Data: []byte("old")})
	tr.step(ackCall{Req: 2, Name: "qn-0000000000", Session: sess})
	tr.step(acked{Cmd: 4, Name: "qn-0000000000", Session: sess})
	tr.step(childrenChanged{Cmd: 1})
	tr.step(takeCall{Req: 3, Kind: kindClaim})
	out := tr.step(listed{Cmd: 5, Children: []string{"qn-0000000001", "qn-0000000000"}, Watched: true, Dir: 0x20})
	var first string
	for _, c := range out.Commands {
		if ci, ok := c.(claimItem); ok && first == "" {
			first = ci.Name
		}
	}
	if first != "qn-0000000000" {
		t.Errorf("the take after the queue node was recreated claims %q first, want the new head qn-0000000000", first)
	}
	tr.Check("queue_node_recreated")
}

// A claim delivers the data read behind it, not data read before: the
// item read may since have been taken, the queue's node reaped and made
// again, and a new item made under the same name (the chaos suite
// delivered old items' data under reused names this way). Here a plain
// take reads qn-2 ahead as "old"; a claim of qn-2 later delivers "new",
// read behind the claim.
func TestTranscriptClaimDeliversTheDataReadBehindIt(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	out := tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001", "qn-0000000002"}, Watched: true})
	reads := commands[readItem](out)
	if len(reads) != 2 {
		t.Fatalf("want qn-1 read and qn-2 read ahead: %v", out.Commands)
	}
	tr.step(dataRead{Cmd: reads[1].Cmd, Name: "qn-0000000002", Data: []byte("old")})
	out = tr.step(dataRead{Cmd: reads[0].Cmd, Name: "qn-0000000001", Data: []byte("first")})
	tr.step(removed{Cmd: commands[removeItem](out)[0].Cmd, Name: "qn-0000000001"})
	out = tr.step(takeCall{Req: 2, Kind: kindClaim})
	claims, reads := commands[claimItem](out), commands[readItem](out)
	if len(claims) != 1 || len(reads) != 1 || claims[0].Name != "qn-0000000002" {
		t.Fatalf("want a claim of qn-2 and a read behind it: %v", out.Commands)
	}
	if out := tr.step(claimed{Cmd: claims[0].Cmd, Name: "qn-0000000002", Session: sess}); len(out.Replies) != 0 {
		t.Fatalf("delivered before the read behind the claim: %+v", out.Replies)
	}
	out = tr.step(dataRead{Cmd: reads[0].Cmd, Name: "qn-0000000002", Data: []byte("new")})
	if len(out.Replies) != 1 || string(out.Replies[0].Value.(taken).Data) != "new" {
		t.Fatalf("delivered %+v, want the data read behind the claim", out.Replies)
	}
	tr.Check("claim_delivers_the_data_read_behind_it")
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

// An ack asked while the connection is down is held, not sent: sent then,
// it would wait in the client and could go out on the next session, where
// its delete of the claim node would delete another consumer's claim of
// the item (the chaos suite saw items delivered again after their ack
// succeeded). It goes once the same session is back; when the session is
// lost it is refused (ErrClaimLost), and the item comes again.
func TestTranscriptAckHeldWhileDisconnected(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindClaim})
	tr.step(listed{Cmd: 1, Children: []string{"qn-0000000001", "qn-0000000002"}, Watched: true})
	tr.step(claimed{Cmd: 2, Name: "qn-0000000001", Session: sess})
	tr.step(dataRead{Cmd: 3, Name: "qn-0000000001", Data: []byte("one")})
	tr.step(takeCall{Req: 2, Kind: kindClaim})
	tr.step(claimed{Cmd: 4, Name: "qn-0000000002", Session: sess})
	tr.step(dataRead{Cmd: 5, Name: "qn-0000000002", Data: []byte("two")})

	tr.step(sessionChange{State: zk.StateSuspended, SessionID: sess})
	if out := tr.step(ackCall{Req: 3, Name: "qn-0000000001", Session: sess}); len(out.Commands) != 0 || len(out.Replies) != 0 {
		t.Fatalf("an ack while disconnected: %+v", out)
	}
	out := tr.step(sessionChange{State: zk.StateReconnected, SessionID: sess})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Name != "qn-0000000001" {
		t.Fatalf("the held ack not sent once the session was back: %v", out.Commands)
	}

	tr.step(sessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(ackCall{Req: 4, Name: "qn-0000000002", Session: sess})
	out = tr.step(sessionChange{State: zk.StateLost})
	if len(commands[endClaim](out)) != 0 || len(out.Replies) != 1 || !errors.Is(out.Replies[0].Err, ErrClaimLost) {
		t.Fatalf("the held ack after the session was lost: %+v", out)
	}
	tr.Check("ack_held_while_disconnected")
}

// Consume's ack claims the next item in the same multi (one write round
// trip for both): the call answers once the ack is through and the next
// item is claimed and its data read behind the claim.
func TestTranscriptAckClaimsNextInOneMulti(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	out := tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: claimForCall})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Next != "qn-0000000002" {
		t.Fatalf("the ack's commands %v, want one EndClaim with the next claim", out.Commands)
	}
	tr.step(acked{Cmd: 4, Name: "qn-0000000001", Session: sess})
	tr.step(claimed{Cmd: 4, Name: "qn-0000000002", Session: sess})
	out = tr.step(dataRead{Cmd: 5, Name: "qn-0000000002", Data: []byte("b")})
	if r, ok := replied(out, 2); !ok || r.Err != nil || string(r.Value.(taken).Data) != "b" {
		t.Fatalf("the joint call = %+v, want acked and item b", out.Replies)
	}
	// Nothing next in the cache: the ack alone, answered with no item.
	out = tr.step(ackCall{Req: 3, Name: "qn-0000000002", Session: sess, Next: claimForCall})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Next != "" {
		t.Fatalf("the ack's commands %v, want one EndClaim alone", out.Commands)
	}
	tr.step(acked{Cmd: 6, Name: "qn-0000000002", Session: sess})
	tr.Check("ack_claims_next_in_one_multi")
}

// The next item was claimed by another consumer first: the multi fails on
// its claim, so nothing of it is applied; the ack is sent again alone, the
// other's claim is watched, and the call answers with no next item once
// the ack is through.
func TestTranscriptJointClaimLostToAnother(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: claimForCall})
	if out := tr.step(acked{Cmd: 4, Name: "qn-0000000001", Err: errNotApplied}); len(out.Replies) != 0 {
		t.Fatalf("answered before the ack went through: %v", out.Replies)
	}
	tr.step(claimed{Cmd: 4, Name: "qn-0000000002", Err: zk.ErrNodeExists})
	tr.step(dataRead{Cmd: 5, Name: "qn-0000000002", Data: []byte("b")})
	out := tr.step(acked{Cmd: 6, Name: "qn-0000000001", Session: sess})
	if r, ok := replied(out, 2); !ok || r.Err != nil || r.Value.(taken).Name != "" {
		t.Fatalf("the joint call = %+v, want acked and no item", out.Replies)
	}
	tr.Check("joint_claim_lost_to_another")
}

// An ack with Next asked while the handle shuts down claims nothing: the
// ack goes alone (a claim made now would outlive the shutdown, which
// gives the claims back). Here the connection is down when both come: the
// ack is held until it is back, then sent alone.
func TestTranscriptNoJointClaimWhileClosing(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(sessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(shutdown{Req: 2})
	tr.step(ackCall{Req: 3, Name: "qn-0000000001", Session: sess, Next: claimForCall})
	out := tr.step(sessionChange{State: zk.StateReconnected, SessionID: sess})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Next != "" || ends[0].Nack {
		t.Fatalf("commands %v, want the ack alone", out.Commands)
	}
	tr.step(acked{Cmd: 4, Name: "qn-0000000001", Session: sess})
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
	tr.step(sessionChange{State: zk.StateSuspended, SessionID: sess})
	second := commands[checkItem](tr.step(sessionChange{State: zk.StateReconnected, SessionID: sess}))[0]
	out := tr.step(checked{Cmd: first.Cmd, Name: item, Session: sess, ItemExists: true})
	claim, read := commands[claimItem](out)[0], commands[readItem](out)[0]
	if out := tr.step(checked{Cmd: second.Cmd, Name: item, Session: sess, ItemExists: true, ClaimOwner: sess}); len(out.Replies) != 0 {
		t.Fatalf("a stale check settled the claim in flight: %+v", out.Replies)
	}
	tr.step(dataRead{Cmd: read.Cmd, Name: item, Data: []byte("a")})
	out = tr.step(claimed{Cmd: claim.Cmd, Name: item, Session: sess})
	if r, ok := replied(out, 1); !ok || r.Err != nil || string(r.Value.(taken).Data) != "a" {
		t.Fatalf("the claim's reply delivered %+v, want the item", out.Replies)
	}
	tr.Check("stale_check_during_a_new_claim")
}

// An ack with Next goes out, and the session ends before its reply. On
// the next session the acked item is free again (its claim went with the
// session), but a take does not claim it while the ack is in flight: that
// ack, applied on the new session, fails on the old claim, and its reply
// used to clear the bookkeeping of the new claim, which the consumer then
// took for another's and watched for good (the item stayed claimed by a
// live session: TestPropertyConsume's queue that did not drain). Once the
// ack's reply says the claim was lost, the item is claimed again.
func TestTranscriptNoClaimWhileItsAckIsInFlight(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: claimForCall}) // cmd 4, read cmd 5
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(sessionChange{State: zk.StateConnected, SessionID: sess + 1})
	tr.step(listed{Cmd: 6, Children: []string{"qn-0000000001", "qn-0000000002"}, Watched: true})
	out := tr.step(takeCall{Req: 3, Kind: kindClaim})
	for _, c := range commands[claimItem](out) {
		if c.Name == "qn-0000000001" {
			t.Fatalf("commands %v: qn-0000000001 claimed while its ack is in flight", out.Commands)
		}
	}
	tr.step(acked{Cmd: 4, Name: "qn-0000000001", Err: zk.ErrNoNode})
	out = tr.step(claimed{Cmd: 4, Name: "qn-0000000002", Err: errNotApplied})
	if r, ok := replied(out, 2); !ok || !errors.Is(r.Err, errs.claimLost) {
		t.Fatalf("the ack = %+v, want claim lost", out.Replies)
	}
	tr.Check("no_claim_while_its_ack_is_in_flight")
}

// An Ack claims the next cached item in its own multi, for the handle's
// next TakeItem: the Ack answers once its part is through; the claimed
// item, once read, waits (WaitAhead), and the next TakeItem gets it at
// once, with no request. The wait's end then finds nothing to give back.
func TestTranscriptAckClaimsAhead(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	out := tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: claimAheadOf})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Next != "qn-0000000002" {
		t.Fatalf("the ack's commands %v, want one EndClaim with the next claim", out.Commands)
	}
	if r, ok := replied(tr.step(acked{Cmd: 4, Name: "qn-0000000001", Session: sess}), 2); !ok || r.Err != nil {
		t.Fatalf("the Ack is not answered once its part is through")
	}
	tr.step(claimed{Cmd: 4, Name: "qn-0000000002", Session: sess})
	out = tr.step(dataRead{Cmd: 5, Name: "qn-0000000002", Data: []byte("b")})
	if len(commands[wait](out)) != 1 || len(out.Events) != 0 {
		t.Fatalf("the item claimed ahead: %+v, want a WaitAhead and no event", out)
	}
	out = tr.step(takeCall{Req: 3, Kind: kindClaim})
	if r, ok := replied(out, 3); !ok || string(r.Value.(taken).Data) != "b" || len(out.Commands) != 0 {
		t.Fatalf("TakeItem after the Ack = %+v, want item b at once, with no request", out)
	}
	if out := tr.step(waited{Cmd: 6}); len(out.Commands)+len(out.Events) != 0 {
		t.Fatalf("the wait's end after the item was taken: %+v, want nothing", out)
	}
	// Nothing next in the cache: the ack alone.
	out = tr.step(ackCall{Req: 4, Name: "qn-0000000002", Session: sess, Next: claimAheadOf})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Next != "" {
		t.Fatalf("the ack's commands %v, want one EndClaim alone", out.Commands)
	}
	tr.Check("ack_claims_ahead")
}

// No TakeItem comes for the item claimed ahead: when its wait ends, its
// claim is given back with no NACKED event, and the next TakeItem claims
// it again as a first delivery (no REDELIVERED: it was never out).
func TestTranscriptClaimAheadGivenBack(t *testing.T) {
	tr := newTranscript(t)
	tr.claimAheadB()
	out := tr.step(waited{Cmd: 6})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Name != "qn-0000000002" || !ends[0].Nack {
		t.Fatalf("the wait's end: %v, want the claim of qn-0000000002 given back", out.Commands)
	}
	if out := tr.step(acked{Cmd: 7, Name: "qn-0000000002", Session: sess}); len(out.Events)+len(out.Replies) != 0 {
		t.Fatalf("the give-back: %+v, want no event and no reply", out)
	}
	out = tr.step(takeCall{Req: 3, Kind: kindClaim})
	claim, read := commands[claimItem](out), commands[readItem](out)
	if len(claim) != 1 || claim[0].Name != "qn-0000000002" {
		t.Fatalf("TakeItem: %v, want a claim of qn-0000000002", out.Commands)
	}
	tr.step(claimed{Cmd: claim[0].Cmd, Name: "qn-0000000002", Session: sess})
	out = tr.step(dataRead{Cmd: read[0].Cmd, Name: "qn-0000000002", Data: []byte("b")})
	for _, e := range out.Events {
		if e.Type == events.Redelivered {
			t.Fatalf("events %v: an item claimed ahead and given back is not a redelivery", out.Events)
		}
	}
	tr.Check("claim_ahead_given_back")
}

// A TakeItem that comes while the Ack's multi is in flight gets the item
// it claims, once claimed and read.
func TestTranscriptTakeDuringTheClaimAhead(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: claimAheadOf})
	if out := tr.step(takeCall{Req: 3, Kind: kindClaim}); len(out.Commands) != 0 {
		t.Fatalf("TakeItem during the claim ahead sent %v, want nothing", out.Commands)
	}
	tr.step(acked{Cmd: 4, Name: "qn-0000000001", Session: sess})
	tr.step(claimed{Cmd: 4, Name: "qn-0000000002", Session: sess})
	out := tr.step(dataRead{Cmd: 5, Name: "qn-0000000002", Data: []byte("b")})
	if r, ok := replied(out, 3); !ok || string(r.Value.(taken).Data) != "b" || len(commands[wait](out)) != 0 {
		t.Fatalf("the claim ahead came back: %+v, want item b for TakeItem and no wait", out)
	}
	tr.Check("take_during_the_claim_ahead")
}

// The item claimed ahead when the session ends is not ours any more and
// was never out: the next TakeItem, on the new session, claims it as a
// first delivery. Claimed ahead again, it is given back at shutdown with
// no NACKED event.
func TestTranscriptClaimAheadAcrossSessionsAndClose(t *testing.T) {
	tr := newTranscript(t)
	tr.claimAheadB()
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(sessionChange{State: zk.StateConnected, SessionID: sess + 1})
	tr.step(listed{Cmd: 7, Children: []string{"qn-0000000002", "qn-0000000003"}, Watched: true})
	tr.takeBOnTheNewSession()
	out := tr.step(ackCall{Req: 4, Name: "qn-0000000002", Session: sess + 1, Next: claimAheadOf})
	end := commands[endClaim](out)[0]
	tr.step(acked{Cmd: end.Cmd, Name: "qn-0000000002", Session: sess + 1})
	tr.step(claimed{Cmd: end.Cmd, Name: "qn-0000000003", Session: sess + 1})
	tr.step(dataRead{Cmd: commands[readItem](out)[0].Cmd, Name: "qn-0000000003", Data: []byte("c")})
	out = tr.step(shutdown{Req: 5})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Name != "qn-0000000003" || !ends[0].Nack {
		t.Fatalf("shutdown: %v, want the claim ahead given back", out.Commands)
	}
	out = tr.step(acked{Cmd: commands[endClaim](out)[0].Cmd, Name: "qn-0000000003", Session: sess + 1})
	if r, ok := replied(out, 5); !ok || slices.ContainsFunc(out.Events, func(e events.Event) bool { return e.Type == events.Nacked }) {
		t.Fatalf("the give-back at shutdown: %+v, want the shutdown answered and no NACKED", out)
	} else if r.Err != nil {
		t.Fatal(r.Err)
	}
	tr.Check("claim_ahead_across_sessions_and_close")
}

// A TakeItem that comes while the connection is down does not get the
// item claimed ahead (the claim may be ending with the session): it waits,
// and gets it once the same session is back.
func TestTranscriptClaimAheadWhileDisconnected(t *testing.T) {
	tr := newTranscript(t)
	tr.claimAheadB()
	tr.step(sessionChange{State: zk.StateSuspended, SessionID: sess})
	if out := tr.step(takeCall{Req: 3, Kind: kindClaim}); len(out.Replies) != 0 {
		t.Fatalf("TakeItem while disconnected got %+v, want it to wait", out.Replies)
	}
	if out := tr.step(waited{Cmd: 6}); len(commands[endClaim](out)) != 0 {
		t.Fatalf("the wait's end while disconnected: %v, want no request", out.Commands)
	}
	out := tr.step(sessionChange{State: zk.StateReconnected, SessionID: sess})
	if r, ok := replied(out, 3); !ok || string(r.Value.(taken).Data) != "b" || len(commands[claimItem](out)) != 0 {
		t.Fatalf("RECONNECTED: %+v, want item b for the waiting TakeItem", out)
	}
	tr.Check("claim_ahead_while_disconnected")
}

// A Poll on the handle that holds an item claimed ahead does not find the
// queue empty: the claim is given back at once, and the Poll then takes
// the item like any other, with a plain delete.
func TestTranscriptPollGetsTheItemClaimedAhead(t *testing.T) {
	tr := newTranscript(t)
	tr.claimAheadB()
	out := tr.step(takeCall{Req: 3, Kind: kindPoll})
	if ends := commands[endClaim](out); len(ends) != 1 || !ends[0].Nack || len(out.Replies) != 0 {
		t.Fatalf("Poll: %+v, want the claim ahead given back and no answer yet", out)
	}
	out = tr.step(acked{Cmd: 7, Name: "qn-0000000002", Session: sess})
	if rm := commands[removeItem](out); len(rm) != 1 || rm[0].Name != "qn-0000000002" || len(out.Replies) != 0 {
		t.Fatalf("the give-back's reply: %+v, want the Poll's delete of qn-0000000002", out)
	}
	out = tr.step(removed{Cmd: commands[removeItem](out)[0].Cmd, Name: "qn-0000000002"})
	if r, ok := replied(out, 3); !ok || r.Err != nil || string(r.Value.(taken).Data) != "b" {
		t.Fatalf("Poll = %+v, want b", out.Replies)
	}
	tr.Check("poll_gets_the_item_claimed_ahead")
}

// A claim ahead whose read had not come back when the session ended is
// dropped: its claim went with the session and no call waits for it. It is
// not made again on the next session, where it would hold the item from
// every other consumer for as long as the handle waits for a TakeItem.
func TestTranscriptClaimAheadReadLostWithTheSession(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess, Next: claimAheadOf})
	tr.step(acked{Cmd: 4, Name: "qn-0000000001", Session: sess})
	tr.step(claimed{Cmd: 4, Name: "qn-0000000002", Session: sess})
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(dataRead{Cmd: 5, Name: "qn-0000000002", Err: zk.ErrSessionExpired})
	connected := tr.step(sessionChange{State: zk.StateConnected, SessionID: sess + 1})
	out := tr.step(listed{Cmd: commands[listItems](connected)[0].Cmd, Children: []string{"qn-0000000002"}, Watched: true})
	if n := len(commands[readItem](connected)) + len(commands[claimItem](out)) + len(commands[readItem](out)); n != 0 {
		t.Fatalf("the next session: %v, then %v; want no claim nor read for the claim ahead gone with the session", connected.Commands, out.Commands)
	}
	tr.takeBOnTheNewSession()
	tr.Check("claim_ahead_read_lost_with_the_session")
}

// A TakeItem that comes while the claim ahead is being given back waits
// for the give-back: the item goes back to its place at the head, and a
// take of the next one meanwhile would hand the items out of order.
func TestTranscriptTakeWaitsForTheGiveBack(t *testing.T) {
	tr := newTranscript(t)
	tr.claimAheadB("qn-0000000003")
	tr.step(waited{Cmd: 6})
	if out := tr.step(takeCall{Req: 3, Kind: kindClaim}); len(commands[claimItem](out))+len(commands[endClaim](out)) != 0 {
		t.Fatalf("TakeItem during the give-back: %v, want it to wait for the give-back", out.Commands)
	}
	out := tr.step(acked{Cmd: 7, Name: "qn-0000000002", Session: sess})
	if claim := commands[claimItem](out); len(claim) != 1 || claim[0].Name != "qn-0000000002" {
		t.Fatalf("the give-back's reply: %v, want the claim of qn-0000000002, the head", out.Commands)
	}
	tr.Check("take_waits_for_the_give_back")
}

// A plain Take on the handle that holds a claim ahead gives the claim back
// and waits for the give-back before it deletes the head, the item it gave
// back, not the one after it.
func TestTranscriptPlainTakeWaitsForTheGiveBack(t *testing.T) {
	tr := newTranscript(t)
	tr.claimAheadB("qn-0000000003")
	out := tr.step(takeCall{Req: 3, Kind: kindTake})
	if ends := commands[endClaim](out); len(ends) != 1 || ends[0].Name != "qn-0000000002" || len(commands[removeItem](out)) != 0 {
		t.Fatalf("Take: %v, want the claim ahead given back and no delete yet", out.Commands)
	}
	out = tr.step(acked{Cmd: commands[endClaim](out)[0].Cmd, Name: "qn-0000000002", Session: sess})
	if rm := commands[removeItem](out); len(rm) != 1 || rm[0].Name != "qn-0000000002" {
		t.Fatalf("the give-back's reply: %v, want the delete of qn-0000000002, the head", out.Commands)
	}
	tr.Check("plain_take_waits_for_the_give_back")
}

// A take's answer that no caller took (its ctx ended as the answer came:
// runtime.Spec.Refused) puts the item back at its place, under its own
// name; a put-back whose connection failed is sent again once the
// connection is back.
func TestTranscriptRefusedTakePutsTheItemBack(t *testing.T) {
	tr := newTranscript(t)
	tr.takeHead()
	tr.step(removed{Cmd: 4, Name: "qn-0000000001"})
	out := tr.step(refused{Taken: taken{Name: "qn-0000000001", Data: []byte("a")}})
	put := commands[restoreItem](out)
	if len(put) != 1 || put[0].Name != "qn-0000000001" || string(put[0].Data) != "a" {
		t.Fatalf("refused take: %v, want qn-0000000001 put back with its data", out.Commands)
	}
	tr.step(sessionChange{State: zk.StateSuspended, SessionID: sess})
	if out := tr.step(restored{Cmd: put[0].Cmd, Name: "qn-0000000001", Err: zk.ErrConnectionLoss}); len(out.Commands) != 0 || len(out.Events) != 0 {
		t.Fatalf("put-back failed with the connection: %+v, want it held until the connection is back", out)
	}
	out = tr.step(sessionChange{State: zk.StateReconnected, SessionID: sess})
	if put := commands[restoreItem](out); len(put) != 1 || put[0].Name != "qn-0000000001" {
		t.Fatalf("reconnected: %v, want the put-back sent again", out.Commands)
	}
	tr.step(restored{Cmd: commands[restoreItem](out)[0].Cmd, Name: "qn-0000000001", Err: zk.ErrNodeExists}) // the first one was applied
	tr.Check("refused_take_puts_the_item_back")
}

// A TakeItem's answer that no caller took gives its claim back as a claim
// ahead no one took is given back: no NACKED, and a TakeItem coming
// meanwhile waits for it and claims that item, the head, not the next.
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
	out = tr.step(acked{Cmd: ends[0].Cmd, Name: "qn-0000000001", Session: sess})
	if claim := commands[claimItem](out); len(claim) != 1 || claim[0].Name != "qn-0000000001" {
		t.Fatalf("given back: %v, want the claim of qn-0000000001, the head", out.Commands)
	}
	tr.Check("refused_claim_is_given_back")
}

// A Take withdrawn while its delete is in flight leaves the item to the
// next take of the handle, which adopts the delete: it gets the head, not
// the item after it (given back, the head would come after that one).
func TestTranscriptWithdrawnTakeAdoptedByTheNext(t *testing.T) {
	tr := newTranscript(t)
	tr.takeHead()
	tr.step(cancelReq{Req: 1})
	if out := tr.step(takeCall{Req: 2, Kind: kindTake}); len(out.Commands) != 0 {
		t.Fatalf("the next Take: %v, want it to wait for the delete in flight", out.Commands)
	}
	out := tr.step(removed{Cmd: 4, Name: "qn-0000000001"})
	if r, ok := replied(out, 2); !ok || string(r.Value.(taken).Data) != "a" || len(commands[restoreItem](out)) != 0 {
		t.Fatalf("the delete's reply: %+v, want item a for the next Take, nothing put back", out)
	}
	tr.Check("withdrawn_take_adopted_by_the_next")
}

// A TakeItem coming while an item taken for no caller is being put back
// waits for it, and claims it: the item is back at its place, in the
// cache, with no listing.
func TestTranscriptClaimWaitsForThePutBack(t *testing.T) {
	tr := newTranscript(t)
	tr.takeHead()
	tr.step(removed{Cmd: 4, Name: "qn-0000000001"})
	tr.step(refused{Taken: taken{Name: "qn-0000000001", Data: []byte("a")}})
	if out := tr.step(takeCall{Req: 2, Kind: kindClaim}); len(out.Commands) != 0 {
		t.Fatalf("TakeItem during the put-back: %v, want it to wait", out.Commands)
	}
	out := tr.step(restored{Cmd: 5, Name: "qn-0000000001"})
	if claim := commands[claimItem](out); len(claim) != 1 || claim[0].Name != "qn-0000000001" {
		t.Fatalf("put back: %v, want the claim of qn-0000000001, the head", out.Commands)
	}
	tr.step(claimed{Cmd: 6, Name: "qn-0000000001", Session: sess})
	tr.Check("claim_waits_for_the_put_back")
}

// An ack's reply is lost; the check finds our claim still there, so the
// ack is sent again; the first lands just before it, and the second finds
// the claim gone. The item may have gone with the first: a second check
// finds it gone, and the Ack says nil, not ErrClaimLost.
func TestTranscriptAckSentAgainFindsItsFirstLanded(t *testing.T) {
	tr := newTranscript(t)
	tr.ackReplyLost()
	out := tr.step(checked{Cmd: 5, Name: "qn-0000000001", Session: sess, ItemExists: true, ClaimOwner: sess})
	if ends := commands[endClaim](out); len(ends) != 1 {
		t.Fatalf("the ack not sent again: %v", out.Commands)
	}
	out = tr.step(acked{Cmd: 6, Name: "qn-0000000001", Err: zk.ErrNoNode})
	if len(out.Replies) != 0 || len(commands[checkItem](out)) != 1 {
		t.Fatalf("the second multi's NoNode taken for an answer: %+v", out)
	}
	out = tr.step(checked{Cmd: 7, Name: "qn-0000000001", Session: sess})
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
	if out := tr.step(checked{Cmd: 5, Name: "qn-0000000001", Session: sess + 1}); len(out.Replies) != 0 {
		t.Fatalf("a check made on a session the machine does not know yet answered %+v", out.Replies)
	}
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess})
	out := tr.step(sessionChange{State: zk.StateConnected, SessionID: sess + 1})
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
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess})
	out = tr.step(sessionChange{State: zk.StateConnected, SessionID: sess + 1})
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

// An ack asked as the connection was lost goes out on the next session,
// where our claim is gone: the claim it deleted may be another consumer's.
// Nothing undoes that; its ACKED event says so (ErrUncertain).
func TestTranscriptAckMadeOnTheNextSession(t *testing.T) {
	tr := newTranscript(t)
	tr.claimHead()
	tr.step(ackCall{Req: 2, Name: "qn-0000000001", Session: sess})
	out := tr.step(acked{Cmd: 4, Name: "qn-0000000001", Session: sess + 1})
	if r, ok := replied(out, 2); !ok || r.Err != nil {
		t.Fatalf("Ack = %+v, want nil: the item is gone", out.Replies)
	}
	if len(out.Events) != 1 || out.Events[0].Type != events.Acked || !errors.Is(out.Events[0].Err, ErrUncertain) {
		t.Fatalf("events %+v, want ACKED with ErrUncertain", out.Events)
	}
	tr.Check("ack_made_on_the_next_session")
}

// A session lost before the first listing, on the next session before
// any, and during one: FAILED each time; closed then.
func TestTranscriptSessionsLostBeforeAListing(t *testing.T) {
	tr := newTranscript(t)
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(sessionChange{State: zk.StateConnected, SessionID: sess + 1})
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess + 1})
	tr.step(sessionChange{State: zk.StateConnected, SessionID: sess + 2})
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(sessionChange{State: zk.StateLost, SessionID: sess + 2})
	tr.step(listed{Cmd: 1, Err: zk.ErrSessionExpired})
	tr.step(shutdown{Req: 2})
	tr.Check("sessions_lost_before_a_listing")
}

// A listing that fails is sent again once the connection is back; closed
// while it is out.
func TestTranscriptListingSentAgain(t *testing.T) {
	tr := newTranscript(t)
	tr.step(takeCall{Req: 1, Kind: kindTake})
	tr.step(sessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(listed{Cmd: 1, Err: zk.ErrConnectionLoss})
	tr.step(sessionChange{State: zk.StateReconnected, SessionID: sess})
	tr.step(shutdown{Req: 2})
	tr.Check("listing_sent_again")
}

// Closed before anything was read.
func TestTranscriptClosedBeforeATake(t *testing.T) {
	tr := newTranscript(t)
	tr.step(shutdown{Req: 1})
	tr.Check("closed_before_a_take")
}
