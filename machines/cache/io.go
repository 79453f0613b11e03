package cache

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// input is everything that can happen to a machine: a call, a reply to
// one of its commands, a watch firing, a session change.
type input = fmt.Stringer

// initCall waits for the first full load (Initialized).
type initCall struct{ Req uint64 }

// dataRead is the reply to readData: the node's data and Stat (a data
// watch was left on it), or ErrNoNode (no watch).
type dataRead struct {
	Cmd  uint64
	Data []byte
	Stat zk.Stat
	Err  error
}

// kidsRead is the reply to readKids: the node's child names (unsorted)
// and its Stat (a child watch was left on it), or an error.
type kidsRead struct {
	Cmd   uint64
	Names []string
	Stat  zk.Stat
	Err   error
}

// existsRead is the reply to watchExists: whether the root exists (when
// it does not, a watch for its creation was left).
type existsRead struct {
	Cmd    uint64
	Exists bool
	Err    error
}

// fired: the watch command Cmd left fired (or ended: EventNotWatching).
type fired struct {
	Cmd  uint64
	Path string
	Type zk.EventType
}

func (i initCall) String() string { return fmt.Sprintf("initialized req=%d", i.Req) }
func (i dataRead) String() string {
	if i.Err != nil {
		return fmt.Sprintf("data cmd=%d err=%v", i.Cmd, i.Err)
	}
	return fmt.Sprintf("data cmd=%d %q czxid=%d mzxid=%d version=%d", i.Cmd, i.Data, i.Stat.Czxid, i.Stat.Mzxid, i.Stat.Version)
}
func (i kidsRead) String() string {
	if i.Err != nil {
		return fmt.Sprintf("children cmd=%d err=%v", i.Cmd, i.Err)
	}
	return fmt.Sprintf("children cmd=%d %v", i.Cmd, i.Names)
}
func (i existsRead) String() string {
	return fmt.Sprintf("exists cmd=%d %t err=%v", i.Cmd, i.Exists, i.Err)
}
func (i fired) String() string { return fmt.Sprintf("watch cmd=%d %s %s", i.Cmd, i.Path, i.Type) }

// command is a request the machine asks its shell to make.
type command interface {
	ID() uint64
	String() string
}

// readData reads a node's data and Stat, leaving a data watch.
type readData struct {
	Cmd  uint64
	Path string
}

// readKids lists a node's children, leaving a child watch.
type readKids struct {
	Cmd  uint64
	Path string
}

// watchExists asks whether the (absent) root exists, leaving a watch for
// its creation.
type watchExists struct {
	Cmd  uint64
	Path string
}

func (c readData) ID() uint64    { return c.Cmd }
func (c readKids) ID() uint64    { return c.Cmd }
func (c watchExists) ID() uint64 { return c.Cmd }

func (c readData) String() string    { return fmt.Sprintf("get cmd=%d %s", c.Cmd, c.Path) }
func (c readKids) String() string    { return fmt.Sprintf("children cmd=%d %s", c.Cmd, c.Path) }
func (c watchExists) String() string { return fmt.Sprintf("exists cmd=%d %s", c.Cmd, c.Path) }
