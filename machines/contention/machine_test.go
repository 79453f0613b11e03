package contention

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

var testErrors = Errors{
	SessionLost:   errors.New("test: session lost"),
	Suspended:     errors.New("test: suspended"),
	NodeDeleted:   errors.New("test: node deleted"),
	NotHeld:       errors.New("test: not held"),
	Closed:        errors.New("test: closed"),
	Released:      errors.New("test: released"),
	InvalidOption: errors.New("test: invalid option"),
}

const sess = 0x100

// transcript drives a machine with scripted inputs and records, for each
// input, the state change, events, replies and commands it produced.
type transcript struct {
	t    *testing.T
	m    *machine
	b    strings.Builder
	id   int
	prev events.State // the state before the step recorded next
}

func newTranscript(t *testing.T, suspendedIsLost bool) *transcript {
	return newTranscriptWith(t, Config{Dir: "/app/lock", SuspendedIsLost: suspendedIsLost})
}

// newHoldTranscript is a transcript of an election's machine: hold marks.
func newHoldTranscript(t *testing.T) *transcript {
	return newTranscriptWith(t, Config{Dir: "/app/election", SuspendedIsLost: true, HoldMarks: true})
}

// newTranscriptWith runs a machine on cfg with the tests' markers, errors,
// uuids and session.
func newTranscriptWith(t *testing.T, cfg Config) *transcript {
	tr := &transcript{t: t}
	if cfg.Markers == nil {
		cfg.Markers = []string{"lock-", "latch-"}
	}
	cfg.Errors, cfg.SessionID = testErrors, sess
	cfg.NewID = func() string { tr.id++; return fmt.Sprintf("uuid%d", tr.id) }
	m, err := newMachine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr.m, tr.prev = m, m.State()
	tr.record("(start)", outputOf(m.Start()))
	return tr
}

func (tr *transcript) step(in Input) output {
	out := outputOf(tr.m.Step(in))
	tr.record(in.String(), out)
	return out
}

// output is a step's output as the tests read it: the replies as the
// machine made them, a handover's Leftovers in one.
type output struct {
	runtime.Output[command]
	Replies   []Reply
	TermEnded []runtime.TermEnd
}

func outputOf(o runtime.Output[command]) output {
	out := output{Output: o, TermEnded: o.Ended}
	for _, r := range o.Replies {
		switch v := r.Value.(type) {
		case Reply:
			out.Replies = append(out.Replies, v)
		case runtime.Leftovers:
			out.Replies = append(out.Replies, Reply{Req: r.Req, Leftovers: v})
		}
	}
	return out
}

// eventString is a transcript's line for e.
func eventString(e events.Event) string {
	s := fmt.Sprintf("Event %s state=%s term=%d", e.Type, e.State, e.Term)
	if e.Node != "" {
		s += " node=" + e.Node
	}
	if e.Token != 0 {
		s += fmt.Sprintf(" token=%#x", e.Token)
	}
	return s + errText(e.Err)
}

func (tr *transcript) record(in string, out output) {
	fmt.Fprintf(&tr.b, "> %s\n", in)
	for _, e := range out.Events {
		fmt.Fprintf(&tr.b, "  %s\n", eventString(e))
	}
	for _, r := range out.Replies {
		fmt.Fprintf(&tr.b, "  %s\n", r)
	}
	for _, c := range out.Commands {
		fmt.Fprintf(&tr.b, "  %s\n", c)
	}
	for _, e := range out.TermEnded {
		fmt.Fprintf(&tr.b, "  TermEnded %d cause=%v\n", e.Term, e.Cause)
	}
	for _, n := range out.Revoked {
		fmt.Fprintf(&tr.b, "  Revoked %d\n", n)
	}
	if out.Done {
		fmt.Fprintf(&tr.b, "  Done\n")
	}
	fmt.Fprintf(&tr.b, "  = %s\n", tr.m.State())
	if tr.prev != tr.m.State() {
		reached[[2]events.State{tr.prev, tr.m.State()}] = true
		tr.prev = tr.m.State()
	}
	if err := tr.m.Bug(); err != nil {
		tr.t.Fatalf("after %s: %v", in, err)
	}
}

func (tr *transcript) check(name string) {
	tr.t.Helper()
	golden.Check(tr.t, name, tr.b.String())
}

func own(czxid int64) zk.Stat { return zk.Stat{Czxid: czxid, EphemeralOwner: sess} }

func TestTranscriptUncontendedReentrant(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000007"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000007", "other"}, Own: own(0x42), OwnExists: true})
	if len(out.Replies) != 1 || !out.Replies[0].Granted || out.Replies[0].Grant.Token != 0x42 {
		t.Fatalf("want a grant with token 0x42, got %v", out.Replies)
	}
	tr.step(Acquire{Req: 2})
	tr.step(Release{Req: 3})
	tr.step(Release{Req: 4})
	tr.step(done{What: deleted, Cmd: 3})
	tr.step(Release{Req: 5})
	tr.check("uncontended_reentrant")
}

