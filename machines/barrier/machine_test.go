package barrier

import (
	"errors"
	"fmt"
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
	m *machine
}

func newTranscript(t *testing.T, members int) *transcript {
	m := newMachine(config{Path: "/app/b", Members: members, Name: "me", SessionID: sess})
	tr := &transcript{m: m, Transcript: &golden.Transcript{T: t, State: m.State,
		Event: func(e events.Event) string { return fmt.Sprintf("%s state=%s node=%s", e.Type, e.State, e.Node) },
		Value: func(v any) string {
			if v == nil {
				return ""
			}
			return fmt.Sprint(v)
		},
	}}
	track(m.fsm, "double")
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
	return out
}

func replied(out runtime.Output[command], req uint64) (runtime.Reply, bool) {
	for _, r := range out.Replies {
		if r.Req == req {
			return r, true
		}
	}
	return runtime.Reply{}, false
}

// We arrive last: the listing shows the 2 others, so our node and ready go
// in one multi and we pass. Then we leave as the lowest: we wait on the
// highest, and delete our node once alone; then ready goes.
func TestTranscriptLastArrivalAndExit(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"x-1", "y-1"}})
	out := tr.step(joined{Cmd: 2, Name: "me-1", ReadyCreated: true})
	if r, ok := replied(out, 1); !ok || r.Err != nil {
		t.Fatalf("Enter not answered: %+v", r)
	}
	tr.step(call{Op: opLeave, Req: 2})
	tr.step(leaveListed{Cmd: 3, Children: []string{"ready", "me-1", "x-1", "y-1"}})
	tr.step(nodeWatched{Cmd: 4, Exists: true})
	tr.step(nodeGone{Cmd: 4})
	tr.step(leaveListed{Cmd: 5, Children: []string{"ready", "me-1", "x-1"}})
	tr.step(nodeWatched{Cmd: 6, Exists: false})
	tr.step(leaveListed{Cmd: 7, Children: []string{"ready", "me-1"}})
	tr.step(memberDeleted{Cmd: 8, Name: "me-1"})
	tr.step(leaveListed{Cmd: 9, Children: []string{"ready"}})
	out = tr.step(readyDeleted{Cmd: 10})
	if r, ok := replied(out, 2); !ok || r.Err != nil {
		t.Fatalf("Leave not answered: %+v", r)
	}
	tr.Check("last_arrival_and_exit")
}

// We arrive first and wait on ready; a ready of an earlier round is
// there. Its deletion wakes us (not through); the new one lets us in.
// Another member's node from the last round, still leaving, is not
// counted when we leave: it was not in our first listing.
func TestTranscriptStaleReadyAndNextRound(t *testing.T) {
	tr := newTranscript(t, 2)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("2"), ReadyExists: true, ReadyCzxid: 7})
	tr.step(joined{Cmd: 2, Name: "me-1", Children: []string{"me-1"}})
	tr.step(readyEvent{Cmd: 1, Type: zk.EventNodeDeleted})
	tr.step(readyWatched{Cmd: 3, Exists: false})
	out := tr.step(readyEvent{Cmd: 3, Type: zk.EventNodeCreated})
	if r, ok := replied(out, 1); !ok || r.Err != nil {
		t.Fatalf("Enter not answered: %+v", r)
	}
	tr.step(call{Op: opLeave, Req: 2})
	tr.step(leaveListed{Cmd: 4, Children: []string{"ready", "me-1", "a-1"}})
	tr.step(memberDeleted{Cmd: 5, Name: "me-1"})
	tr.step(nodeWatched{Cmd: 6, Exists: true})
	tr.step(nodeGone{Cmd: 6})
	// a left and entered the next round already: a-2 is not waited for.
	tr.step(leaveListed{Cmd: 7, Children: []string{"a-2"}})
	out = tr.step(readyDeleted{Cmd: 8})
	if r, ok := replied(out, 2); !ok || r.Err != nil {
		t.Fatalf("Leave not answered: %+v", r)
	}
	tr.Check("stale_ready_and_next_round")
}

