package contention

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Input is everything that can happen to a Machine: a call from the user, a
// reply to one of its commands, a watch firing, a session change. The set is
// closed: the types below are all there is.
type Input interface {
	isInput()
	String() string
}

// Acquire asks for the grant (lock held, elected). Try: answer at once with
// "not granted" instead of waiting behind another holder. Marker, if set,
// names the node of a new term instead of Config.Markers[0].
type Acquire struct {
	Req    uint64
	Try    bool
	Marker string
}

// Cancel withdraws request Req: its caller stopped waiting. A grant already
// given to it is handed back.
type Cancel struct{ Req uint64 }

// Release hands back one hold (re-entrant holds count), or with All every
// hold at once.
type Release struct {
	Req uint64
	All bool
}

// Shutdown ends the machine: waiters fail with ErrClosed, our node is
// deleted, and the machine is Done once nothing it created is left.
type Shutdown struct{ Req uint64 }

// Handover ends a machine whose Shutdown could not finish (the connection
// is down): the reply's Leftovers are the nodes it still had to delete,
// for the connection's janitor (runtime.HandOver), and the machine is Done.
type Handover struct{ Req uint64 }

// Session is a change of the connection's session state.
type Session struct {
	State     zk.SessionState
	SessionID int64
}

// Created is the reply to CreateNode.
type Created struct {
	Cmd  uint64
	Path string
	Err  error
}

// DirEnsured is the reply to EnsureDir.
type DirEnsured struct {
	Cmd uint64
	Err error
}

// DirRead is the reply to ReadDir: both requests' results. Err joins
// both requests' errors: either one failing fails the read.
type DirRead struct {
	Cmd       uint64
	Children  []string
	Own       zk.Stat
	OwnExists bool
	Err       error
}

// DirListed is the reply to ListDir.
type DirListed struct {
	Cmd      uint64
	Children []string
	Err      error
}

// Watching is the reply to WatchNode: whether the node existed (and so a
// watch was left on it) and, for a WatchNode with Hold, whether its hold
// mark existed: the node holds or held.
type Watching struct {
	Cmd    uint64
	Exists bool
	Held   bool
	Err    error
}

// NodesChecked is the reply to CheckNodes: whether each path exists.
type NodesChecked struct {
	Cmd    uint64
	Exists []bool
	Err    error
}

// WatchFired is an event of the watches WatchNode Cmd left: the release
// mark's creation (see ReleaseMark), the watched node's deletion, or the
// end of the watches. With Hold, the hold mark's creation (see HoldMark)
// comes first if it is made while we watch, and the deletion follows.
type WatchFired struct {
	Cmd   uint64
	Event zk.WatchEvent
}

// OwnNodeGone is the event of the watch ReadDir sets on our own node: it
// was deleted (or the watch ended with the session). Cmd is the ReadDir's.
type OwnNodeGone struct {
	Cmd   uint64
	Event zk.WatchEvent
}

// Deleted is the reply to DeleteNode.
type Deleted struct {
	Cmd uint64
	Err error
}

// Announced is the reply to Announce.
type Announced struct {
	Cmd uint64
	Err error
}

func (Acquire) isInput()      {}
func (Cancel) isInput()       {}
func (Release) isInput()      {}
func (Shutdown) isInput()     {}
func (Handover) isInput()     {}
func (Session) isInput()      {}
func (Created) isInput()      {}
func (DirEnsured) isInput()   {}
func (DirRead) isInput()      {}
func (DirListed) isInput()    {}
func (Watching) isInput()     {}
func (NodesChecked) isInput() {}
func (WatchFired) isInput()   {}
func (OwnNodeGone) isInput()  {}
func (Deleted) isInput()      {}
func (Announced) isInput()    {}

