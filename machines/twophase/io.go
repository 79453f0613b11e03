package twophase

import (
	"fmt"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// input is everything that can happen to a machine: a call, a reply to
// one of its commands, a watch firing, a session change (the types of
// this file that are no command). Transcripts name each by its String.
type input interface{ String() string }

// serveCall starts serving; it is answered only when serving ends by
// Close (ErrClosed).
type serveCall struct{ Req uint64 }

// awaitStopped is answered once serving has stopped: no handler call in
// flight and our registration node deleted.
type awaitStopped struct{ Req uint64 }

// listed is the reply to listInbox (What: "inbox") and to watchVotes
// ("votes"): the children's names (a child watch is left).
type listed struct {
	What string
	ref
	Kids []string
	Err  error
}

// fired: the watch command Cmd left fired. What it watched (What: the
// inbox, our registration, a decision, a coordinator node, the votes) is
// for transcripts: the machines know a watch by its command.
type fired struct {
	What string
	ref
	Type zk.EventType
}

// done is the reply to a command that answers with its error alone:
// What is "registered" (register: our registration node exists, a watch
// is left on it), "entry deleted" (deleteEntry), "deregistered"
// (deregister: Err is a connection loss or a timeout, any other error
// leaves nothing to do) or "created" (create: the transaction's nodes
// are made).
type done struct {
	What string
	ref
	Err error
}

// loaded is the reply to load: the transaction (Gone: deleted; Bad: not
// ours to read), its decision (a watch is left when it is not made:
// DecWatched) and our vote.
type loaded struct {
	ref
	Gone       bool
	Bad        bool
	Payload    []byte
	Decided    bool
	DecGone    bool // the decision existed and was deleted (retention)
	Outcome    Outcome
	DecWatched bool
	Voted      bool
	Yes        bool
	Reason     string
	Err        error
}

// decisionRead is the reply to readDecision: Exists with its Outcome, or
// Gone (deleted after its retention), or neither (a watch is left).
type decisionRead struct {
	ref
	Exists  bool
	Gone    bool
	Outcome Outcome
	Err     error
}

// coordWatched is the reply to watchCoord: whether the coordinator node
// exists (then a watch is left on it).
type coordWatched struct {
	ref
	Exists bool
	Err    error
}

// prepared is the reply to prepare: the handler's vote. Cancelled when
// Serve's ctx ended during the call: nothing is voted.
type prepared struct {
	ref
	Yes       bool
	Reason    string
	Cancelled bool
}

// voteWritten is the reply to vote: our vote node exists with Yes and
// Reason (Found: it existed already, ours after a lost reply), or the
// transaction is Gone. Decided: our no vote and its abort decision were
// made together, and Outcome is that decision.
type voteWritten struct {
	ref
	Yes     bool
	Reason  string
	Found   bool
	Gone    bool
	Decided bool
	Outcome Outcome
	Err     error
}

// decided is the reply to decide: the decision, or the transaction is
// Gone.
type decided struct {
	ref
	Outcome Outcome
	Gone    bool
	Err     error
}

// handled is the reply to handle: the handler's Commit or Abort returned
// (Err), or failed after the end of Serve's ctx (Cancelled: it is called
// again). One that returned nil is handled, whenever it returned: taken
// for cut short, it was called again at once by a step that came before
// the end of serving (TestOtelPropose's third commit span, seen in CI).
type handled struct {
	ref
	Err       error
	Cancelled bool
}

// woke is the reply to sleep.
type woke struct {
	ref
}

func (i serveCall) String() string    { return fmt.Sprintf("serve req=%d", i.Req) }
func (i awaitStopped) String() string { return fmt.Sprintf("await stopped req=%d", i.Req) }
func (i listed) String() string {
	return fmt.Sprintf("%s listed cmd=%d%s kids=%v err=%v", i.What, i.Cmd, opt(i.Tx), i.Kids, i.Err)
}
func (i fired) String() string {
	return fmt.Sprintf("%s event cmd=%d%s %s", i.What, i.Cmd, opt(i.Tx), i.Type)
}
func (i done) String() string {
	return fmt.Sprintf("%s cmd=%d%s err=%v", i.What, i.Cmd, opt(i.Tx), i.Err)
}
func (i loaded) String() string {
	return fmt.Sprintf("loaded cmd=%d %s gone=%t bad=%t payload=%q decided=%t dec_gone=%t outcome=%s dec_watched=%t voted=%t yes=%t reason=%q err=%v",
		i.Cmd, i.Tx, i.Gone, i.Bad, i.Payload, i.Decided, i.DecGone, outcomeString(i.Outcome), i.DecWatched, i.Voted, i.Yes, i.Reason, i.Err)
}
func (i decisionRead) String() string {
	return fmt.Sprintf("decision read cmd=%d %s exists=%t gone=%t outcome=%s err=%v", i.Cmd, i.Tx, i.Exists, i.Gone, outcomeString(i.Outcome), i.Err)
}
func (i coordWatched) String() string {
	return fmt.Sprintf("coordinator watched cmd=%d %s exists=%t err=%v", i.Cmd, i.Tx, i.Exists, i.Err)
}
func (i prepared) String() string {
	return fmt.Sprintf("prepared cmd=%d %s yes=%t reason=%q cancelled=%t", i.Cmd, i.Tx, i.Yes, i.Reason, i.Cancelled)
}
func (i voteWritten) String() string {
	s := fmt.Sprintf("vote written cmd=%d %s yes=%t reason=%q found=%t gone=%t err=%v", i.Cmd, i.Tx, i.Yes, i.Reason, i.Found, i.Gone, i.Err)
	if i.Decided {
		s += " decided=" + outcomeString(i.Outcome)
	}
	return s
}
func (i decided) String() string {
	return fmt.Sprintf("decided cmd=%d %s outcome=%s gone=%t err=%v", i.Cmd, i.Tx, outcomeString(i.Outcome), i.Gone, i.Err)
}
func (i handled) String() string {
	return fmt.Sprintf("handled cmd=%d %s err=%v cancelled=%t", i.Cmd, i.Tx, i.Err, i.Cancelled)
}
func (i woke) String() string { return strings.TrimSpace(fmt.Sprintf("woke cmd=%d %s", i.Cmd, i.Tx)) }

// opt is s after a space, or nothing.
func opt(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

func outcomeString(o Outcome) string {
	if o.Committed {
		return "commit"
	}
	if o.Reason == "" {
		return "none"
	}
	return fmt.Sprintf("abort(%q)", o.Reason)
}

// ref is what a command and the inputs that answer it share: the
// command's id and, when it is about one, its transaction.
type ref struct {
	Cmd uint64
	Tx  string
}

// ID is the command's id.
func (r ref) ID() uint64 { return r.Cmd }

// command is a request the machine asks its shell to make.
type command interface {
	ID() uint64
	String() string
}

// listInbox lists our inbox, leaving a child watch (the inbox is created
// when missing).
type listInbox struct{ ref }

// register creates our ephemeral registration node, or finds the one an
// old session of ours still has, and leaves a watch on it.
type register struct{ ref }

// load reads transaction Tx, its decision (leaving a watch when it is not
// made) and our vote, at once.
type load struct {
	ref
}

// readDecision reads Tx's decision, leaving a watch when it is not made.
// Made: a watch just said it was created, so it is read alone (one round
// trip, and no watch left on a node that changes only when deleted).
type readDecision struct {
	ref
	Made bool
}

// watchCoord reads whether Tx's coordinator node exists, leaving a watch.
type watchCoord struct {
	ref
}

// prepare calls the handler's Prepare, off the actor.
type prepare struct {
	ref
	Payload []byte
}

// vote creates our vote node; a no vote (Yes false) creates the decision
// Abort in the same multi, so that a no vote is never there without an
// abort decision (the coordinator counts votes without reading them).
type vote struct {
	ref
	Yes    bool
	Reason string
	Abort  Outcome
}

// makeDecision creates Tx's decision with Want, or reads the one made first.
type makeDecision struct {
	ref
	Want Outcome
}

// handle calls the handler's Commit or Abort, off the actor.
type handle struct {
	ref
	Payload []byte
	Outcome Outcome
}

// deleteEntry deletes Tx's entry from our inbox: we are done with it.
type deleteEntry struct {
	ref
}

// deregister deletes our registration node, if our session owns it.
type deregister struct{ ref }

// sleep waits Delay: the participant's before a resync after an error of
// the server, the coordinator's for Tx (its vote timeout, its retention,
// a retry).
type sleep struct {
	ref
	Delay time.Duration
}

func (c listInbox) String() string { return fmt.Sprintf("list inbox cmd=%d", c.Cmd) }
func (c register) String() string  { return fmt.Sprintf("register cmd=%d", c.Cmd) }
func (c load) String() string      { return fmt.Sprintf("load cmd=%d %s", c.Cmd, c.Tx) }
func (c readDecision) String() string {
	if c.Made {
		return fmt.Sprintf("read decision cmd=%d %s (made)", c.Cmd, c.Tx)
	}
	return fmt.Sprintf("read decision cmd=%d %s", c.Cmd, c.Tx)
}
func (c watchCoord) String() string { return fmt.Sprintf("watch coordinator cmd=%d %s", c.Cmd, c.Tx) }
func (c prepare) String() string {
	return fmt.Sprintf("prepare cmd=%d %s payload=%q", c.Cmd, c.Tx, c.Payload)
}
func (c vote) String() string {
	s := fmt.Sprintf("vote cmd=%d %s yes=%t reason=%q", c.Cmd, c.Tx, c.Yes, c.Reason)
	if !c.Yes {
		s += " with decision " + outcomeString(c.Abort)
	}
	return s
}
func (c makeDecision) String() string {
	return fmt.Sprintf("decide cmd=%d %s want=%s", c.Cmd, c.Tx, outcomeString(c.Want))
}
func (c handle) String() string {
	return fmt.Sprintf("handle cmd=%d %s payload=%q outcome=%s", c.Cmd, c.Tx, c.Payload, outcomeString(c.Outcome))
}
func (c deleteEntry) String() string { return fmt.Sprintf("delete entry cmd=%d %s", c.Cmd, c.Tx) }
func (c deregister) String() string  { return fmt.Sprintf("deregister cmd=%d", c.Cmd) }
func (c sleep) String() string {
	return strings.TrimSpace(fmt.Sprintf("sleep cmd=%d %v %s", c.Cmd, c.Delay, c.Tx))
}

// The coordinator's calls: a Propose is three (its create, its votes'
// collection, its decision), each in its own span; abandonCall is its
// end when its caller gave up, and waits for the abort.
type (
	proposeCall struct {
		Req          uint64
		Tx           string
		Data         []byte
		Nonce        string
		Participants []string
	}
	collectCall struct {
		Req uint64
		Tx  string
	}
	decideCall struct {
		Req uint64
		Tx  string
	}
	abandonCall struct {
		Req uint64
		Tx  string
	}
)

// The replies to the coordinator's commands.
type (
	// expired: the transaction is deleted, or kept while a participant
	// is Waiting for its call, or Err.
	expired struct {
		ref
		Waiting bool
		Err     error
	}
	// coordDropped: our node of a decided transaction was deleted (or
	// not: our session's end deletes it).
	coordDropped struct{ ref }
	// swept: the decided transactions found under the root, each with
	// what is left of its retention.
	swept struct {
		ref
		Due []dueTx
	}
)

type dueTx struct {
	Tx    string
	Delay time.Duration
}

func (i proposeCall) String() string {
	return fmt.Sprintf("propose req=%d %s participants=%v", i.Req, i.Tx, i.Participants)
}
func (i collectCall) String() string { return fmt.Sprintf("collect req=%d %s", i.Req, i.Tx) }
func (i decideCall) String() string  { return fmt.Sprintf("decide req=%d %s", i.Req, i.Tx) }
func (i abandonCall) String() string { return fmt.Sprintf("abandon req=%d %s", i.Req, i.Tx) }
func (i expired) String() string {
	return fmt.Sprintf("expired cmd=%d %s waiting=%t err=%v", i.Cmd, i.Tx, i.Waiting, i.Err)
}
func (i coordDropped) String() string { return fmt.Sprintf("coordinator dropped cmd=%d", i.Cmd) }
func (i swept) String() string        { return fmt.Sprintf("swept cmd=%d %v", i.Cmd, i.Due) }

// The coordinator's commands.
type (
	// create makes the transaction, our node, its votes directory and the
	// participants' inbox entries, in one multi.
	create struct {
		ref
		Data         []byte
		Nonce        string
		Participants []string
	}
	// watchVotes lists the votes, leaving a child watch.
	watchVotes struct {
		ref
	}
	// expire deletes a decided transaction once every participant has
	// had its call.
	expire struct {
		ref
		Participants []string // nil: read from the transaction's node
	}
	// dropCoord counts a decided transaction and deletes our node of it.
	dropCoord struct {
		ref
		Outcome Outcome
	}
	// sweep finds the decided transactions under the root.
	sweep struct{ ref }
)

func (c create) String() string {
	return fmt.Sprintf("create cmd=%d %s participants=%v", c.Cmd, c.Tx, c.Participants)
}
func (c watchVotes) String() string { return fmt.Sprintf("watch votes cmd=%d %s", c.Cmd, c.Tx) }
func (c expire) String() string     { return fmt.Sprintf("expire cmd=%d %s", c.Cmd, c.Tx) }
func (c dropCoord) String() string {
	return fmt.Sprintf("drop coordinator cmd=%d %s outcome=%s", c.Cmd, c.Tx, outcomeString(c.Outcome))
}
func (c sweep) String() string { return fmt.Sprintf("sweep cmd=%d", c.Cmd) }
