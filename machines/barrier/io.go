package barrier

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// input is everything that can happen to a machine: a call, a reply to
// one of its commands, a watch firing, a session change.
type input = fmt.Stringer

// call is a handle's call (enter, leave; set, remove, wait). The Shell's
// word about a call (runtime.Cancel, Shutdown, Handover) is its own input.
type call struct {
	Op  op
	Req uint64
}

// op names a call, or a command's request, as transcripts show it.
type op string

const (
	opEnter  op = "enter"
	opLeave  op = "leave"
	opSet    op = "set"    // create the barrier node and its missing parents
	opRemove op = "remove" // delete the barrier node
	opWait   op = "wait"   // watch the barrier node for its deletion
)

// enterRefused: the answer to an Enter that let us in came as its
// caller's ctx ended, and no caller took it (runtime.Spec.Refused): we
// get out, as for an Enter withdrawn before it was answered.
type enterRefused struct{}

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

// readyOpened is the reply to open or check ready: ready is ours; or
// Gone: the ready in the way went before we could read it (another member
// replaced a stale one, or the round it let through is over), and nothing
// was made; or InProgress: the ready in the way was made before our node,
// and these members, made before it, are still in; or, for check ready,
// Stale: the ready there was made before our node and no one is in (its
// creation zxid).
type readyOpened struct {
	Cmd        uint64
	Gone       bool
	InProgress []string
	Stale      int64
	Err        error
}

// readyWatched is the reply to watch ready.
type readyWatched struct {
	Cmd    uint64
	Exists bool
	Czxid  int64
	Err    error
}

// readyEvent: the watch on ready that probe or watch ready left fired.
type readyEvent struct {
	Cmd  uint64
	Type zk.EventType
}

// leaveListed is the reply to list members.
type leaveListed struct {
	Cmd      uint64
	Children []string
	Err      error
}

// memberDeleted is the reply to delete member.
type memberDeleted struct {
	Cmd  uint64
	Name string
	Err  error
}

// nodeWatched is the reply to watch member: whether the member node still
// exists (then a watch was left on it).
type nodeWatched struct {
	Cmd    uint64
	Exists bool
	Err    error
}

// nodeGone: the watch that watch member left fired.
type nodeGone struct{ Cmd uint64 }

// readyDeleted is the reply to delete ready.
type readyDeleted struct {
	Cmd uint64
	Err error
}

func (i call) String() string       { return fmt.Sprintf("%s req=%d", i.Op, i.Req) }
func (enterRefused) String() string { return "enter refused" }
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

// command is request Op, which the machine asks its shell to make; its
// inputs carry Cmd.
type command struct {
	Cmd       uint64
	Op        op
	Name      string // join, open or check ready: our member node; delete or watch member: that member
	WithReady bool   // join: ready too, in one multi (our arrival completes the count)
	Stale     int64  // open or check ready: the creation zxid of a ready seen before our node (0: none)
}

// A command's requests: a Barrier's (opSet, opRemove, opWait) and a
// double barrier member's.
const (
	// probe reads the path's data, the path's children and whether
	// ready exists (leaving a watch on ready), at once.
	opProbe op = "probe"
	// join creates our member node (the path, with the member count as
	// its data, when missing); WithReady, ready too. When ready is not
	// created, the children are listed after the create.
	opJoin op = "join"
	// open ready creates ready, or reads whose the one there is
	// (handle.openReady): a ready created before our member node (stale:
	// from an earlier round, never deleted) in the way is replaced. Check
	// ready makes and replaces nothing (the count is not known to be
	// full): it only reads.
	opOpenReady  op = "open ready"
	opCheckReady op = "check ready"
	opWatchReady op = "watch ready" // set a watch on ready, and read whether it exists
	// list members lists the path's children, to leave; sync, list
	// members after a sync of the path (the server we read from catches
	// up with the leader).
	opList         op = "list members"
	opSyncList     op = "sync, list members"
	opDeleteMember op = "delete member"
	opWatchMember  op = "watch member" // set a watch on member Name, and read whether it exists
	opDeleteReady  op = "delete ready" // once every member has left
)

func (c command) ID() uint64 { return c.Cmd }
func (c command) String() string {
	switch c.Op {
	case opJoin:
		return fmt.Sprintf("%s cmd=%d %s with_ready=%t", c.Op, c.Cmd, c.Name, c.WithReady)
	case opOpenReady, opCheckReady:
		return fmt.Sprintf("%s cmd=%d stale=%d", c.Op, c.Cmd, c.Stale)
	case opDeleteMember, opWatchMember:
		return fmt.Sprintf("%s cmd=%d %s", c.Op, c.Cmd, c.Name)
	}
	return fmt.Sprintf("%s cmd=%d", c.Op, c.Cmd)
}