// The session ends while we wait for the others: Enter fails with
// ErrSessionLost, and we are FAILED until we enter again, with a new node
// name.
func TestTranscriptSessionLostWhileEntering(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"b-1"}})
	tr.step(joined{Cmd: 2, Name: "me-1", Children: []string{"b-1", "me-1"}})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	out := tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	if r, ok := replied(out, 1); !ok || !errors.Is(r.Err, ErrSessionLost) {
		t.Fatalf("Enter = %+v, want ErrSessionLost", r)
	}
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	tr.step(readyEvent{Cmd: 1, Type: zk.EventNotWatching}) // the old watch ends: ignored
	tr.step(call{Op: opEnter, Req: 2})
	tr.Check("session_lost_while_entering")
}

// The session ends while our member node's create is in flight; its
// reply comes later and says it was made: on the session that followed,
// possibly (the client sends queued requests after a reconnect), where it
// would count us in a round we are not in. It is deleted.
func TestTranscriptJoinAfterSessionLost(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"b-1"}})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	out := tr.step(joined{Cmd: 2, Name: "me-1", Children: []string{"b-1", "me-1"}})
	if len(out.Commands) != 1 || out.Commands[0].Op != opDeleteMember || out.Commands[0].Name != "me-1" {
		t.Fatalf("commands %v, want me-1 deleted", out.Commands)
	}
	tr.step(memberDeleted{Cmd: 3, Name: "me-1"})
	tr.Check("join_after_session_lost")
}

// Our listing after our create shows the count full, and a ready we did
// not see before is in the way: openReady is sent (exec decides whether it
// is stale); a member count recorded differently is refused before any
// create.
func TestTranscriptCountFullAndMismatch(t *testing.T) {
	tr := newTranscript(t, 2)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("2")})
	tr.step(joined{Cmd: 2, Name: "me-1", Children: []string{"b-1", "me-1"}})
	tr.step(readyOpened{Cmd: 3})
	other := newTranscript(t, 3)
	other.step(call{Op: opEnter, Req: 1})
	out := other.step(probed{Cmd: 1, PathData: []byte("2")})
	if r, ok := replied(out, 1); !ok || !errors.Is(r.Err, ErrMembersMismatch) || len(out.Commands) != 0 {
		t.Fatalf("Enter with 3 on a path of 2 = %+v, %v", r, out.Commands)
	}
	tr.Append(other.String())
	tr.Check("count_full_and_mismatch")
}