func TestTranscriptZeroReadHandoff(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000003"})
	tr.step(dirRead{Cmd: 2, Children: []string{
		"_c_uuid1-lock-0000000003", "_c_a-lock-0000000001", "_c_b-lock-0000000002", "_c_c-lock-0000000000",
	}, Own: own(0x50), OwnExists: true})
	tr.step(watching{Cmd: 3, Exists: true})
	// The holder before us released with the mark (the marker node created,
	// then its node deleted, in one multi): we hold on the mark's event,
	// with no read.
	out := tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeCreated, Path: "/app/lock/_c_b-lock-0000000002.released"}})
	if len(out.Commands) != 0 || len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want a grant with no command, got %+v", out)
	}
	tr.check("zero_read_handoff")
}

func TestTranscriptWaiterBeforeUsGaveUp(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000003"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000003", "_c_a-lock-0000000001", "_c_b-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	tr.step(watching{Cmd: 3, Exists: true})
	// A plain delete: b may have been a waiter that gave up; look at a.
	tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/lock/_c_b-lock-0000000002"}})
	// A late event for a watch already handled: ignored.
	tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeCreated, Path: "/app/lock/_c_b-lock-0000000002.released"}})
	tr.step(nodesChecked{Cmd: 4, Exists: []bool{true}})
	// The check left a watch on a: its deletion grants, with no read.
	tr.step(fired{What: watchFired, Cmd: 4, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/lock/_c_a-lock-0000000001"}})
	tr.check("waiter_gave_up")
}

func TestTranscriptDataChangeAloneIsNoRelease(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000003"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000003", "_c_a-lock-0000000001", "_c_b-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	tr.step(watching{Cmd: 3, Exists: true})
	// Curator's Revoker writes to the node we wait for: not a release (the
	// child watch does not even fire for it; if a data watch did, the
	// event means nothing).
	out := tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDataChanged, Path: "/app/lock/_c_b-lock-0000000002"}})
	if len(out.Replies) != 0 || len(out.Commands) != 0 {
		t.Fatalf("a data change did something: %+v", out)
	}
	// Its holder then releases plainly, as Curator does: check what is left.
	tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/lock/_c_b-lock-0000000002"}})
	tr.step(nodesChecked{Cmd: 4, Exists: []bool{false}})
	tr.check("data_change_alone")
}

// waitBehind makes tr's machine wait behind .../_c_b-latch-0000000002,
// with _c_a-latch-0000000001 below it: commands 1-3 are used.
func (tr *transcript) waitBehind(dir string) {
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: dir + "/_c_uuid1-latch-0000000003"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-latch-0000000003", "_c_a-latch-0000000001", "_c_b-latch-0000000002"}, Own: own(0x50), OwnExists: true})
}

// With hold marks, the node we wait for announces its grant (its hold
// mark's creation fires our exists watch), then goes with a plain delete:
// we hold with no read, announce ours, and release with a plain delete
// followed by our mark's.
func TestTranscriptHoldMarkHandoff(t *testing.T) {
	tr := newHoldTranscript(t)
	tr.waitBehind("/app/election")
	tr.step(watching{Cmd: 3, Exists: true})
	out := tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeCreated, Path: HoldMark("/app/election/_c_b-latch-0000000002")}})
	if len(out.Replies) != 0 || len(out.Commands) != 0 || len(out.Events) != 0 {
		t.Fatalf("a hold mark's creation did something: %+v", out)
	}
	out = tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/election/_c_b-latch-0000000002"}})
	if len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want a grant, got %+v", out)
	}
	if len(out.Commands) != 1 {
		t.Fatalf("want only the announce, got %v", out.Commands)
	}
	if a, ok := out.Commands[0].(announceMark); !ok || a.Path != "/app/election.held/_c_uuid1-latch-0000000003" {
		t.Fatalf("want an Announce of our hold mark, got %v", out.Commands[0])
	}
	tr.step(done{What: announced, Cmd: 4})
	tr.step(Release{Req: 2})
	tr.step(done{What: deleted, Cmd: 5})
	tr.step(done{What: deleted, Cmd: 6})
	tr.check("hold_mark_handoff")
}

// The hold mark is there when we start watching, and the node is already
// gone: it held, so nothing below is left.
func TestTranscriptHoldMarkSeenByTheWatchRequest(t *testing.T) {
	tr := newHoldTranscript(t)
	tr.waitBehind("/app/election")
	out := tr.step(watching{Cmd: 3, Exists: false, Held: true})
	if len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want a grant, got %+v", out)
	}
	tr.check("hold_mark_seen_by_watch_request")
}

