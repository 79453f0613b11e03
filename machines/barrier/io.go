package barrier

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// input is everything that can happen to a machine: a call, a reply to
// one of its commands, a watch firing, a session change.
type input = fmt.Stringer

// call is a handle's call (enter, leave; set, remove, wait), or the
// Shell's word about call Req (cancel: its caller stopped waiting;
// shutdown; handover: the reply's value is what is left to delete,
// runtime.Leftovers).
type call struct {
	Op  op
	Req uint64
}

// op names a call, or a command's request, as transcripts show it.
type op string

const (
	opEnter    op = "enter"
	opLeave    op = "leave"
	opSet      op = "set"    // create the barrier node and its missing parents
	opRemove   op = "remove" // delete the barrier node
	opWait     op = "wait"   // watch the barrier node for its deletion
	opCancel   op = "cancel"
	opShutdown op = "shutdown" // fail the calls waiting, delete our node, end the machine
	opHandover op = "handover" // end a machine whose shutdown could not finish
)

// enterRefused: the answer to an Enter that let us in came as its
// caller's ctx ended, and no caller took it (runtime.Spec.Refused): we
// get out, as for an Enter withdrawn before it was answered.
type enterRefused struct{}

// sessionChange is a change of the connection's session state.
type sessionChange struct {
	State     zk.SessionState
	SessionID int64
}

// probed is the reply to probe: the path's data (the member count it
// records), whether ready exists (a watch is left on it either way) and
// its creation zxid, and the path's children. With ready there, Inside
// are the member nodes made before it and still there: a round in
// progress.
type probed struct {
	Cmd         uint64
	PathData    []byte
	ReadyExists bool
	ReadyCzxid  int64
	Children    []string
	Inside      []string
	Err         error
}

// joined is the reply to join: our member node exists; ReadyCreated when
// ready was created with it, else the path's children, listed after.
type joined struct {
	Cmd          uint64
	Name         string // the member node's
	ReadyCreated bool
	Children     []string
	Err          error
}

// readyOpened is the reply to openReady: ready is ours; or Gone: the
// ready in the way went before we could read it (another member replaced
// a stale one, or the round it let through is over), and nothing was
// made; or InProgress: the ready in the way was made before our node, and
// these members, made before it, are still in; or, for a Check, Stale: the
// ready there was made before our node and no one is in (its creation
// zxid).
type readyOpened struct {
	Cmd        uint64
	Gone       bool
	InProgress []string
	Stale      int64
	Err        error
}

// readyWatched is the reply to watchReady.
type readyWatched struct {
	Cmd    uint64
	Exists bool
	Czxid  int64
	Err    error
}

// readyEvent: the watch on ready that probe or watchReady left fired.
type readyEvent struct {
	Cmd  uint64
	Type zk.EventType
}

// leaveListed is the reply to listMembers.
type leaveListed struct {
	Cmd      uint64
	Children []string
	Err      error
}

// memberDeleted is the reply to deleteMember.
type memberDeleted struct {
	Cmd  uint64
	Name string
	Err  error
}

// nodeWatched is the reply to watchMember: whether the member node still
// exists (then a watch was left on it).
type nodeWatched struct {
	Cmd    uint64
	Exists bool
	Err    error
}

// nodeGone: the watch watchMember left fired.
type nodeGone struct{ Cmd uint64 }

// readyDeleted is the reply to deleteReady.
type readyDeleted struct {
	Cmd uint64
	Err error
}