// We arrive last, and the server sends the watch event of the ready our
// multi made before the multi's reply. We are through only once the reply
// says our node is made too: passing on the event alone let a Leave begin
// before the reply, which then took our node for a withdrawn call's and
// deleted it while we were inside (the chaos suite's early Leave). When
// another member's ready comes while our own create is in flight, that
// ready was made before our node and did not count us: it is checked, and
// a round in progress without us is waited out.
func TestTranscriptReadyBeforeOurJoinReply(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"x-1", "y-1"}})
	out := tr.step(readyEvent{Cmd: 1, Type: zk.EventNodeCreated})
	if _, ok := replied(out, 1); ok {
		t.Fatal("Enter answered before our node was made")
	}
	out = tr.step(joined{Cmd: 2, Name: "me-1", ReadyCreated: true})
	if r, ok := replied(out, 1); !ok || r.Err != nil {
		t.Fatalf("Enter not answered: %+v", r)
	}
	tr.step(call{Op: opLeave, Req: 2})
	out = tr.step(leaveListed{Cmd: 3, Children: []string{"ready", "me-1", "x-1", "y-1"}})
	for _, c := range out.Commands {
		if c.Op == opDeleteMember {
			t.Fatalf("the lowest member deletes its node first: %v", out.Commands)
		}
	}

	other := newTranscript(t, 3)
	other.step(call{Op: opEnter, Req: 1})
	other.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"x-1"}})
	out = other.step(readyEvent{Cmd: 1, Type: zk.EventNodeCreated})
	if _, ok := replied(out, 1); ok {
		t.Fatal("Enter answered before our node was made")
	}
	out = other.step(joined{Cmd: 2, Name: "me-1", Children: []string{"me-1", "x-1", "y-1", "ready"}})
	if _, ok := replied(out, 1); ok {
		t.Fatal("Enter answered on a ready made before our node")
	}
	if _, ok := only(out, opOpenReady); !ok {
		t.Fatalf("commands %v, want openReady to check the ready made before our node", out.Commands)
	}
	// It did not count us: x-1 and y-1, made before it, are in a round
	// without us. Our node goes; we wait for one of them, under a new name.
	out = other.step(readyOpened{Cmd: 3, InProgress: []string{"y-1", "x-1"}})
	if _, ok := replied(out, 1); ok || len(out.Commands) != 2 {
		t.Fatalf("replies %v, commands %v; want none, and our node's delete and a watch on x-1", out.Replies, out.Commands)
	}
	if d := out.Commands[0]; d.Op != opDeleteMember || d.Name != "me-1" {
		t.Fatalf("commands %v, want me-1 deleted first", out.Commands)
	}
	if w := out.Commands[1]; w.Op != opWatchMember || w.Name != "x-1" {
		t.Fatalf("commands %v, want a watch on x-1", out.Commands)
	}
	other.step(memberDeleted{Cmd: 4, Name: "me-1"})
	// A late answer about ready, from before the withdrawal: ignored.
	if out = other.step(readyWatched{Cmd: 1, Exists: true, Czxid: 99}); len(out.Commands) != 0 {
		t.Fatalf("commands %v after a stale answer about ready, want none", out.Commands)
	}
	other.step(nodeWatched{Cmd: 5, Exists: true})
	out = other.step(nodeGone{Cmd: 5})
	if _, ok := only(out, opProbe); !ok {
		t.Fatalf("commands %v, want a look again", out.Commands)
	}
	out = other.step(probed{Cmd: 6, PathData: []byte("3"), Children: []string{"x-2", "y-2"}})
	if j, ok := only(out, opJoin); !ok || j.Name != "me-2" || !j.WithReady {
		t.Fatalf("commands %v, want me-2 joined with ready", out.Commands)
	}
	if r, ok := replied(other.step(joined{Cmd: 7, Name: "me-2", ReadyCreated: true}), 1); !ok || r.Err != nil {
		t.Fatalf("Enter not answered: %+v", r)
	}
	tr.Append(other.String())
	tr.Check("ready_before_our_join_reply")
}

// Ready is there and members who entered before it are still in: a round
// in progress (we were counted out of it, or come late). We make no node
// and count no one (they may leave without waiting for us): we watch one
// of them, look again when it goes, and once ready goes (the round is
// over) we look again and join the next round.
func TestTranscriptRoundInProgress(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	out := tr.step(probed{Cmd: 1, PathData: []byte("3"), ReadyExists: true, ReadyCzxid: 50,
		Children: []string{"ready", "b-1", "c-1"}, Inside: []string{"c-1", "b-1"}})
	if len(out.Commands) != 1 || out.Commands[0].Op != opWatchMember || out.Commands[0].Name != "b-1" {
		t.Fatalf("commands %v, want a watch on b-1 and no node of ours", out.Commands)
	}
	tr.step(nodeWatched{Cmd: 2, Exists: true})
	tr.step(nodeGone{Cmd: 2}) // b-1 left: look again
	tr.step(probed{Cmd: 3, PathData: []byte("3"), ReadyExists: true, ReadyCzxid: 50,
		Children: []string{"ready", "c-1"}, Inside: []string{"c-1"}})
	tr.step(nodeWatched{Cmd: 4, Exists: true})
	tr.step(readyEvent{Cmd: 1, Type: zk.EventNodeDeleted}) // the first look's watch: ignored
	tr.step(readyEvent{Cmd: 3, Type: zk.EventNodeDeleted}) // the round is over
	tr.step(nodeGone{Cmd: 4})                              // ignored: we looked again
	tr.step(probed{Cmd: 5, PathData: []byte("3"), Children: []string{"b-2"}})
	tr.step(joined{Cmd: 6, Name: "me-1", Children: []string{"b-2", "c-2", "me-1"}})
	out = tr.step(readyOpened{Cmd: 7})
	if r, ok := replied(out, 1); !ok || r.Err != nil {
		t.Fatalf("Enter not answered: %+v", r)
	}
	tr.Check("round_in_progress")
}