// No hold mark before the deletion (the node was a waiter that gave up, or
// a Curator participant's): look at the lower nodes, as without marks.
func TestTranscriptHoldMarkMissing(t *testing.T) {
	tr := newHoldTranscript(t)
	tr.waitBehind("/app/election")
	tr.step(watching{Cmd: 3, Exists: true})
	out := tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/election/_c_b-latch-0000000002"}})
	if len(out.Commands) != 2 {
		t.Fatalf("want a check of the lower nodes and the dangling hold mark fired, got %v", out.Commands)
	}
	if _, ok := out.Commands[0].(checkNodes); !ok {
		t.Fatalf("want a check of the lower nodes, got %v", out.Commands[0])
	}
	if f, ok := out.Commands[1].(fireMark); !ok || f.Path != HoldMark("/app/election/_c_b-latch-0000000002") {
		t.Fatalf("want the hold mark's watch fired, got %v", out.Commands[1])
	}
	tr.step(nodesChecked{Cmd: 4, Exists: []bool{false}})
	tr.check("hold_mark_missing")
}

// A term that ends while its announce is in flight: the delete of its hold
// mark, sent after the node's, may reach the server before the mark is
// made, so a mark the late reply says was made (or may have been) is
// deleted again. A mark can never be made after its node is gone: the
// announce checks the node in the same multi.
func TestTranscriptHoldMarkLateAnnounce(t *testing.T) {
	tr := newHoldTranscript(t)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/election/_c_uuid1-latch-0000000000"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-latch-0000000000"}, Own: own(0x50), OwnExists: true})
	// SUSPENDED ends the term (SuspendedIsLost): our node is deleted once
	// connected again, and after it our hold mark.
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	tr.step(done{What: announced, Cmd: 3, Err: zk.ErrConnectionLoss})
	tr.step(done{What: deleted, Cmd: 4})
	tr.step(done{What: deleted, Cmd: 5, Err: zk.ErrNoNode})
	tr.step(done{What: deleted, Cmd: 6})
	tr.check("hold_mark_late_announce")
}

func TestTranscriptGhostAdopted(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(created{Cmd: 1, Err: zk.ErrConnectionLoss})
	tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	tr.step(dirListed{Cmd: 2, Children: []string{"_c_zz-lock-0000000000", "_c_uuid1-lock-0000000001"}})
	tr.step(dirRead{Cmd: 3, Children: []string{"_c_zz-lock-0000000000", "_c_uuid1-lock-0000000001"}, Own: own(0x60), OwnExists: true})
	tr.check("ghost_adopted")
}

func TestTranscriptGhostNotFoundCreatesAgain(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Err: zk.ErrConnectionLoss})
	tr.step(dirListed{Cmd: 2, Children: []string{"_c_zz-lock-0000000000"}})
	tr.check("ghost_not_found")
}

func TestTranscriptCreateOnNewSessionIsNotOurs(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000000"})
	stranger := zk.Stat{Czxid: 0x70, EphemeralOwner: sess + 1}
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000000"}, Own: stranger, OwnExists: true})
	if len(out.Replies) != 1 || !errors.Is(out.Replies[0].Err, testErrors.SessionLost) {
		t.Fatalf("want ErrSessionLost, got %v", out.Replies)
	}
	tr.step(done{What: deleted, Cmd: 3})
	tr.check("not_our_session")
}

// The release mark's event was read before the connection was cut and is
// handled after SUSPENDED: no grant while we are cut off (the session may
// end on the server meanwhile, and another hold); we hold once the same
// session is back. The chaos suite (seed 707) saw a hold granted so last
// five seconds beside others'.
func TestTranscriptNoGrantWhileSuspended(t *testing.T) {
	// cutOffWhenNext: a waiter behind one node, SUSPENDED, then the event
	// that says it is next.
	cutOffWhenNext := func(tr *transcript) output {
		tr.step(Acquire{Req: 1})
		tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000003"})
		tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000003", "_c_b-lock-0000000002"}, Own: own(0x50), OwnExists: true})
		tr.step(watching{Cmd: 3, Exists: true})
		tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
		return tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeCreated, Path: "/app/lock/_c_b-lock-0000000002.released"}})
	}
	tr := newTranscript(t, true)
	if out := cutOffWhenNext(tr); len(out.Replies) != 0 {
		t.Fatalf("granted while suspended: %+v", out)
	}
	out := tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	if len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want the grant on RECONNECTED, got %+v", out)
	}

	// The session ends instead: no grant at all.
	lost := newTranscript(t, true)
	cutOffWhenNext(lost)
	out = lost.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	for _, r := range out.Replies {
		if r.Granted {
			t.Fatalf("granted after the session ended: %+v", out)
		}
	}
	tr.b.WriteString(lost.b.String())
	tr.check("no_grant_while_suspended")
}

