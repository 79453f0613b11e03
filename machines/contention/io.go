package contention

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// Input is everything that can happen to a machine: a call from the user, a
// reply to one of its commands, a watch firing, a session change. The set is
// the types of Step's switch; transcripts name each by its String.
type Input interface{ String() string }

// Acquire asks for the grant (lock held, elected). Try: answer at once with
// "not granted" instead of waiting behind another holder. Marker, if set,
// names the node of a new term instead of Config.Markers[0]. Beside, if
// set, is a contender node of the directory (full path) that a new term's
// node sits beside: ours takes its sequence (a plain create, not a
// sequential one), atomically with a check that Beside still exists. A
// read/write lock's downgrade: the reader at its writer's place, ahead of
// every writer queued behind it, made only while the writer holds.
type Acquire struct {
	Req    uint64
	Try    bool
	Marker string
	Beside string
}

// Release hands back one hold (re-entrant holds count), or with All every
// hold at once. NoMark: the last one deletes our node plainly, without the
// release mark, so the waiter behind lists the directory again (a
// read/write lock's writer that leaves its downgraded reader beside it).
// Term, when not 0, is the grant's term: a Release of a term that has
// ended is NotHeld, and leaves a later term alone.
type Release struct {
	Req    uint64
	All    bool
	NoMark bool
	Term   uint64
}

// created is the reply to createNode.
type created struct {
	Cmd  uint64
	Path string
	Err  error
}

// dirRead is the reply to readDir: both requests' results. Err joins
// both requests' errors: either one failing fails the read.
type dirRead struct {
	Cmd       uint64
	Children  []string
	Own       zk.Stat
	OwnExists bool
	Err       error
	Session   int64 // the connection's session once answered (see vanished); 0: unknown
}

// dirListed is the reply to listDir.
type dirListed struct {
	Cmd      uint64
	Children []string
	Err      error
	Session  int64 // as dirRead's
}

// watching is the reply to watchNode: whether the node existed (and so a
// watch was left on it; a deletion whose event came with the replies, no
// mark's before it, counts as gone) and, for a watchNode with Hold,
// whether its hold mark existed: the node holds or held.
type watching struct {
	Cmd    uint64
	Exists bool
	Held   bool
	Err    error
}

// nodesChecked is the reply to checkNodes: whether each path exists.
type nodesChecked struct {
	Cmd    uint64
	Exists []bool
	Err    error
}

// fired is an event of a watch that command Cmd left; What names the
// watch (the transcripts' name).
type fired struct {
	What  string
	Cmd   uint64
	Event zk.WatchEvent
	// ConnClosed (ownNodeGone): our connection was being closed when the
	// event came; closing our session deletes our node, which is no one
	// else's doing.
	ConnClosed bool
}

// The watches a fired is an event of.
const (
	// watchFired: of the watches of a watchNode: the release mark's
	// creation (see ReleaseMark), the watched node's deletion, or the end
	// of the watches. With Hold, the hold mark's creation (see HoldMark)
	// comes first if it is made while we watch, and the deletion follows.
	// Or of one of a checkNodes' watches: its node's deletion.
	watchFired = "WatchFired"
	// ownNodeGone: of the watch readDir sets on our own node: it was
	// deleted (or the watch ended with the session).
	ownNodeGone = "OwnNodeGone"
	// dataChanged: of the watch readData left: the data changed, the node
	// was deleted, or the watch ended with the session.
	dataChanged = "DataChanged"
)

// done is the reply to a command that answers with its error alone; What
// names it (the transcripts' name).
type done struct {
	What string
	Cmd  uint64
	Err  error
}

// What each done answers.
const (
	dirEnsured = "DirEnsured" // ensureDir
	promoted   = "Promoted"   // promote
	markFired  = "MarkFired"  // fireMark
	deleted    = "Deleted"    // deleteNode
	announced  = "Announced"  // announceMark
)