// The server closed our session while we were inside, and Leave's first
// listing (sent on the session that followed) comes before the session
// events: our node is gone and we did not delete it. The others count us
// out, so Leave says ErrSessionLost (not through with them), and the
// session events that follow add nothing.
func TestTranscriptNodeGoneBeforeLeave(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"x-1", "y-1"}})
	tr.step(joined{Cmd: 2, Name: "me-1", ReadyCreated: true})
	tr.step(call{Op: opLeave, Req: 2})
	out := tr.step(leaveListed{Cmd: 3, Children: []string{"ready", "x-1", "y-1"}})
	if r, ok := replied(out, 2); !ok || !errors.Is(r.Err, ErrSessionLost) || len(out.Commands) != 0 {
		t.Fatalf("Leave = %+v, commands %v; want ErrSessionLost, nothing sent", r, out.Commands)
	}
	out = tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	out2 := tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	if n := len(out.Events) + len(out2.Events); n != 0 {
		t.Fatalf("%d more events after the Leave said the session was lost", n)
	}
	tr.step(call{Op: opEnter, Req: 3})
	tr.Check("node_gone_before_leave")
}

// We pass Enter on ready's watch event, and our connection then moves to
// a server that has not caught up with ready yet: the first Leave listing
// lacks ready and the member who made it. A round read from it would
// leave that member out (as the lowest, we would wait on x-1 alone and go
// without y-1), so we sync and list again before the round is fixed.
func TestTranscriptLeaveListingBehindReady(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"x-1"}})
	tr.step(joined{Cmd: 2, Name: "me-1", Children: []string{"me-1", "x-1"}})
	out := tr.step(readyEvent{Cmd: 1, Type: zk.EventNodeCreated})
	if r, ok := replied(out, 1); !ok || r.Err != nil {
		t.Fatalf("Enter not answered: %+v", r)
	}
	tr.step(call{Op: opLeave, Req: 2})
	out = tr.step(leaveListed{Cmd: 3, Children: []string{"me-1", "x-1"}})
	if _, ok := only(out, opSyncList); !ok {
		t.Fatalf("commands %v, want a sync and a listing", out.Commands)
	}
	out = tr.step(leaveListed{Cmd: 4, Children: []string{"ready", "me-1", "x-1", "y-1"}})
	if w, ok := only(out, opWatchMember); !ok || w.Name != "y-1" {
		t.Fatalf("commands %v, want the watch on the highest, y-1", out.Commands)
	}
	tr.step(nodeWatched{Cmd: 5, Exists: false})
	out = tr.step(leaveListed{Cmd: 6, Children: []string{"ready", "me-1", "x-1"}})
	if w, ok := only(out, opWatchMember); !ok || w.Name != "x-1" {
		t.Fatalf("commands %v, want the watch on x-1", out.Commands)
	}
	tr.Check("leave_listing_behind_ready")
}

// only returns out's one command, if it is request op.
func only(out runtime.Output[command], op op) (command, bool) {
	if len(out.Commands) != 1 || out.Commands[0].Op != op {
		return command{}, false
	}
	return out.Commands[0], true
}