func TestTranscriptExpiryWhileWaiting(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000001"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000001", "_c_a-lock-0000000000"}, Own: own(0x50), OwnExists: true})
	tr.step(watching{Cmd: 3, Exists: true})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNotWatching, Err: zk.ErrSessionExpired}})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	tr.step(done{What: deleted, Cmd: 4, Err: zk.ErrNoNode})
	tr.check("expiry_while_waiting")
}

func TestTranscriptSuspendedWhileHolding(t *testing.T) {
	for _, lose := range []bool{true, false} {
		t.Run(fmt.Sprintf("suspendedIsLost=%t", lose), func(t *testing.T) {
			tr := newTranscript(t, lose)
			tr.step(Acquire{Req: 1})
			tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000000"})
			tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000000"}, Own: own(0x50), OwnExists: true})
			out := tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
			if ended := len(out.TermEnded) == 1; ended != lose {
				t.Fatalf("term ended on SUSPENDED: %t, want %t", ended, lose)
			}
			tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
			tr.check(fmt.Sprintf("suspended_while_holding_lose_%t", lose))
		})
	}
}

func TestTranscriptCancelDuringCreate(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	out := tr.step(runtime.Cancel{Req: 1})
	// The term ends before its create answered: its STOP events name the
	// protected prefix, which finds the node the create may still make.
	if len(out.Events) != 2 || out.Events[0].Node != "/app/lock/_c_uuid1-lock-" || out.Events[1].Node != "/app/lock/_c_uuid1-lock-" {
		t.Fatalf("want STOP_START and STOP_COMPLETE naming the create's prefix, got %+v", out.Events)
	}
	// The create was applied after the caller gave up: it is deleted.
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000000"})
	tr.step(done{What: deleted, Cmd: 2})
	tr.check("cancel_during_create")
}

func TestTranscriptCancelRacesGrant(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000000"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000000"}, Own: own(0x50), OwnExists: true})
	out := tr.step(runtime.Cancel{Req: 1})
	if len(out.Commands) != 1 {
		t.Fatalf("want the node deleted, got %v", out.Commands)
	}
	tr.check("cancel_races_grant")
}

func TestTranscriptTryAcquireBehindHolder(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1, Try: true})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000001"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000001", "lock-0000000000"}, Own: own(0x50), OwnExists: true})
	if len(out.Replies) != 1 || out.Replies[0].Granted || out.Replies[0].Err != nil {
		t.Fatalf("want not granted, got %v", out.Replies)
	}
	tr.step(done{What: deleted, Cmd: 3})
	tr.check("try_behind_holder")
}

// An earlier term's node in a listing while its delete is in flight: no
// one's to wait behind. (The shell answers a listing and a delete in the
// order they were made, but a delete whose reply was lost is sent again,
// after the listing made meanwhile.) A second TryAcquire once the holder
// is gone holds.
func TestTranscriptOwnNodeInAListingWhileItsDeleteIsSentAgain(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1, Try: true})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000001"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000001", "lock-0000000000"}, Own: own(0x50), OwnExists: true})
	tr.step(Acquire{Req: 2, Try: true})
	tr.step(created{Cmd: 4, Path: "/app/lock/_c_uuid2-lock-0000000002"})
	tr.step(done{What: deleted, Cmd: 3, Err: zk.ErrConnectionLoss})
	out := tr.step(dirRead{Cmd: 5, Children: []string{"_c_uuid1-lock-0000000001", "_c_uuid2-lock-0000000002"}, Own: own(0x52), OwnExists: true})
	if len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want granted, got %v", out.Replies)
	}
	tr.step(done{What: deleted, Cmd: 3})
	tr.check("own_node_in_a_listing_while_its_delete_is_sent_again")
}

func TestTranscriptShutdownWhileHolding(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000000"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000000"}, Own: own(0x50), OwnExists: true})
	tr.step(Acquire{Req: 2})
	tr.step(runtime.Shutdown{Req: 3})
	out := tr.step(done{What: deleted, Cmd: 3})
	if !out.Done {
		t.Fatal("want Done after the node is deleted")
	}
	tr.check("shutdown_while_holding")
}

func TestTranscriptMissingDirectory(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Err: zk.ErrNoNode})
	tr.step(done{What: dirEnsured, Cmd: 2})
	tr.check("missing_directory")
}

func TestSeqOrderAcrossWrap(t *testing.T) {
	children := []string{
		"_c_a-lock-2147483646", "_c_b-lock-2147483647", "_c_me-lock--2147483648", "_c_c-lock--2147483647", "junk",
	}
	got := lower(children, []string{"lock-"}, "_c_me-lock--2147483648", -2147483648, "/d")
	want := []string{"/d/_c_a-lock-2147483646", "/d/_c_b-lock-2147483647"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lower across the wrap = %v, want %v", got, want)
	}
	// A string sort would put "-2147483648" first; serial order puts it last.
	if zk.CompareSequence(2147483647, -2147483648) >= 0 || zk.CompareSequence(-2147483648, 2147483647) <= 0 {
		t.Fatal("serial comparison does not wrap")
	}
}