func (i Acquire) String() string {
	return fmt.Sprintf("%sAcquire req=%d", opt(i.Try, "Try"), i.Req) +
		opt(i.Marker != "", " marker=%s", i.Marker) + opt(i.Beside != "", " beside=%s", i.Beside)
}
func (i Release) String() string {
	return fmt.Sprintf("Release req=%d%s%s", i.Req, opt(i.All, " all"), opt(i.NoMark, " nomark"))
}
func (i created) String() string {
	return fmt.Sprintf("Created cmd=%d path=%s%s", i.Cmd, i.Path, errText(i.Err))
}
func (i done) String() string { return fmt.Sprintf("%s cmd=%d%s", i.What, i.Cmd, errText(i.Err)) }
func (i dirRead) String() string {
	return fmt.Sprintf("DirRead cmd=%d children=%v own.exists=%t own.czxid=%#x own.owner=%#x%s%s",
		i.Cmd, i.Children, i.OwnExists, i.Own.Czxid, i.Own.EphemeralOwner, sessionText(i.Session), errText(i.Err))
}
func (i dirListed) String() string {
	return fmt.Sprintf("DirListed cmd=%d children=%v%s%s", i.Cmd, i.Children, sessionText(i.Session), errText(i.Err))
}
func (i watching) String() string {
	return fmt.Sprintf("Watching cmd=%d exists=%t%s%s", i.Cmd, i.Exists, opt(i.Held, " held"), errText(i.Err))
}
func (i nodesChecked) String() string {
	return fmt.Sprintf("NodesChecked cmd=%d exists=%v%s", i.Cmd, i.Exists, errText(i.Err))
}
func (i fired) String() string {
	return fmt.Sprintf("%s cmd=%d %s %s%s%s", i.What, i.Cmd, i.Event.Type, i.Event.Path, opt(i.ConnClosed, " conn-closed"), errText(i.Event.Err))
}