// Our listing shows the count full, and the ready in openReady's way went
// before it was read: nothing is made and nothing answered; we watch ready
// again, and one made after our create's reply is ours. Then, in another
// member: a ready's event came before our create's reply, with the count
// not full; it is only checked, and found stale (made before our node, no
// one in): we wait for the next, which the member completing the count
// makes in its place.
func TestTranscriptReadyInTheWayWent(t *testing.T) {
	tr := newTranscript(t, 2)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("2")})
	out := tr.step(joined{Cmd: 2, Name: "me-1", Children: []string{"b-1", "me-1", "ready"}})
	if _, ok := only(out, opOpenReady); !ok {
		t.Fatalf("commands %v, want openReady", out.Commands)
	}
	out = tr.step(readyOpened{Cmd: 3, Gone: true})
	if _, ok := only(out, opWatchReady); !ok || len(out.Replies) != 0 {
		t.Fatalf("commands %v, replies %v; want a watch on ready and no reply", out.Commands, out.Replies)
	}
	tr.step(readyWatched{Cmd: 4})
	out = tr.step(readyEvent{Cmd: 4, Type: zk.EventNodeCreated})
	if r, ok := replied(out, 1); !ok || r.Err != nil {
		t.Fatalf("Enter not answered: %+v", r)
	}

	other := newTranscript(t, 3)
	other.step(call{Op: opEnter, Req: 1})
	other.step(probed{Cmd: 1, PathData: []byte("3")})
	other.step(readyEvent{Cmd: 1, Type: zk.EventNodeCreated})
	out = other.step(joined{Cmd: 2, Name: "me-1", Children: []string{"me-1", "ready"}})
	if _, ok := only(out, opCheckReady); !ok {
		t.Fatalf("commands %v, want the ready checked, not made", out.Commands)
	}
	out = other.step(readyOpened{Cmd: 3, Stale: 40})
	if _, ok := only(out, opWatchReady); !ok || len(out.Replies) != 0 {
		t.Fatalf("commands %v, replies %v; want a watch on ready and no reply", out.Commands, out.Replies)
	}
	other.step(readyWatched{Cmd: 4, Exists: true, Czxid: 40}) // the stale one: wait
	other.step(readyEvent{Cmd: 4, Type: zk.EventNodeDeleted})
	out = other.step(readyWatched{Cmd: 5, Exists: true, Czxid: 60})
	if _, ok := only(out, opCheckReady); !ok {
		t.Fatalf("commands %v, want the new ready checked", out.Commands)
	}
	out = other.step(readyOpened{Cmd: 6})
	if r, ok := replied(out, 1); !ok || r.Err != nil {
		t.Fatalf("Enter not answered: %+v", r)
	}
	tr.Append(other.String())
	tr.Check("ready_in_the_way_went")
}

// An Enter whose caller gave up just as it was let in (its answer
// refused, runtime.Spec.Refused) gets out as a withdrawn Enter does: our
// node is deleted, and the members leaving see us gone.
func TestTranscriptRefusedEnterGetsOut(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"x-1", "y-1"}})
	tr.step(joined{Cmd: 2, Name: "me-1", ReadyCreated: true})
	out := tr.step(enterRefused{})
	if len(out.Commands) != 1 || tr.m.State() != events.StateStart {
		t.Fatalf("refused Enter: %+v, state %s; want our node deleted, outside", out, tr.m.State())
	}
	tr.Check("refused_enter_gets_out")
}

// An Enter whose caller stopped waiting while the others were awaited
// (withdrawn: the Shell's cancel) gets out: our node is deleted, and we
// are outside, with no reply owed.
func TestTranscriptWithdrawnEnterGetsOut(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"b-1"}})
	tr.step(joined{Cmd: 2, Name: "me-1", Children: []string{"b-1", "me-1"}})
	out := tr.step(runtime.Cancel{Req: 1})
	del, ok := only(out, opDeleteMember)
	if !ok || del.Name != "me-1" || len(out.Replies) != 0 || tr.m.State() != events.StateStart {
		t.Fatalf("withdrawn Enter: %+v, state %s; want me-1 deleted, no reply, outside", out, tr.m.State())
	}
	tr.step(memberDeleted{Cmd: del.Cmd, Name: "me-1"})
	tr.step(readyEvent{Cmd: 1, Type: zk.EventNodeCreated}) // the others' round: not ours
	tr.Check("withdrawn_enter_gets_out")
}