func TestParseSeq(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  int32
		ok   bool
	}{
		{"_c_x-lock-0000000042", 42, true},
		{"lock-0000000000", 0, true},
		{"_c_x-lock--000000005", -5, true},
		{"_c_x-latch-0000000001", 0, false},
		{"lock-00000001", 0, false},
		{"lock-00000000x1", 0, false},
		// Found by FuzzNodeNames: a sign ZooKeeper never writes.
		{"lock-+000000001", 0, false},
		{"lock--000000000", 0, false},
	} {
		seq, ok := parseSeq(tc.name, []string{"lock-"})
		if seq != tc.seq || ok != tc.ok {
			t.Errorf("parseSeq(%q) = %d, %t; want %d, %t", tc.name, seq, ok, tc.seq, tc.ok)
		}
	}
}

func TestEveryStateReachable(t *testing.T) {
	// The machine's transitions name only states events knows: newMachine
	// would fail otherwise. Its diagram is stable.
	m, err := newMachine(Config{Dir: "/d", Markers: []string{"lock-"}, Errors: testErrors, NewID: func() string { return "x" }})
	if err != nil {
		t.Fatal(err)
	}
	d := m.FSM().Mermaid()
	for _, s := range events.States {
		if !strings.Contains(d, string(s)) {
			t.Errorf("state %s missing from the diagram:\n%s", s, d)
		}
	}
}

// A lost reply to the read of our own node, with the listing answered: a
// failed read, sent again, never our node's deletion (it was a ghost that
// wedged the lock: forgotten, never deleted, ErrNodeDeleted to the caller).
func TestTranscriptOwnReadLost(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000007"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000007"}, Err: errors.Join(nil, zk.ErrConnectionLoss)})
	if len(out.Replies) != 0 || len(out.Commands) != 1 {
		t.Fatalf("a lost own-node read: want the read sent again and no answer, got %+v", out)
	}
	again, ok := out.Commands[0].(readDir)
	if !ok {
		t.Fatalf("want ReadDir again, got %T", out.Commands[0])
	}
	out = tr.step(dirRead{Cmd: again.Cmd, Children: []string{"_c_uuid1-lock-0000000007"}, Own: own(0x42), OwnExists: true})
	if len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want a grant after the read succeeded, got %+v", out)
	}
	tr.check("own_read_lost")
}

// A create refused by the server fails the term, and the FAILED event
// names the protected prefix the create used.
func TestTranscriptCreateRefused(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	out := tr.step(created{Cmd: 1, Err: zk.ErrNoAuth})
	var failed *events.Event
	for i := range out.Events {
		if out.Events[i].Type == events.Failed {
			failed = &out.Events[i]
		}
	}
	if failed == nil || failed.Node != "/app/lock/_c_uuid1-lock-" {
		t.Fatalf("want a FAILED event naming the create's prefix, got %+v", out.Events)
	}
	tr.check("create_refused")
}

// Closed while the connection is down (the suspension already ended the
// hold): the delete of our node waits for the connection, so the close
// gives up (handover), answers with the node still to delete, and the
// machine is done.
func TestTranscriptHandoverWhileDisconnected(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000007"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000007"}, Own: own(0x42), OwnExists: true})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(runtime.Shutdown{Req: 2})
	out := tr.step(runtime.Handover{Req: 3})
	var l runtime.Leftovers
	for _, r := range out.Replies {
		if r.Req == 3 {
			l = r.Leftovers
		}
	}
	if !out.Done || l.Session != sess || len(l.Nodes) != 1 || l.Nodes[0] != "/app/lock/_c_uuid1-lock-0000000007" {
		t.Fatalf("want Done and the node handed over on session %#x, got %+v", sess, out)
	}
	tr.check("handover_while_disconnected")
}

// handedOver returns the Leftovers of handover req's reply in out, and
// fails unless the machine is Done.
func handedOver(t *testing.T, out output, req uint64) runtime.Leftovers {
	t.Helper()
	if !out.Done {
		t.Fatalf("want the machine Done after the handover, got %+v", out)
	}
	for _, r := range out.Replies {
		if r.Req == req {
			return r.Leftovers
		}
	}
	t.Fatalf("no reply to the handover: %+v", out)
	return runtime.Leftovers{}
}