// opt is the text of format and args if cond holds, else "": the parts of
// a transcript's line that are there only when set.
func opt(cond bool, format string, args ...any) string {
	if !cond {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func sessionText(id int64) string { return opt(id != 0, " session=%#x", id) }

func errText(err error) string { return opt(err != nil, " err=%v", err) }

// command is a request the machine wants made. The runtime shell makes it
// off the actor and feeds the reply back as the matching Input. The set is
// the types of exec's switch.
type command interface {
	ID() uint64
	String() string
}

// cmdID is a command's id, Cmd; the inputs that answer it carry it.
type cmdID struct{ Cmd uint64 }

func (c cmdID) ID() uint64 { return c.Cmd }

// createNode creates our ephemeral sequential node: Prefix + 10-digit
// sequence. Reply: created.
type createNode struct {
	cmdID
	Prefix string
	Beside string // set: create Prefix+Seq (not sequential) if Beside exists
	Seq    string // Beside's sequence
	Data   []byte
}

// ensureDir creates Dir and its missing ancestors as container nodes.
// Reply: done (dirEnsured).
type ensureDir struct {
	cmdID
	Dir string
}

// readDir lists Dir's children and reads Own's Stat with a watch on it
// (a child watch: it fires when the node is deleted, not when its data
// changes), both requests in flight together. Reply: dirRead, then
// ownNodeGone when the node goes.
type readDir struct {
	cmdID
	Dir string
	Own string
}

// listDir lists Dir's children: to find our node by uuid after a lost
// create reply (after a sync: the create may not be applied yet on the
// server read from), or, with Relist, for a waiter that must see nodes
// made below it since DETERMINE (our node's watch, set then, is still
// armed). Reply: dirListed.
type listDir struct {
	cmdID
	Dir    string
	Relist bool
}

// watchNode checks that Path exists and leaves two one-shot watches, both
// requests in flight together: a child watch on Path, which fires only when
// it is deleted (contender nodes are ephemeral: no children; a data change
// does not fire it), and an exists watch on ReleaseMark(Path), or with
// Hold on HoldMark(Path). Replies: watching, then one watchFired; with
// Hold, two when the hold mark is made while we watch (its creation, then
// the deletion).
type watchNode struct {
	cmdID
	Path string
	Hold bool
	// Plain: only the child watch is set, no mark's (a reader with one
	// writer below: its deletion, whatever its mark, leaves no writer
	// below).
	Plain bool
	// Promotion: only a data watch on Path is set (a leases waiter behind
	// another waiter): it fires when Path is promoted to a holder (its
	// data set, see promote) or deleted. watching.Held says it was
	// promoted already.
	Promotion bool
}

// fireMark makes and deletes Path (a release or hold mark) in one multi,
// so that the exists watch we set on it fires: set when the node it marks
// was already gone, it would never fire otherwise, and go-zookeeper (which
// cannot remove a watch) would keep it, and a goroutine, until the session
// ends. Exclusive predicates only: the node's successor is the only
// current watcher of its mark. A release mark rides on the term's own
// delete instead (deleteNode.Fire); fireMark is for a hold mark, whose
// directory may be gone. Reply: done (markFired, ignored: best effort).
type fireMark struct {
	cmdID
	Path string
}

// promote sets our node's data (Data, as created; version 0 → 1) once it
// holds after waiting, under Leases: the waiter behind it, which watches
// its data (watchNode.Promotion), becomes the first waiter and watches the
// holders. Reply: done (promoted).
type promote struct {
	cmdID
	Node string
	Data []byte
}

// checkNodes asks whether each of Paths exists, all requests in flight
// together, and leaves a child watch on each that does (one-shot: it fires
// when the node is deleted). Reply: nodesChecked, then one watchFired per
// node that existed, as each goes.
type checkNodes struct {
	cmdID
	Paths []string
}

// announceMark makes our hold mark, Path (HoldMark of Node), an ephemeral node,
// in one multi with a check that Node exists: so a hold mark never
// outlives its node by being made after it. Reply: done (announced).
type announceMark struct {
	cmdID
	Node string
	Path string
}

// deleteNode deletes Path. With Release set, one multi creates and deletes
// ReleaseMark(Path) and then deletes Path, so the waiter watching it knows
// a holder left and holds next with no read. Reply: done (deleted).
type deleteNode struct {
	cmdID
	Path    string
	Release bool
	// Fire: release marks to make and delete in the same multi, whose
	// exists watches (ours) wait for a creation that would never come
	// (see fireMark): at no cost of a write of their own.
	Fire []string
}

func (c createNode) String() string {
	return fmt.Sprintf("CreateNode cmd=%d prefix=%s%s data=%q", c.Cmd, c.Prefix, opt(c.Beside != "", " beside=%s", c.Beside), c.Data)
}
func (c ensureDir) String() string { return fmt.Sprintf("EnsureDir cmd=%d dir=%s", c.Cmd, c.Dir) }
func (c readDir) String() string {
	return fmt.Sprintf("ReadDir cmd=%d dir=%s own=%s", c.Cmd, c.Dir, c.Own)
}
func (c listDir) String() string {
	return fmt.Sprintf("ListDir cmd=%d dir=%s%s", c.Cmd, c.Dir, opt(c.Relist, " relist"))
}
func (c watchNode) String() string {
	kind := opt(c.Hold, " hold")
	switch {
	case c.Promotion:
		kind = " promotion"
	case c.Plain:
		kind = " plain"
	}
	return fmt.Sprintf("WatchNode cmd=%d path=%s%s", c.Cmd, c.Path, kind)
}
func (c fireMark) String() string { return fmt.Sprintf("FireMark cmd=%d path=%s", c.Cmd, c.Path) }
func (c promote) String() string {
	return fmt.Sprintf("Promote cmd=%d node=%s data=%q", c.Cmd, c.Node, c.Data)
}
func (c checkNodes) String() string {
	return fmt.Sprintf("CheckNodes cmd=%d paths=%v", c.Cmd, c.Paths)
}
func (c deleteNode) String() string {
	return fmt.Sprintf("DeleteNode cmd=%d path=%s release=%t%s", c.Cmd, c.Path, c.Release, opt(len(c.Fire) > 0, " fire=%v", c.Fire))
}
func (c announceMark) String() string { return fmt.Sprintf("Announce cmd=%d path=%s", c.Cmd, c.Path) }

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
	Leftovers runtime.Leftovers // handover's answer
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