func (i Acquire) String() string {
	if i.Try {
		return fmt.Sprintf("TryAcquire req=%d", i.Req)
	}
	return fmt.Sprintf("Acquire req=%d", i.Req)
}
func (i Cancel) String() string { return fmt.Sprintf("Cancel req=%d", i.Req) }
func (i Release) String() string {
	if i.All {
		return fmt.Sprintf("Release req=%d all", i.Req)
	}
	return fmt.Sprintf("Release req=%d", i.Req)
}
func (i Shutdown) String() string { return fmt.Sprintf("Shutdown req=%d", i.Req) }
func (i Handover) String() string { return fmt.Sprintf("Handover req=%d", i.Req) }
func (i Session) String() string  { return fmt.Sprintf("Session %s session=%#x", i.State, i.SessionID) }
func (i Created) String() string {
	return fmt.Sprintf("Created cmd=%d path=%s%s", i.Cmd, i.Path, errText(i.Err))
}
func (i DirEnsured) String() string {
	return fmt.Sprintf("DirEnsured cmd=%d%s", i.Cmd, errText(i.Err))
}
func (i DirRead) String() string {
	return fmt.Sprintf("DirRead cmd=%d children=%v own.exists=%t own.czxid=%#x own.owner=%#x%s",
		i.Cmd, i.Children, i.OwnExists, i.Own.Czxid, i.Own.EphemeralOwner, errText(i.Err))
}
func (i DirListed) String() string {
	return fmt.Sprintf("DirListed cmd=%d children=%v%s", i.Cmd, i.Children, errText(i.Err))
}
func (i Watching) String() string {
	held := ""
	if i.Held {
		held = " held"
	}
	return fmt.Sprintf("Watching cmd=%d exists=%t%s%s", i.Cmd, i.Exists, held, errText(i.Err))
}
func (i NodesChecked) String() string {
	return fmt.Sprintf("NodesChecked cmd=%d exists=%v%s", i.Cmd, i.Exists, errText(i.Err))
}
func (i WatchFired) String() string {
	return fmt.Sprintf("WatchFired cmd=%d %s %s%s", i.Cmd, i.Event.Type, i.Event.Path, errText(i.Event.Err))
}
func (i OwnNodeGone) String() string {
	return fmt.Sprintf("OwnNodeGone cmd=%d %s %s%s", i.Cmd, i.Event.Type, i.Event.Path, errText(i.Event.Err))
}
func (i Deleted) String() string { return fmt.Sprintf("Deleted cmd=%d%s", i.Cmd, errText(i.Err)) }
func (i Announced) String() string {
	return fmt.Sprintf("Announced cmd=%d%s", i.Cmd, errText(i.Err))
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " err=" + err.Error()
}

// Command is a request the machine wants made. The runtime shell makes it
// off the actor and feeds the reply back as the matching Input. The set is
// closed.
type Command interface {
	isCommand()
	ID() uint64
	String() string
}

// CreateNode creates our ephemeral sequential node: Prefix + 10-digit
// sequence. Reply: Created.
type CreateNode struct {
	Cmd    uint64
	Prefix string
	Data   []byte
}

// EnsureDir creates Dir and its missing ancestors as container nodes.
// Reply: DirEnsured.
type EnsureDir struct {
	Cmd uint64
	Dir string
}

// ReadDir lists Dir's children and reads Own's Stat with a watch on it
// (a child watch: it fires when the node is deleted, not when its data
// changes), both requests in flight together. Reply: DirRead, then
// OwnNodeGone when the node goes.
type ReadDir struct {
	Cmd uint64
	Dir string
	Own string
}

// ListDir lists Dir's children (to find our node by uuid after a lost
// create reply). Reply: DirListed.
type ListDir struct {
	Cmd uint64
	Dir string
}

// WatchNode checks that Path exists and leaves two one-shot watches, both
// requests in flight together: a child watch on Path, which fires only when
// it is deleted (contender nodes are ephemeral: no children; a data change
// does not fire it), and an exists watch on ReleaseMark(Path), or with
// Hold on HoldMark(Path). Replies: Watching, then one WatchFired; with
// Hold, two when the hold mark is made while we watch (its creation, then
// the deletion).
type WatchNode struct {
	Cmd  uint64
	Path string
	Hold bool
	// Dir: Path is the directory; only its child watch is set (Leases),
	// and its one WatchFired is any change of the children.
	Dir bool
}

// CheckNodes asks whether each of Paths exists, all requests in flight
// together. Reply: NodesChecked.
type CheckNodes struct {
	Cmd   uint64
	Paths []string
}

// Announce makes our hold mark, Path (HoldMark of Node), an ephemeral node,
// in one multi with a check that Node exists: so a hold mark never
// outlives its node by being made after it. Reply: Announced.
type Announce struct {
	Cmd  uint64
	Node string
	Path string
}

// DeleteNode deletes Path. With Release set, one multi creates and deletes
// ReleaseMark(Path) and then deletes Path, so the waiter watching it knows
// a holder left and holds next with no read. Reply: Deleted.
type DeleteNode struct {
	Cmd     uint64
	Path    string
	Release bool
}

