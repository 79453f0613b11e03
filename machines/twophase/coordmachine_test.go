package twophase

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

func newCoordTranscript(t *testing.T) *transcript {
	m, err := newCoordMachine(coordConfig{Root: "/app/2pc", VoteTimeout: 10 * time.Second, Retention: time.Minute, SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	return record(t, m, reached["coordinator"])
}

// proposed starts a coordinator (its sweep finds nothing) and proposes
// tx1 to a and b up to the collection of the votes: it returns the
// collection's commands.
func (tr *transcript) proposed() runtime.Output[command] {
	tr.step(swept{ref: ref{Cmd: 1}})
	out := tr.step(proposeCall{Req: 1, Tx: "tx1", Participants: []string{"a", "b"}})
	tr.step(done{What: "created", ref: ref{commands[create](out)[0].Cmd, "tx1"}})
	tr.wantState(events.StateDetermine)
	return tr.step(collectCall{Req: 2, Tx: "tx1"})
}

// Every vote comes (a's, then b's on the child watch): commit; our node
// is dropped and the transaction kept for its retention; past it, a
// participant still waits for its call, so it is kept once more, then
// deleted.
func TestTranscriptCoordinatorCommits(t *testing.T) {
	tr := newCoordTranscript(t)
	out := tr.proposed()
	wc, rd, wv := commands[watchCoord](out)[0], commands[readDecision](out)[0], commands[watchVotes](out)[0]
	tr.step(coordWatched{ref: ref{wc.Cmd, "tx1"}, Exists: true})
	tr.step(decisionRead{ref: ref{rd.Cmd, "tx1"}})
	tr.step(listed{What: "votes", ref: ref{wv.Cmd, "tx1"}, Kids: []string{"a"}})
	out = tr.step(fired{What: "votes", ref: ref{wv.Cmd, "tx1"}, Type: zk.EventNodeChildrenChanged})
	out = tr.step(listed{What: "votes", ref: ref{commands[watchVotes](out)[0].Cmd, "tx1"}, Kids: []string{"a", "b"}})
	if len(out.Replies) != 1 || out.Replies[0].Value != (Outcome{Committed: true}) {
		t.Fatalf("collected %+v, want commit", out.Replies)
	}
	out = tr.step(decideCall{Req: 3, Tx: "tx1"})
	md := commands[makeDecision](out)[0]
	out = tr.step(decided{ref: ref{md.Cmd, "tx1"}, Outcome: md.Want})
	if len(out.Events) != 1 || out.Events[0].Type != events.Committed {
		t.Fatalf("events %v, want COMMITTED", out.Events)
	}
	tr.wantState(events.StateStart)
	tr.step(coordDropped{ref: ref{Cmd: commands[dropCoord](out)[0].Cmd}})
	out = tr.step(woke{ref: ref{commands[sleep](out)[0].Cmd, "tx1"}})
	out = tr.step(expired{ref: ref{commands[expire](out)[0].Cmd, "tx1"}, Waiting: true})
	out = tr.step(woke{ref: ref{commands[sleep](out)[0].Cmd, "tx1"}})
	tr.step(expired{ref: ref{commands[expire](out)[0].Cmd, "tx1"}})
	tr.Check("coordinator_commits")
}

// The coordinator's session ends while it collects: its watches end, our
// node is looked at alone first; it is there (a new session would have
// lost it), so the others are watched again. Then a read fails and is
// made again after a backoff, and the vote timeout aborts.
func TestTranscriptCoordinatorWatchesEndThenTimesOut(t *testing.T) {
	tr := newCoordTranscript(t)
	out := tr.proposed()
	timeout := commands[sleep](out)[0]
	wc, rd, wv := commands[watchCoord](out)[0], commands[readDecision](out)[0], commands[watchVotes](out)[0]
	tr.step(coordWatched{ref: ref{wc.Cmd, "tx1"}, Exists: true})
	tr.step(decisionRead{ref: ref{rd.Cmd, "tx1"}})
	tr.step(listed{What: "votes", ref: ref{wv.Cmd, "tx1"}})
	out = tr.step(fired{What: "votes", ref: ref{wv.Cmd, "tx1"}, Type: zk.EventNotWatching})
	if c := out.Commands; len(c) != 1 || len(commands[watchCoord](out)) != 1 {
		t.Fatalf("commands %v, want our node's watch alone", c)
	}
	tr.step(fired{What: "decision", ref: ref{rd.Cmd, "tx1"}, Type: zk.EventNotWatching}) // stale
	out = tr.step(coordWatched{ref: ref{commands[watchCoord](out)[0].Cmd, "tx1"}, Exists: true})
	out = tr.step(listed{What: "votes", ref: ref{commands[watchVotes](out)[0].Cmd, "tx1"}, Err: zk.ErrConnectionLoss})
	out = tr.step(woke{ref: ref{commands[sleep](out)[0].Cmd, "tx1"}})
	if len(out.Commands) != 3 {
		t.Fatalf("commands %v, want every watch again", out.Commands)
	}
	out = tr.step(woke{ref: ref{timeout.Cmd, "tx1"}})
	if len(out.Replies) != 1 || out.Replies[0].Value != (Outcome{Reason: ReasonVoteTimeout}) {
		t.Fatalf("collected %+v, want a vote timeout", out.Replies)
	}
	tr.Check("coordinator_watches_end_then_times_out")
}

// A decision read while collecting (a participant's no, or its abort on
// our node's end) is the outcome: nothing more is made.
func TestTranscriptCoordinatorReadsTheDecision(t *testing.T) {
	tr := newCoordTranscript(t)
	out := tr.proposed()
	abort := Outcome{Reason: "b: no"}
	tr.step(decisionRead{ref: ref{commands[readDecision](out)[0].Cmd, "tx1"}, Exists: true, Outcome: abort})
	out = tr.step(decideCall{Req: 3, Tx: "tx1"})
	if len(commands[makeDecision](out)) != 0 || len(out.Replies) != 1 || out.Replies[0].Value != abort {
		t.Fatalf("decided %+v %v, want the decision read", out.Replies, out.Commands)
	}
	tr.Check("coordinator_reads_the_decision")
}

// A Propose whose caller gave up while its create was in flight: once
// created, it is decided abort, and the abandon call gets the outcome.
// Another Propose of the same id meanwhile is refused.
func TestTranscriptCoordinatorAbandoned(t *testing.T) {
	tr := newCoordTranscript(t)
	tr.step(swept{ref: ref{Cmd: 1}})
	out := tr.step(proposeCall{Req: 1, Tx: "tx1", Participants: []string{"a"}})
	if out := tr.step(proposeCall{Req: 2, Tx: "tx1", Participants: []string{"a"}}); !errors.Is(out.Replies[0].Err, ErrTxExists) {
		t.Fatalf("the same id again: %+v", out.Replies)
	}
	tr.step(abandonCall{Req: 3, Tx: "tx1"})
	out = tr.step(done{What: "created", ref: ref{commands[create](out)[0].Cmd, "tx1"}})
	md := commands[makeDecision](out)[0]
	if md.Want != (Outcome{Reason: ReasonCancelled}) {
		t.Fatalf("decide %v", md)
	}
	tr.step(decided{ref: ref{md.Cmd, "tx1"}, Outcome: md.Want})
	tr.Check("coordinator_abandoned")
}

// A create that failed, not knowing whether it was made (a reply lost):
// the Propose gets the error, and the transaction is decided abort by
// the janitor (here its abort fails once, then finds it never made).
// A transaction the sweep found is deleted once its retention is over.
func TestTranscriptCoordinatorJanitor(t *testing.T) {
	tr := newCoordTranscript(t)
	out := tr.step(swept{ref: ref{Cmd: 1}, Due: []dueTx{{Tx: "old", Delay: time.Second}}})
	old := commands[sleep](out)[0]
	out = tr.step(proposeCall{Req: 1, Tx: "tx1", Participants: []string{"a"}})
	out = tr.step(done{What: "created", ref: ref{commands[create](out)[0].Cmd, "tx1"}, Err: errors.New("twophase: no auth")})
	md := commands[makeDecision](out)[0]
	out = tr.step(decided{ref: ref{md.Cmd, "tx1"}, Err: zk.ErrConnectionLoss})
	out = tr.step(woke{ref: ref{commands[sleep](out)[0].Cmd, "tx1"}})
	tr.step(decided{ref: ref{commands[makeDecision](out)[0].Cmd, "tx1"}, Gone: true})
	out = tr.step(woke{ref: ref{old.Cmd, "old"}})
	if e := commands[expire](out); len(e) != 1 || e[0].Participants != nil {
		t.Fatalf("expire %v, want old's, its participants read", e)
	}
	tr.step(expired{ref: ref{commands[expire](out)[0].Cmd, "old"}})
	tr.Check("coordinator_janitor")
}

// Close while a Propose collects: it gets ErrClosed, its transaction is
// decided abort and our node of it dropped before the machine is done.
// A Propose after that is refused.
func TestTranscriptCoordinatorClose(t *testing.T) {
	tr := newCoordTranscript(t)
	tr.proposed()
	out := tr.step(runtime.Shutdown{Req: 3})
	if len(out.Replies) != 1 || out.Replies[0].Req != 2 || !errors.Is(out.Replies[0].Err, ErrClosed) {
		t.Fatalf("replies %+v, want the collect's ErrClosed", out.Replies)
	}
	tr.step(proposeCall{Req: 4, Tx: "tx2", Participants: []string{"a"}})
	md := commands[makeDecision](out)[0]
	out = tr.step(decided{ref: ref{md.Cmd, "tx1"}, Outcome: md.Want})
	out = tr.step(coordDropped{ref: ref{Cmd: commands[dropCoord](out)[0].Cmd}})
	if !out.Done {
		t.Fatal("not done")
	}
	tr.wantState(events.StateStop)
	tr.Check("coordinator_close")
}

// Close while the connection is down: the abort cannot be made in time,
// and our node of the transaction is handed over to the connection's
// janitor (its deletion aborts the transaction at its participants).
func TestTranscriptCoordinatorHandOver(t *testing.T) {
	tr := newCoordTranscript(t)
	tr.proposed()
	tr.step(runtime.Shutdown{Req: 3})
	out := tr.step(runtime.Handover{Req: 4})
	if l, _ := out.Replies[0].Value.(runtime.Leftovers); l.Session != sess || len(l.Nodes) != 1 || l.Nodes[0] != "/app/2pc/tx/tx1/coordinator" {
		t.Fatalf("handed over %+v", out.Replies)
	}
	tr.Check("coordinator_hand_over")
}

// Close while a Propose's create is in flight, which then fails: nothing
// is left to abort, and the machine is done.
func TestTranscriptCoordinatorCloseWhileCreating(t *testing.T) {
	tr := newCoordTranscript(t)
	tr.step(swept{ref: ref{Cmd: 1}})
	out := tr.step(proposeCall{Req: 1, Tx: "tx1", Participants: []string{"a"}})
	tr.step(runtime.Shutdown{Req: 2})
	out = tr.step(done{What: "created", ref: ref{commands[create](out)[0].Cmd, "tx1"}, Err: zk.ErrConnectionLoss})
	if !out.Done || len(out.Commands) != 0 {
		t.Fatalf("done %t, commands %v", out.Done, out.Commands)
	}
	tr.Check("coordinator_close_while_creating")
}