// A leader closed while its connection is down (the suspension ended its
// term; the delete of its node, and after it of its hold mark, wait for
// the connection): the handover gives the janitor both, so that the mark
// goes too; once, also when the announce of the mark was still in flight
// (it may have made the mark).
func TestTranscriptHandoverHoldMark(t *testing.T) {
	for _, tc := range []struct {
		name      string
		announced bool // the announce's reply came before the suspension
	}{
		{"handover_hold_mark", true},
		{"handover_hold_mark_announce_in_flight", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newHoldTranscript(t)
			tr.step(Acquire{Req: 1, Marker: "latch-"})
			tr.step(created{Cmd: 1, Path: "/app/election/_c_uuid1-latch-0000000000"})
			tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-latch-0000000000"}, Own: own(0x50), OwnExists: true})
			if tc.announced {
				tr.step(done{What: announced, Cmd: 3})
			}
			tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
			tr.step(runtime.Shutdown{Req: 2})
			l := handedOver(t, tr.step(runtime.Handover{Req: 3}), 3)
			want := []string{"/app/election.held/_c_uuid1-latch-0000000000", "/app/election/_c_uuid1-latch-0000000000"}
			if l.Session != sess || !slices.Equal(l.Nodes, want) || len(l.Prefixes) != 0 {
				t.Fatalf("want %v handed over on session %#x, got %+v", want, sess, l)
			}
			tr.check(tc.name)
		})
	}
}

// Closed while the connection is down and its create's reply has not come
// (sent, so it may have made a node), or came back a connection loss (the
// search for the node by its uuid waits for the connection): the handover
// gives the janitor the create's protected prefix, whose nodes it deletes.
// A create never sent made nothing and is not handed over.
func TestTranscriptHandoverCreateInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply bool // the create's reply came: a connection loss
	}{
		{"handover_create_in_flight", false},
		{"handover_create_reply_lost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTranscript(t, true)
			tr.step(Acquire{Req: 1})
			tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
			if tc.reply {
				tr.step(created{Cmd: 1, Err: zk.ErrConnectionLoss})
			}
			tr.step(runtime.Shutdown{Req: 2})
			l := handedOver(t, tr.step(runtime.Handover{Req: 3}), 3)
			if l.Session != sess || len(l.Nodes) != 0 || !slices.Equal(l.Prefixes, []string{"/app/lock/_c_uuid1-lock-"}) {
				t.Fatalf("want the create's prefix handed over on session %#x, got %+v", sess, l)
			}
			tr.check(tc.name)
		})
	}
	tr := newTranscript(t, true)
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	tr.step(Acquire{Req: 1}) // its create is held back: never sent
	tr.step(runtime.Shutdown{Req: 2})
	if l := handedOver(t, tr.step(runtime.Handover{Req: 3}), 3); len(l.Nodes)+len(l.Prefixes) != 0 {
		t.Fatalf("a create never sent was handed over: %+v", l)
	}
}

// Our node deleted by another client while we hold: the watch set by the
// own-node read tells, the term fails with NodeDeleted (the grant's Loss
// closes with it), and its delete is sent all the same (a hold mark may
// follow it). An event of an earlier term's watch is stale.
func TestTranscriptOwnNodeDeletedWhileHeld(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000007"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000007"}, Own: own(0x42), OwnExists: true})
	tr.step(fired{What: ownNodeGone, Cmd: 1, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/lock/_c_uuid1-lock-0000000007"}})
	out := tr.step(fired{What: ownNodeGone, Cmd: 2, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/lock/_c_uuid1-lock-0000000007"}})
	if len(out.TermEnded) != 1 || !errors.Is(out.TermEnded[0].Cause, testErrors.NodeDeleted) {
		t.Fatalf("want the term ended by NodeDeleted, got %+v", out)
	}
	tr.check("own_node_deleted_while_held")
}

// Our own Release deletes our node too, and the watch the own-node read
// left fires for it: that event is no foreign deletion. It may reach the
// actor while the delete is under way (the term has ended) or after a
// new term already holds (it is the old read's watch): neither ends a
// term, and the new grant is not lost.
func TestTranscriptOwnReleaseIsNotAForeignDelete(t *testing.T) {
	const first, second = "/app/lock/_c_uuid1-lock-0000000007", "/app/lock/_c_uuid2-lock-0000000008"
	gone := func(cmd uint64, path string) fired {
		return fired{What: ownNodeGone, Cmd: cmd, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: path}}
	}
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: first})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000007"}, Own: own(0x42), OwnExists: true})
	out := tr.step(Release{Req: 2})
	if len(out.TermEnded) != 1 || !errors.Is(out.TermEnded[0].Cause, testErrors.Released) {
		t.Fatalf("want the term ended by Released, got %+v", out)
	}
	// The server sends the watch's event before the delete's reply.
	if out := tr.step(gone(2, first)); len(out.Events)+len(out.Replies)+len(out.Commands)+len(out.TermEnded) != 0 {
		t.Fatalf("our own delete's event during the delete did something: %+v", out)
	}
	tr.step(done{What: deleted, Cmd: 3})
	tr.step(Acquire{Req: 3})
	tr.step(created{Cmd: 4, Path: second})
	if out := tr.step(dirRead{Cmd: 5, Children: []string{"_c_uuid2-lock-0000000008"}, Own: own(0x43), OwnExists: true}); len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want the second term granted, got %+v", out)
	}
	// The same event, posted late, after the next term holds.
	if out := tr.step(gone(2, first)); len(out.Events)+len(out.Replies)+len(out.Commands)+len(out.TermEnded) != 0 {
		t.Fatalf("the first term's watch event ended the second term: %+v", out)
	}
	if s := tr.m.State(); s != events.StateLeader {
		t.Fatalf("state after a stale own-node event = %s, want LEADER", s)
	}
	out = tr.step(Release{Req: 4})
	if len(out.TermEnded) != 1 || out.TermEnded[0].Term != 2 || !errors.Is(out.TermEnded[0].Cause, testErrors.Released) {
		t.Fatalf("want the second term ended by Released, got %+v", out)
	}
	tr.check("own_release_not_foreign")
}