func (i call) String() string       { return fmt.Sprintf("%s req=%d", i.Op, i.Req) }
func (enterRefused) String() string { return "enter refused" }
func (i sessionChange) String() string {
	return fmt.Sprintf("session %s %#x", i.State, i.SessionID)
}
func (i probed) String() string {
	s := fmt.Sprintf("probed cmd=%d data=%q ready=%t czxid=%d children=%v", i.Cmd, i.PathData, i.ReadyExists, i.ReadyCzxid, i.Children)
	if len(i.Inside) > 0 {
		s += fmt.Sprintf(" inside=%v", i.Inside)
	}
	return s + fmt.Sprintf(" err=%v", i.Err)
}
func (i joined) String() string {
	return fmt.Sprintf("joined cmd=%d %s ready=%t children=%v err=%v", i.Cmd, i.Name, i.ReadyCreated, i.Children, i.Err)
}
func (i readyOpened) String() string {
	switch {
	case i.Gone:
		return fmt.Sprintf("ready opened cmd=%d gone err=%v", i.Cmd, i.Err)
	case len(i.InProgress) > 0:
		return fmt.Sprintf("ready opened cmd=%d in_progress=%v err=%v", i.Cmd, i.InProgress, i.Err)
	case i.Stale != 0:
		return fmt.Sprintf("ready opened cmd=%d stale=%d err=%v", i.Cmd, i.Stale, i.Err)
	}
	return fmt.Sprintf("ready opened cmd=%d err=%v", i.Cmd, i.Err)
}
func (i readyWatched) String() string {
	return fmt.Sprintf("ready watched cmd=%d exists=%t czxid=%d err=%v", i.Cmd, i.Exists, i.Czxid, i.Err)
}
func (i readyEvent) String() string { return fmt.Sprintf("ready event cmd=%d %s", i.Cmd, i.Type) }
func (i leaveListed) String() string {
	return fmt.Sprintf("leave listed cmd=%d children=%v err=%v", i.Cmd, i.Children, i.Err)
}
func (i memberDeleted) String() string {
	return fmt.Sprintf("member deleted cmd=%d %s err=%v", i.Cmd, i.Name, i.Err)
}
func (i nodeWatched) String() string {
	return fmt.Sprintf("node watched cmd=%d exists=%t err=%v", i.Cmd, i.Exists, i.Err)
}
func (i nodeGone) String() string { return fmt.Sprintf("node gone cmd=%d", i.Cmd) }
func (i readyDeleted) String() string {
	return fmt.Sprintf("ready deleted cmd=%d err=%v", i.Cmd, i.Err)
}

// command is a request the machine asks its shell to make.
type command interface {
	ID() uint64
	String() string
}

// probe reads the path's data, the path's children and whether ready
// exists (leaving a watch on ready), at once.
type probe struct{ Cmd uint64 }

// join creates our member node (the path, with the member count as its
// data, when missing); with WithReady, ready too, in one multi (our
// arrival completes the count). When ready is not created, the children
// are listed after the create.
type join struct {
	Cmd       uint64
	Name      string
	WithReady bool
}

// openReady creates ready, or reads whose the one there is (see
// DoubleBarrier.openReady). When a ready created before our member node
// (stale: from an earlier round, never deleted) is in the way, it is
// replaced; Stale is the creation zxid seen before our node was created,
// or 0. With Check, nothing is made or replaced: the count is not known
// to be full.
type openReady struct {
	Cmd   uint64
	Name  string // our member node's
	Stale int64
	Check bool
}

// watchReady sets a watch on ready, and reads whether it exists.
type watchReady struct{ Cmd uint64 }

// listMembers lists the path's children, to leave; with Sync, after a
// sync of the path (the server we read from catches up with the leader).
type listMembers struct {
	Cmd  uint64
	Sync bool
}

// deleteMember deletes our member node Name.
type deleteMember struct {
	Cmd  uint64
	Name string
}

// watchMember sets a watch on member Name, and reads whether it exists.
type watchMember struct {
	Cmd  uint64
	Name string
}

// deleteReady deletes ready once every member has left.
type deleteReady struct{ Cmd uint64 }

func (c probe) ID() uint64        { return c.Cmd }
func (c join) ID() uint64         { return c.Cmd }
func (c openReady) ID() uint64    { return c.Cmd }
func (c watchReady) ID() uint64   { return c.Cmd }
func (c listMembers) ID() uint64  { return c.Cmd }
func (c deleteMember) ID() uint64 { return c.Cmd }
func (c watchMember) ID() uint64  { return c.Cmd }
func (c deleteReady) ID() uint64  { return c.Cmd }

func (c probe) String() string { return fmt.Sprintf("probe cmd=%d", c.Cmd) }
func (c join) String() string {
	return fmt.Sprintf("join cmd=%d %s with_ready=%t", c.Cmd, c.Name, c.WithReady)
}
func (c openReady) String() string {
	if c.Check {
		return fmt.Sprintf("check ready cmd=%d stale=%d", c.Cmd, c.Stale)
	}
	return fmt.Sprintf("open ready cmd=%d stale=%d", c.Cmd, c.Stale)
}
func (c watchReady) String() string { return fmt.Sprintf("watch ready cmd=%d", c.Cmd) }
func (c listMembers) String() string {
	if c.Sync {
		return fmt.Sprintf("sync, list members cmd=%d", c.Cmd)
	}
	return fmt.Sprintf("list members cmd=%d", c.Cmd)
}
func (c deleteMember) String() string { return fmt.Sprintf("delete member cmd=%d %s", c.Cmd, c.Name) }
func (c watchMember) String() string  { return fmt.Sprintf("watch member cmd=%d %s", c.Cmd, c.Name) }
func (c deleteReady) String() string  { return fmt.Sprintf("delete ready cmd=%d", c.Cmd) }