func (c CreateNode) ID() uint64 { return c.Cmd }
func (c EnsureDir) ID() uint64  { return c.Cmd }
func (c ReadDir) ID() uint64    { return c.Cmd }
func (c ListDir) ID() uint64    { return c.Cmd }
func (c WatchNode) ID() uint64  { return c.Cmd }
func (c CheckNodes) ID() uint64 { return c.Cmd }
func (c DeleteNode) ID() uint64 { return c.Cmd }
func (c Announce) ID() uint64   { return c.Cmd }

func (CreateNode) isCommand() {}
func (EnsureDir) isCommand()  {}
func (ReadDir) isCommand()    {}
func (ListDir) isCommand()    {}
func (WatchNode) isCommand()  {}
func (CheckNodes) isCommand() {}
func (DeleteNode) isCommand() {}
func (Announce) isCommand()   {}

func (c CreateNode) String() string {
	return fmt.Sprintf("CreateNode cmd=%d prefix=%s data=%q", c.Cmd, c.Prefix, c.Data)
}
func (c EnsureDir) String() string { return fmt.Sprintf("EnsureDir cmd=%d dir=%s", c.Cmd, c.Dir) }
func (c ReadDir) String() string {
	return fmt.Sprintf("ReadDir cmd=%d dir=%s own=%s", c.Cmd, c.Dir, c.Own)
}
func (c ListDir) String() string { return fmt.Sprintf("ListDir cmd=%d dir=%s", c.Cmd, c.Dir) }
func (c WatchNode) String() string {
	if c.Dir {
		return fmt.Sprintf("WatchNode cmd=%d dir=%s", c.Cmd, c.Path)
	}
	if c.Hold {
		return fmt.Sprintf("WatchNode cmd=%d path=%s hold", c.Cmd, c.Path)
	}
	return fmt.Sprintf("WatchNode cmd=%d path=%s", c.Cmd, c.Path)
}
func (c CheckNodes) String() string {
	return fmt.Sprintf("CheckNodes cmd=%d paths=%v", c.Cmd, c.Paths)
}
func (c DeleteNode) String() string {
	return fmt.Sprintf("DeleteNode cmd=%d path=%s release=%t", c.Cmd, c.Path, c.Release)
}
func (c Announce) String() string { return fmt.Sprintf("Announce cmd=%d path=%s", c.Cmd, c.Path) }

// Grant describes a term in which we hold it.
type Grant struct {
	Term  uint64
	Node  string // our node's full path
	Token int64  // czxid of our node: the fencing token
}

// Reply answers request Req: Granted (with Grant), not granted (TryAcquire
// behind another holder: Granted false, Err nil), or Err.
type Reply struct {
	Req       uint64
	Granted   bool
	Grant     Grant
	Leftovers runtime.Leftovers // Handover's answer
	Err       error
}

func (r Reply) String() string {
	if r.Err != nil {
		return fmt.Sprintf("Reply req=%d err=%v", r.Req, r.Err)
	}
	if l := r.Leftovers; len(l.Nodes)+len(l.Prefixes) > 0 {
		return fmt.Sprintf("Reply req=%d leftovers session=%#x nodes=%v prefixes=%v", r.Req, l.Session, l.Nodes, l.Prefixes)
	}
	if r.Granted {
		return fmt.Sprintf("Reply req=%d granted term=%d node=%s token=%#x", r.Req, r.Grant.Term, r.Grant.Node, r.Grant.Token)
	}
	return fmt.Sprintf("Reply req=%d ok", r.Req)
}

// TermEnd is the end of a term, and why it ended: the recipe's Released,
// Closed, SessionLost, Suspended or NodeDeleted, or the error that failed
// it.
type TermEnd struct {
	Term  uint64
	Cause error
}

// Event is a lifecycle event as the machine knows it; the shell stamps
// time, ids and trace context before publishing it.
type Event struct {
	Type  events.Type
	State events.State
	Term  uint64
	Node  string
	Token int64
	Err   error
}

func (e Event) String() string {
	s := fmt.Sprintf("Event %s state=%s term=%d", e.Type, e.State, e.Term)
	if e.Node != "" {
		s += " node=" + e.Node
	}
	if e.Token != 0 {
		s += fmt.Sprintf(" token=%#x", e.Token)
	}
	return s + errText(e.Err)
}

// Output is what one Step produces, in this order of effect: events to
// publish, replies to callers, commands to make.
type Output struct {
	Events   []Event
	Replies  []Reply
	Commands []Command
	// TermEnded lists terms whose grant ended (released, lost or failed):
	// their Lost channels close.
	TermEnded []TermEnd
	// Done: the machine was shut down and nothing it created is left (or
	// the connection is closed). The actor may stop.
	Done bool
}
