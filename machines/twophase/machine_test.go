package twophase

import (
	"errors"
	"fmt"
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
	m    runtime.Machine[input, command]
	seen map[[2]events.State]bool // the transitions made (see reached)
}

// reached collects, per machine, the transitions (state before and after
// a step) of every transcript: see TestEveryTransitionInATranscript.
var reached = map[string]map[[2]events.State]bool{"participant": {}, "coordinator": {}}

func newTranscript(t *testing.T) *transcript {
	m, err := newMachine(config{Root: "/app/2pc", ID: "me", SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	return record(t, m, reached["participant"])
}

func record(t *testing.T, m runtime.Machine[input, command], seen map[[2]events.State]bool) *transcript {
	tr := &transcript{m: m, seen: seen, Transcript: &golden.Transcript{T: t, State: m.State,
		Event: func(e events.Event) string {
			return fmt.Sprintf("%s phase=%s state=%s node=%s", e.Type, e.Phase, e.State, e.Node)
		},
		Value: func(v any) string {
			switch v := v.(type) {
			case runtime.Leftovers:
				return fmt.Sprintf("leftovers=%v", v.Nodes)
			case Outcome:
				return "outcome=" + outcomeString(v)
			}
			return ""
		},
	}}
	golden.Record(tr.Transcript, "(start)", m.Start())
	return tr
}

func (tr *transcript) step(in input) runtime.Output[command] {
	before := tr.m.State()
	out := tr.m.Step(in)
	tr.seen[[2]events.State{before, tr.m.State()}] = true
	if err := tr.m.(interface{ Bug() error }).Bug(); err != nil {
		tr.T.Fatalf("after %s: %v", in, err)
	}
	golden.Record(tr.Transcript, in.String(), out)
	return out
}

func (tr *transcript) wantState(s events.State) {
	tr.T.Helper()
	if got := tr.m.State(); got != s {
		tr.T.Fatalf("state %s, want %s", got, s)
	}
}

func commands[C command](out runtime.Output[command]) []C {
	var cs []C
	for _, c := range out.Commands {
		if c, ok := c.(C); ok {
			cs = append(cs, c)
		}
	}
	return cs
}

func eventTypes(out runtime.Output[command]) []events.Type {
	var ts []events.Type
	for _, e := range out.Events {
		ts = append(ts, e.Type)
	}
	return ts
}

// serving starts serving with tx1 in the inbox, registered: it returns
// the load command's id.
func (tr *transcript) serving() uint64 {
	tr.step(serveCall{Req: 1})
	out := tr.step(listed{What: "inbox", ref: ref{Cmd: 1}, Kids: []string{"tx1"}})
	tr.step(done{What: "registered", ref: ref{Cmd: 2}})
	tr.wantState(events.StateDetermine)
	return commands[load](out)[0].Cmd
}

// tx1 is voted yes and committed: Prepare, the vote, a watch on the
// coordinator while the decision is awaited, Commit, the inbox entry
// deleted; then serving stops: our registration is deleted before the
// wait for the stop is answered.
func TestTranscriptVotedYesAndCommitted(t *testing.T) {
	tr := newTranscript(t)
	tr.wantState(events.StateStart)
	ld := tr.serving()
	out := tr.step(loaded{ref: ref{ld, "tx1"}, Payload: []byte("pay"), DecWatched: true})
	prep := commands[prepare](out)[0]
	out = tr.step(prepared{ref: ref{prep.Cmd, "tx1"}, Yes: true})
	v := commands[vote](out)[0]
	out = tr.step(voteWritten{ref: ref{v.Cmd, "tx1"}, Yes: true})
	wc := commands[watchCoord](out)[0]
	tr.step(coordWatched{ref: ref{wc.Cmd, "tx1"}, Exists: true})
	out = tr.step(fired{What: "decision", ref: ref{ld, "tx1"}, Type: zk.EventNodeCreated})
	rd := commands[readDecision](out)[0]
	out = tr.step(decisionRead{ref: ref{rd.Cmd, "tx1"}, Exists: true, Outcome: Outcome{Committed: true}})
	h := commands[handle](out)[0]
	if !h.Outcome.Committed || string(h.Payload) != "pay" {
		t.Fatalf("handle %v", h)
	}
	out = tr.step(handled{ref: ref{h.Cmd, "tx1"}})
	if ts := eventTypes(out); len(ts) != 1 || ts[0] != events.Committed {
		t.Fatalf("events %v, want COMMITTED", ts)
	}
	del := commands[deleteEntry](out)[0]
	tr.step(done{What: "entry deleted", ref: ref{del.Cmd, "tx1"}})
	tr.wantState(events.StateReady)
	out = tr.step(runtime.Cancel{Req: 1})
	dr := commands[deregister](out)[0]
	tr.step(awaitStopped{Req: 2})
	out = tr.step(done{What: "deregistered", ref: ref{Cmd: dr.Cmd}})
	if len(out.Replies) != 1 || out.Replies[0].Req != 2 {
		t.Fatalf("the stop is not answered: %+v", out.Replies)
	}
	tr.wantState(events.StateStart)
	tr.Check("voted_yes_and_committed")
}

// Our handler votes no: the vote and the abort it decides, for our
// reason, are made in one multi, without waiting for the coordinator.
func TestTranscriptNoVoteDecidesAbort(t *testing.T) {
	tr := newTranscript(t)
	v := tr.votedNo()
	if v.Yes || v.Reason != "out of stock" || v.Abort != (Outcome{Reason: "me: out of stock"}) {
		t.Fatalf("vote %v", v)
	}
	out := tr.step(voteWritten{ref: ref{v.Cmd, "tx1"}, Reason: "out of stock", Decided: true, Outcome: v.Abort})
	if d := commands[makeDecision](out); len(d) != 0 {
		t.Fatalf("decided again: %v", d)
	}
	h := commands[handle](out)[0]
	if h.Outcome != v.Abort {
		t.Fatalf("handle %v", h)
	}
	out = tr.step(handled{ref: ref{h.Cmd, "tx1"}})
	if ts := eventTypes(out); len(ts) != 1 || ts[0] != events.Aborted || !errors.Is(out.Events[0].Err, ErrAborted) {
		t.Fatalf("events %v, want ABORTED", out.Events)
	}
	tr.step(done{What: "entry deleted", ref: ref{commands[deleteEntry](out)[0].Cmd, "tx1"}})
	tr.wantState(events.StateReady)
	tr.Check("no_vote_decides_abort")
}

// Our no vote's multi found a decision made first (or our vote made, its
// reply lost), and the vote was made alone: we decide abort, or read the
// decision there, as a separate step.
func TestTranscriptNoVoteAfterADecision(t *testing.T) {
	tr := newTranscript(t)
	v := tr.votedNo()
	out := tr.step(voteWritten{ref: ref{v.Cmd, "tx1"}, Reason: "out of stock"})
	d := commands[makeDecision](out)
	if len(d) != 1 || d[0].Want != (Outcome{Reason: "me: out of stock"}) {
		t.Fatalf("decide %v", d)
	}
	first := Outcome{Reason: ReasonVoteTimeout}
	out = tr.step(decided{ref: ref{d[0].Cmd, "tx1"}, Outcome: first})
	h := commands[handle](out)[0]
	if h.Outcome != first {
		t.Fatalf("handle %v, want the decision made first", h)
	}
	out = tr.step(handled{ref: ref{h.Cmd, "tx1"}})
	tr.step(done{What: "entry deleted", ref: ref{commands[deleteEntry](out)[0].Cmd, "tx1"}})
	tr.wantState(events.StateReady)
	tr.Check("no_vote_after_a_decision")
}

// votedNo serves, loads tx1 and has our handler vote no on it ("out of
// stock"): it returns the vote command.
func (tr *transcript) votedNo() vote {
	ld := tr.serving()
	out := tr.step(loaded{ref: ref{ld, "tx1"}, DecWatched: true})
	prep := commands[prepare](out)[0]
	out = tr.step(prepared{ref: ref{prep.Cmd, "tx1"}, Reason: "out of stock"})
	return commands[vote](out)[0]
}

// We voted yes; the coordinator's node goes before a decision (its
// session ended): we decide abort for that reason.
func TestTranscriptCoordinatorGone(t *testing.T) {
	tr := newTranscript(t)
	ld := tr.serving()
	out := tr.step(loaded{ref: ref{ld, "tx1"}, DecWatched: true})
	out = tr.step(prepared{ref: ref{commands[prepare](out)[0].Cmd, "tx1"}, Yes: true})
	out = tr.step(voteWritten{ref: ref{commands[vote](out)[0].Cmd, "tx1"}, Yes: true})
	wc := commands[watchCoord](out)[0]
	tr.step(coordWatched{ref: ref{wc.Cmd, "tx1"}, Exists: true})
	out = tr.step(fired{What: "coordinator", ref: ref{wc.Cmd, "tx1"}, Type: zk.EventNodeDeleted})
	wc = commands[watchCoord](out)[0]
	out = tr.step(coordWatched{ref: ref{wc.Cmd, "tx1"}, Exists: false})
	d := commands[makeDecision](out)
	if len(d) != 1 || d[0].Want != (Outcome{Reason: ReasonCoordinatorGone}) {
		t.Fatalf("decide %v", d)
	}
	out = tr.step(decided{ref: ref{d[0].Cmd, "tx1"}, Outcome: d[0].Want})
	out = tr.step(handled{ref: ref{commands[handle](out)[0].Cmd, "tx1"}})
	tr.step(done{What: "entry deleted", ref: ref{commands[deleteEntry](out)[0].Cmd, "tx1"}})
	tr.Check("coordinator_gone")
}

// A restarted participant finds its vote written: it does not prepare
// again, and waits for the decision (the watch the load left fires).
func TestTranscriptRestartFindsVote(t *testing.T) {
	tr := newTranscript(t)
	ld := tr.serving()
	out := tr.step(loaded{ref: ref{ld, "tx1"}, Payload: []byte("one"), DecWatched: true, Voted: true, Yes: true})
	if len(commands[prepare](out)) != 0 {
		t.Fatal("prepared again")
	}
	wc := commands[watchCoord](out)[0]
	tr.step(coordWatched{ref: ref{wc.Cmd, "tx1"}, Exists: true})
	out = tr.step(fired{What: "decision", ref: ref{ld, "tx1"}, Type: zk.EventNodeCreated})
	out = tr.step(decisionRead{ref: ref{commands[readDecision](out)[0].Cmd, "tx1"}, Exists: true, Outcome: Outcome{Committed: true}})
	out = tr.step(handled{ref: ref{commands[handle](out)[0].Cmd, "tx1"}})
	tr.step(done{What: "entry deleted", ref: ref{commands[deleteEntry](out)[0].Cmd, "tx1"}})
	tr.Check("restart_finds_vote")
}

// The connection is lost while our vote is being created: the error
// schedules a resync, the reconnection makes it at once, and the create,
// made again, finds our node (the first create went through) and reads
// it.
func TestTranscriptConnectionLostDuringVote(t *testing.T) {
	tr := newTranscript(t)
	ld := tr.serving()
	out := tr.step(loaded{ref: ref{ld, "tx1"}, DecWatched: true})
	out = tr.step(prepared{ref: ref{commands[prepare](out)[0].Cmd, "tx1"}, Yes: true})
	v := commands[vote](out)[0]
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	out = tr.step(voteWritten{ref: ref{v.Cmd, "tx1"}, Yes: true, Err: zk.ErrConnectionLoss})
	if len(commands[sleep](out)) != 1 || len(commands[vote](out)) != 0 {
		t.Fatalf("commands %v, want a sleep", out.Commands)
	}
	sl := commands[sleep](out)[0]
	out = tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	v2 := commands[vote](out)
	if len(v2) != 1 {
		t.Fatalf("commands %v, want the vote again", out.Commands)
	}
	out = tr.step(voteWritten{ref: ref{v2[0].Cmd, "tx1"}, Yes: true, Found: true})
	if ts := eventTypes(out); len(ts) != 1 || ts[0] != events.Voted {
		t.Fatalf("events %v, want VOTED", ts)
	}
	// The resync was made already: the timer's wake is ignored.
	if out := tr.step(woke{ref: ref{Cmd: sl.Cmd}}); len(out.Commands) != 0 {
		t.Fatalf("commands %v after a stale wake", out.Commands)
	}
	tr.Check("connection_lost_during_vote")
}

// The session ends while we serve, with a Prepare in flight: FAILED until
// registered again on the new session; then Close waits for the Prepare
// (cut short) before the registration goes and the machine stops.
func TestTranscriptSessionLostAndClose(t *testing.T) {
	tr := newTranscript(t)
	ld := tr.serving()
	out := tr.step(loaded{ref: ref{ld, "tx1"}, DecWatched: true})
	prep := commands[prepare](out)[0]
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	tr.wantState(events.StateFailed)
	out = tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	li := commands[listInbox](out)[0]
	out = tr.step(listed{What: "inbox", ref: ref{Cmd: li.Cmd}, Kids: []string{"tx1"}})
	tr.wantState(events.StateFailed)
	tr.step(done{What: "registered", ref: ref{Cmd: commands[register](out)[0].Cmd}})
	tr.wantState(events.StateDetermine)
	out = tr.step(runtime.Shutdown{Req: 2})
	if len(out.Replies) != 1 || out.Replies[0].Req != 1 || !errors.Is(out.Replies[0].Err, ErrClosed) {
		t.Fatalf("Serve not answered ErrClosed: %+v", out.Replies)
	}
	dr := commands[deregister](out)[0]
	tr.step(done{What: "deregistered", ref: ref{Cmd: dr.Cmd}})
	out = tr.step(prepared{ref: ref{prep.Cmd, "tx1"}, Cancelled: true})
	if !out.Done || len(out.Events) != 0 {
		t.Fatalf("not done, or events %v", out.Events)
	}
	tr.wantState(events.StateStop)
	tr.Check("session_lost_and_close")
}

// A listing of the inbox made before our delete of tx1's entry still
// shows tx1; the shell answers it before the delete (GoInOrder), while tx1
// is still ours: it is not taken for a new transaction (its handler is
// not called twice). Once the delete is through, a new entry, tx2, is
// loaded.
func TestTranscriptListingBeforeOurDelete(t *testing.T) {
	tr := newTranscript(t)
	ld := tr.serving()
	out := tr.step(loaded{ref: ref{ld, "tx1"}, Decided: true, Outcome: Outcome{Committed: true}})
	hd := commands[handle](out)[0]
	out = tr.step(fired{What: "inbox", ref: ref{Cmd: 1}, Type: zk.EventNodeChildrenChanged})
	li := commands[listInbox](out)[0]
	out = tr.step(handled{ref: ref{hd.Cmd, "tx1"}})
	del := commands[deleteEntry](out)[0]
	out = tr.step(listed{What: "inbox", ref: ref{Cmd: li.Cmd}, Kids: []string{"tx1"}})
	if l := commands[load](out); len(l) != 0 {
		t.Fatalf("loads %v, want none", l)
	}
	tr.step(done{What: "entry deleted", ref: ref{del.Cmd, "tx1"}})
	out = tr.step(fired{What: "inbox", ref: ref{Cmd: li.Cmd}, Type: zk.EventNodeChildrenChanged})
	li = commands[listInbox](out)[0]
	out = tr.step(listed{What: "inbox", ref: ref{Cmd: li.Cmd}, Kids: []string{"tx2"}})
	if l := commands[load](out); len(l) != 1 || l[0].Tx != "tx2" {
		t.Fatalf("loads %v, want tx2", l)
	}
	tr.Check("listing_before_our_delete")
}

// Close while the registration is in flight: the deregistration waits for
// its reply (the create may land after a deregistration that looked
// first, leaving our node behind: found by TestServeAndClose on the
// simulator), then goes, and the shutdown is answered once it is done.
func TestTranscriptCloseWhileRegistering(t *testing.T) {
	tr := newTranscript(t)
	tr.step(serveCall{Req: 1})
	out := tr.step(listed{What: "inbox", ref: ref{Cmd: 1}})
	reg := commands[register](out)[0]
	out = tr.step(runtime.Shutdown{Req: 2})
	if len(commands[deregister](out)) != 0 {
		t.Fatal("deregistered while the registration is in flight")
	}
	out = tr.step(done{What: "registered", ref: ref{Cmd: reg.Cmd}})
	dr := commands[deregister](out)
	if len(dr) != 1 {
		t.Fatalf("no deregistration after the registration's reply: %v", out.Commands)
	}
	out = tr.step(done{What: "deregistered", ref: ref{Cmd: dr[0].Cmd}})
	if !out.Done {
		t.Fatal("shutdown not done after the deregistration")
	}
	tr.wantState(events.StateStop)
	tr.Check("close_while_registering")
}

// Close while the connection is down: the deregistration fails, is made
// again when the connection is back (still down, it fails again), and
// the close's timeout hands the registration node over for the
// connection's janitor to delete.
func TestTranscriptCloseWhileDisconnected(t *testing.T) {
	tr := newTranscript(t)
	tr.step(serveCall{Req: 1})
	out := tr.step(listed{What: "inbox", ref: ref{Cmd: 1}})
	tr.step(done{What: "registered", ref: ref{Cmd: commands[register](out)[0].Cmd}})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	out = tr.step(runtime.Shutdown{Req: 2})
	out = tr.step(done{What: "deregistered", ref: ref{Cmd: commands[deregister](out)[0].Cmd}, Err: zk.ErrConnectionLoss})
	if out.Done {
		t.Fatal("done with the registration node left")
	}
	out = tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	tr.step(done{What: "deregistered", ref: ref{Cmd: commands[deregister](out)[0].Cmd}, Err: zk.ErrConnectionLoss})
	out = tr.step(runtime.Handover{Req: 3})
	if l, _ := out.Replies[0].Value.(runtime.Leftovers); l.Session != sess || len(l.Nodes) != 1 || l.Nodes[0] != "/app/2pc/participants/me" {
		t.Fatalf("handed over %+v", out.Replies)
	}
	tr.Check("close_while_disconnected")
}

// The session ends while we serve idle: FAILED until registered again on
// the new session; it ends again, and Serve's ctx ends while FAILED.
func TestTranscriptSessionLostWhileIdle(t *testing.T) {
	tr := newTranscript(t)
	tr.step(serveCall{Req: 1})
	out := tr.step(listed{What: "inbox", ref: ref{Cmd: 1}})
	tr.step(done{What: "registered", ref: ref{Cmd: commands[register](out)[0].Cmd}})
	tr.wantState(events.StateReady)
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess})
	tr.wantState(events.StateFailed)
	out = tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: sess + 1})
	out = tr.step(listed{What: "inbox", ref: ref{Cmd: commands[listInbox](out)[0].Cmd}})
	tr.step(done{What: "registered", ref: ref{Cmd: commands[register](out)[0].Cmd}})
	tr.wantState(events.StateReady)
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: sess + 1})
	out = tr.step(runtime.Cancel{Req: 1})
	tr.wantState(events.StateStart)
	tr.step(done{What: "deregistered", ref: ref{Cmd: commands[deregister](out)[0].Cmd}})
	tr.Check("session_lost_while_idle")
}
