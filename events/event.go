package events

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// State is a recipe machine's state. Each machine declares its own (see
// runtime.NewFSM); the constants below are the contention engine's (the
// lock's, the election's), those of ZooKeeper's LeaderElectionSupport,
// with LEADER for "holds it".
type State string

// The contention engine's states.
const (
	StateStart     State = "START"
	StateOffer     State = "OFFER"
	StateDetermine State = "DETERMINE"
	StateReady     State = "READY"
	StateLeader    State = "LEADER"
	StateFailed    State = "FAILED"
	StateStop      State = "STOP"
)

// States lists the contention engine's states, in lifecycle order.
var States = []State{StateStart, StateOffer, StateDetermine, StateReady, StateLeader, StateFailed, StateStop}

// Type is the kind of a lifecycle event.
type Type int

// Lifecycle event types. The _START/_COMPLETE pairs and FAILED bracket the
// phases of the contention engine; SUSPENDED, RECONNECTED and LOST report
// the session; OVERFLOW is delivered to a bounded subscriber in place of the
// events it missed.
const (
	Start Type = iota + 1
	OfferStart
	OfferComplete
	DetermineStart
	DetermineComplete
	ReadyStart
	ReadyComplete
	ElectedStart
	ElectedComplete
	Failed
	StopStart
	StopComplete
	Suspended
	Reconnected
	Lost
	Overflow
	// RevokeRequested: someone asked the holder to give up its grant (a
	// revocable lock's node was written "__REVOKE__" or "unlock"). The
	// holder decides; the grant goes on until it releases.
	RevokeRequested
	// Queue events: an item was offered, taken (removed), claimed
	// (acknowledged consumption), acked, nacked, or claimed again after
	// an earlier claim on it ended without an ack (REDELIVERED, before
	// its CLAIMED).
	Offered
	Taken
	Claimed
	Acked
	Nacked
	Redelivered
	// Barrier events: a member entered a double barrier (ENTERED, once
	// all members are in) or left it (LEFT, once all have left).
	Entered
	Left
	// Two-phase commit events: a participant's handler prepared a
	// transaction (PREPARED), its vote was written (VOTED), and the
	// decision (COMMITTED, or ABORTED with the reason in Err).
	Prepared
	Voted
	Committed
	Aborted
	// Cache events: the first full load is done (INITIALIZED, once; a
	// late subscriber gets it at once), and a node appeared, its data
	// changed, or it went; each with the node's path (Node), Data and
	// Version.
	Initialized
	NodeAdded
	NodeUpdated
	NodeRemoved
	// Group events: a member's node appeared (MEMBER_JOINED), its data
	// changed (MEMBER_UPDATED) or it went (MEMBER_LEFT); each with the
	// member's node (Node), Data and Version.
	MemberJoined
	MemberLeft
	MemberUpdated
)

var typeNames = [...]string{
	Start:             "START",
	OfferStart:        "OFFER_START",
	OfferComplete:     "OFFER_COMPLETE",
	DetermineStart:    "DETERMINE_START",
	DetermineComplete: "DETERMINE_COMPLETE",
	ReadyStart:        "READY_START",
	ReadyComplete:     "READY_COMPLETE",
	ElectedStart:      "ELECTED_START",
	ElectedComplete:   "ELECTED_COMPLETE",
	Failed:            "FAILED",
	StopStart:         "STOP_START",
	StopComplete:      "STOP_COMPLETE",
	Suspended:         "SUSPENDED",
	Reconnected:       "RECONNECTED",
	Lost:              "LOST",
	Overflow:          "OVERFLOW",
	RevokeRequested:   "REVOKE_REQUESTED",
	Offered:           "OFFERED",
	Taken:             "TAKEN",
	Claimed:           "CLAIMED",
	Acked:             "ACKED",
	Nacked:            "NACKED",
	Redelivered:       "REDELIVERED",
	Entered:           "ENTERED",
	Left:              "LEFT",
	Prepared:          "PREPARED",
	Voted:             "VOTED",
	Committed:         "COMMITTED",
	Aborted:           "ABORTED",
	Initialized:       "INITIALIZED",
	NodeAdded:         "NODE_ADDED",
	NodeUpdated:       "NODE_UPDATED",
	NodeRemoved:       "NODE_REMOVED",
	MemberJoined:      "MEMBER_JOINED",
	MemberLeft:        "MEMBER_LEFT",
	MemberUpdated:     "MEMBER_UPDATED",
}

func (t Type) String() string {
	if t > 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Phase says what an event means for its term, whatever the machine
// that made it: observers (metrics) time terms from phases, not from the
// event types of one machine. Each machine declares the phase of each of
// its event types.
type Phase uint8

// The phases of a term: it begins (an attempt: offer, enqueue, ...), is
// granted (held, elected, leased, taken), and ends, by failure or not.
// Events in between have PhaseNone.
const (
	PhaseNone Phase = iota
	PhaseBegin
	PhaseGranted
	PhaseFailed
	PhaseEnded
)

var phaseNames = [...]string{
	PhaseNone:    "none",
	PhaseBegin:   "begin",
	PhaseGranted: "granted",
	PhaseFailed:  "failed",
	PhaseEnded:   "ended",
}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Event is one lifecycle event of one recipe instance.
type Event struct {
	Time      time.Time
	Recipe    string // "lock", "election", ...
	Path      string // the recipe's directory
	Instance  string // the instance's id (its node uuid, or the user's id)
	Type      Type
	Phase     Phase  // what the event means for its term
	State     State  // the machine's state after the event
	Node      string // our node's full path, once known; on a FAILED, STOP_START or STOP_COMPLETE before then, the protected prefix its create used
	SessionID int64  // the session the event happened on
	Token     int64  // the fencing token (czxid of our node) once determined
	Term      uint64 // which acquisition/campaign of this instance (1, 2, ...)
	Err       error  // the cause, for FAILED and LOST
	TraceID   trace.TraceID
	SpanID    trace.SpanID
	Missed    uint64 // OVERFLOW only: how many events this subscriber missed
	Data      []byte // cache events: the node's data at the change (shared: do not modify)
	Version   int32  // cache events: the node's data version at the change
}

func (e Event) String() string {
	s := fmt.Sprintf("%s %s %s %s state=%s", e.Time.Format("15:04:05.000000"), e.Recipe, e.Instance, e.Type, e.State)
	if e.Term != 0 {
		s += fmt.Sprintf(" term=%d", e.Term)
	}
	if e.Node != "" {
		s += " node=" + e.Node
	}
	if e.Token != 0 {
		s += fmt.Sprintf(" token=%#x", e.Token)
	}
	if e.SessionID != 0 {
		s += fmt.Sprintf(" session=%#x", e.SessionID)
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	if e.Type == Overflow {
		s += fmt.Sprintf(" missed=%d", e.Missed)
	}
	return s
}