// An Enter withdrawn while our node's create is out: the node the reply
// says was made is deleted when the reply comes.
func TestTranscriptEnterWithdrawnDuringItsCreate(t *testing.T) {
	tr := newTranscript(t, 3)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("3"), Children: []string{"b-1"}})
	if out := tr.step(runtime.Cancel{Req: 1}); len(out.Commands) != 0 {
		t.Fatalf("withdrawn during the create: %+v, want nothing sent before its reply", out)
	}
	out := tr.step(joined{Cmd: 2, Name: "me-1", Children: []string{"b-1", "me-1"}})
	if del, ok := only(out, opDeleteMember); !ok || del.Name != "me-1" {
		t.Fatalf("the create's reply: %+v, want me-1 deleted", out)
	}
	tr.Check("enter_withdrawn_during_its_create")
}

// The session ends while we are inside, with no call in progress: we are
// FAILED, and the next Leave says so and puts us outside.
func TestTranscriptSessionLostInside(t *testing.T) {
	tr := newTranscript(t, 2)
	tr.step(call{Op: opEnter, Req: 1})
	tr.step(probed{Cmd: 1, PathData: []byte("2"), Children: []string{"x-1"}})
	tr.step(joined{Cmd: 2, Name: "me-1", ReadyCreated: true})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	if r, ok := replied(tr.step(call{Op: opLeave, Req: 2}), 2); !ok || !errors.Is(r.Err, ErrSessionLost) {
		t.Fatalf("Leave = %+v, want ErrSessionLost", r)
	}
	// Before our node is made, the session's end, or the connection's,
	// fails Enter and puts us outside, not FAILED: we were no member.
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	tr.step(call{Op: opEnter, Req: 3})
	if r, ok := replied(tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess + 1}), 3); !ok || !errors.Is(r.Err, ErrSessionLost) {
		t.Fatalf("Enter = %+v, want ErrSessionLost", r)
	}
	tr.step(call{Op: opEnter, Req: 4})
	if r, ok := replied(tr.step(runtime.SessionChange{State: zk.StateClosed}), 4); !ok || !errors.Is(r.Err, ErrClosed) {
		t.Fatalf("Enter = %+v, want ErrClosed", r)
	}
	tr.Check("session_lost_inside")
}

// Close in each state: the call in progress fails with ErrClosed, our
// member node (if any) is deleted, and the machine stops once it is.
func TestTranscriptCloseInEveryState(t *testing.T) {
	var all strings.Builder
	for _, s := range []events.State{events.StateStart, events.StateOffer, events.StateDetermine, events.StateReady, events.StateFailed} {
		members := 2 // our arrival completes the count
		if s == events.StateDetermine {
			members = 3
		}
		tr := newTranscript(t, members)
		if s != events.StateStart {
			tr.step(call{Op: opEnter, Req: 1})
		}
		if s != events.StateStart && s != events.StateOffer {
			tr.step(probed{Cmd: 1, PathData: fmt.Appendf(nil, "%d", members), Children: []string{"x-1"}})
			tr.step(joined{Cmd: 2, Name: "me-1", ReadyCreated: members == 2, Children: []string{"me-1", "x-1"}})
		}
		if s == events.StateFailed {
			tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
		}
		if tr.m.State() != s {
			t.Fatalf("state %s, want %s", tr.m.State(), s)
		}
		if out := tr.step(runtime.Shutdown{Req: 9}); !out.Done {
			tr.step(memberDeleted{Cmd: 3, Name: "me-1"})
		}
		if tr.m.State() != events.StateStop {
			t.Fatalf("closed in %s: state %s", s, tr.m.State())
		}
		fmt.Fprintf(&all, "# closed in %s\n%s\n", s, tr)
	}
	golden.Check(t, "close_in_every_state", all.String())
}