// An election's resign is a plain delete (hold marks): its event is ours
// too, and the hold mark's delete follows the node's as usual.
func TestTranscriptOwnResignIsNotAForeignDelete(t *testing.T) {
	const node = "/app/election/_c_uuid1-latch-0000000003"
	tr := newHoldTranscript(t)
	tr.step(Acquire{Req: 1, Marker: "latch-"})
	tr.step(created{Cmd: 1, Path: node})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-latch-0000000003"}, Own: own(0x50), OwnExists: true})
	tr.step(done{What: announced, Cmd: 3})
	tr.step(Release{Req: 2, All: true})
	out := tr.step(fired{What: ownNodeGone, Cmd: 2, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: node}})
	if len(out.Events)+len(out.Replies)+len(out.Commands)+len(out.TermEnded) != 0 {
		t.Fatalf("our own resign's event did something: %+v", out)
	}
	tr.step(done{What: deleted, Cmd: 4})
	tr.step(done{What: deleted, Cmd: 5})
	tr.check("own_resign_not_foreign")
}

// A reply that fails with zk.ErrSessionExpired (a request in flight when
// the session expired, its answer ahead of LOST) ends the term with
// SessionLost, whichever request it answers: the caller and the grant's
// Loss are told the session is gone, not a bare ZooKeeper error. So does
// a read answered on the session that replaced ours, ahead of LOST, that
// finds our node gone with our session: no one else deleted it.
func TestReplyOfAnExpiredSessionIsSessionLost(t *testing.T) {
	const ours, p1, p2 = "_c_uuid1-lock-0000000002", "_c_a-lock-0000000000", "_c_b-lock-0000000001"
	node := "/app/lock/" + ours
	expired := zk.ErrSessionExpired
	for _, tc := range []struct {
		name string
		run  func(tr *transcript) output // the steps up to the expired reply
	}{
		{"create", func(tr *transcript) output {
			return tr.step(created{Cmd: 1, Err: expired})
		}},
		{"directory create", func(tr *transcript) output {
			tr.step(created{Cmd: 1, Err: zk.ErrNoNode})
			return tr.step(done{What: dirEnsured, Cmd: 2, Err: expired})
		}},
		{"ghost listing", func(tr *transcript) output {
			tr.step(created{Cmd: 1, Err: zk.ErrConnectionLoss})
			return tr.step(dirListed{Cmd: 2, Err: expired})
		}},
		{"own-node read", func(tr *transcript) output {
			tr.step(created{Cmd: 1, Path: node})
			return tr.step(dirRead{Cmd: 2, Children: []string{ours}, Err: errors.Join(nil, expired)})
		}},
		{"own node gone with the session, read before LOST", func(tr *transcript) output {
			tr.step(created{Cmd: 1, Path: node})
			return tr.step(dirRead{Cmd: 2, Children: []string{p1}, Session: sess + 1})
		}},
		{"predecessor watch", func(tr *transcript) output {
			tr.step(created{Cmd: 1, Path: node})
			tr.step(dirRead{Cmd: 2, Children: []string{p1, ours}, Own: own(0x50), OwnExists: true})
			return tr.step(watching{Cmd: 3, Err: errors.Join(expired, nil)})
		}},
		{"recheck", func(tr *transcript) output {
			tr.step(created{Cmd: 1, Path: node})
			tr.step(dirRead{Cmd: 2, Children: []string{p1, p2, ours}, Own: own(0x50), OwnExists: true})
			tr.step(watching{Cmd: 3, Exists: true})
			tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/lock/" + p2}})
			return tr.step(nodesChecked{Cmd: 4, Exists: []bool{false}, Err: errors.Join(expired)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTranscript(t, true)
			tr.step(Acquire{Req: 1})
			out := tc.run(tr)
			if len(out.Replies) != 1 || !errors.Is(out.Replies[0].Err, testErrors.SessionLost) {
				t.Errorf("Acquire's answer = %+v, want SessionLost\n%s", out.Replies, tr.b.String())
			}
			if len(out.TermEnded) != 1 || !errors.Is(out.TermEnded[0].Cause, testErrors.SessionLost) {
				t.Errorf("term ended = %+v, want SessionLost\n%s", out.TermEnded, tr.b.String())
			}
		})
	}
}

// Our node deleted by our own connection's close (the session ends with
// it): the term ends with Closed, not with NodeDeleted, which says someone
// else deleted it.
func TestTranscriptOwnNodeGoneWithOurConnection(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000007"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000007"}, Own: own(0x50), OwnExists: true})
	out := tr.step(fired{What: ownNodeGone, Cmd: 2, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/lock/_c_uuid1-lock-0000000007"}, ConnClosed: true})
	if len(out.TermEnded) != 1 || !errors.Is(out.TermEnded[0].Cause, testErrors.Closed) {
		t.Fatalf("want the term ended with Closed, got %+v", out)
	}
	tr.check("own_node_gone_with_our_connection")
}

// The node ahead is gone before our watch on it is set (released between
// our listing and the watch): its release mark's exists watch would wait
// for a creation that never comes, and go-zookeeper cannot remove it. The
// multi that deletes our node at the term's end also makes and deletes
// that mark, so the watch fires, with no write of its own.
func TestTranscriptDanglingMarkWatchFired(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000002"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000001", "_c_uuid1-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	out := tr.step(watching{Cmd: 3, Exists: false})
	if len(out.Commands) != 0 || len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want a grant (nothing else below) and no request, got %+v", out)
	}
	out = tr.step(Release{Req: 2})
	if d, ok := only[deleteNode](out); !ok || !d.Release || !slices.Equal(d.Fire, []string{ReleaseMark("/app/lock/_c_a-lock-0000000001")}) {
		t.Fatalf("want our release to fire a's mark, got %+v", out.Commands)
	}
	tr.check("dangling_mark_watch_fired")
}

// A waiter that gives up while its watch request is out keeps its node
// until the reply is in: the request runs on a goroutine, and its watch
// on the mark can be set after the node ahead went (its release's mark
// made and gone already); that watch would wait in vain. The reply tells,
// and the node goes with the mark fired in its multi. A Close meanwhile
// hands the node over. (The reply was dropped as stale: a writer behind a
// writer that gave up kept the mark's watch, rwlock's
// TestNoWatchLeftWhenAWriterGivesUp under load.)
func TestTranscriptGaveUpWhileTheWatchRequestWasOut(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000002"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000001", "_c_uuid1-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	tr.step(runtime.Cancel{Req: 1})
	tr.step(watching{Cmd: 3, Exists: false})
	tr.step(done{What: deleted, Cmd: 4})
	tr.step(Acquire{Req: 2})
	tr.step(created{Cmd: 5, Path: "/app/lock/_c_uuid2-lock-0000000006"})
	tr.step(dirRead{Cmd: 6, Children: []string{"_c_b-lock-0000000003", "_c_uuid2-lock-0000000006"}, Own: own(0x52), OwnExists: true})
	tr.step(runtime.Shutdown{Req: 3})
	out := tr.step(runtime.Handover{Req: 4})
	if len(out.Replies) == 0 || !slices.Equal(out.Replies[0].Leftovers.Nodes, []string{"/app/lock/_c_uuid2-lock-0000000006"}) {
		t.Fatalf("want our node handed over, got %+v", out)
	}
	tr.check("gave_up_while_the_watch_request_was_out")
}

// A handle closed before any call stops at once; a waiter that gives up
// stops; a handle whose term failed offers again on its next Acquire.
func TestTranscriptShutdownAtStart(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(runtime.Shutdown{Req: 1})
	tr.check("shutdown_at_start")
}

func TestTranscriptWaiterCancelledThenLost(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000003"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000003", "_c_a-lock-0000000001"}, Own: own(0x50), OwnExists: true})
	tr.step(runtime.Cancel{Req: 1})
	tr.step(watching{Cmd: 3, Exists: true}) // our node goes once it is in (see deleteTermNode)
	tr.step(done{What: deleted, Cmd: 4})
	tr.step(Acquire{Req: 2})
	tr.step(created{Cmd: 5, Path: "/app/lock/_c_uuid2-lock-0000000005"})
	tr.step(dirRead{Cmd: 6, Children: []string{"_c_uuid2-lock-0000000005", "_c_a-lock-0000000001"}, Own: own(0x52), OwnExists: true})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(Acquire{Req: 3})
	tr.check("waiter_cancelled_then_lost")
}