// newBarrierTranscript drives a Barrier's machine as newTranscript does a
// member's.
func newBarrierTranscript(t *testing.T) (*golden.Transcript, func(in fmt.Stringer) runtime.Output[command]) {
	m := newBarrierMachine()
	tr := &golden.Transcript{T: t, State: m.State,
		Event: func(e events.Event) string { return fmt.Sprintf("%s state=%s", e.Type, e.State) }}
	track(m.fsm, "barrier")
	golden.Record(tr, "(start)", m.Start())
	t.Cleanup(func() {
		if err := m.Bug(); err != nil {
			t.Errorf("an illegal transition: %v", err)
		}
	})
	return tr, func(in fmt.Stringer) runtime.Output[command] {
		out := m.Step(in)
		golden.Record(tr, in.String(), out)
		return out
	}
}

// A Barrier's calls: Set and Remove are a request each, answered with its
// error; Wait is answered at once on a node not there, else when its
// watch sees the node deleted (a data change sets the watch again).
func TestTranscriptBarrierCalls(t *testing.T) {
	tr, step := newBarrierTranscript(t)
	step(call{Op: opSet, Req: 1})
	step(barrierReply{Cmd: 1})
	step(call{Op: opSet, Req: 2})
	step(barrierReply{Cmd: 2, Err: zk.ErrNoAuth})
	step(call{Op: opWait, Req: 3})
	step(barrierReply{Cmd: 3, Exists: true})
	step(barrierEvent{Cmd: 3, Type: zk.EventNodeDataChanged})
	step(barrierReply{Cmd: 4, Exists: true})
	step(call{Op: opRemove, Req: 4})
	step(barrierReply{Cmd: 5})
	if out := step(barrierEvent{Cmd: 4, Type: zk.EventNodeDeleted}); len(out.Replies) != 1 || out.Replies[0].Err != nil {
		t.Fatalf("Wait not answered: %+v", out.Replies)
	}
	step(call{Op: opWait, Req: 5})
	step(barrierReply{Cmd: 6})
	tr.Check("barrier_calls")
}

// A Wait's watch that fails with the connection, or ends with the
// session, is made again once the connection is back, on whatever
// session. A withdrawn Wait's replies are ignored.
func TestTranscriptBarrierWaitThroughFaults(t *testing.T) {
	tr, step := newBarrierTranscript(t)
	step(call{Op: opWait, Req: 1})
	step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	step(barrierReply{Cmd: 1, Err: zk.ErrConnectionLoss})
	step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	step(barrierReply{Cmd: 2, Exists: true})
	step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	step(barrierEvent{Cmd: 2, Type: zk.EventNotWatching})
	step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	step(call{Op: opWait, Req: 2})
	step(runtime.Cancel{Req: 2})
	step(barrierReply{Cmd: 4, Exists: true})
	step(barrierEvent{Cmd: 4, Type: zk.EventNodeDeleted})
	step(barrierReply{Cmd: 3, Exists: false})
	tr.Check("barrier_wait_through_faults")
}

// Close answers the calls in progress, waiting for a reply or for the
// connection, with ErrClosed, and stops the machine; so does the
// connection's close.
func TestTranscriptBarrierClose(t *testing.T) {
	tr, step := newBarrierTranscript(t)
	step(call{Op: opWait, Req: 1})
	step(barrierReply{Cmd: 1, Exists: true})
	step(call{Op: opSet, Req: 2})
	step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	step(call{Op: opWait, Req: 3})
	step(barrierReply{Cmd: 3, Err: zk.ErrConnectionLoss})
	if out := step(runtime.Shutdown{Req: 4}); len(out.Replies) != 4 || !out.Done {
		t.Fatalf("shutdown: %+v", out)
	}
	other, step := newBarrierTranscript(t)
	step(call{Op: opSet, Req: 1})
	step(barrierReply{Cmd: 1, Err: zk.ErrClosed})
	step(call{Op: opWait, Req: 2})
	step(runtime.SessionChange{State: zk.StateClosed})
	tr.Append("\n# the connection closed\n" + other.String())
	tr.Check("barrier_close")
}
