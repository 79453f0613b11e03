package group

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// input is everything that can happen to a member's machine: a call, a
// reply to one of its commands, a watch firing, a session change.
type input = fmt.Stringer

// joinCall waits until our member node exists (Join).
type joinCall struct{ Req uint64 }

// setCall makes Data our node's data (SetData).
type setCall struct {
	Req  uint64
	Data []byte
}

// leaveCall deletes our node and ends the member (Leave).
type leaveCall struct{ Req uint64 }

// created is the reply to create: made (Err nil), or there already
// (zk.ErrNodeExists) with the node's owner, data and version as read.
type created struct {
	Cmd     uint64
	Err     error
	Owner   int64
	Data    []byte
	Version int32
}

// written is the reply to setData.
type written struct {
	Cmd     uint64
	Version int32
	Err     error
}

// deleted is the reply to remove.
type deleted struct {
	Cmd uint64
	Err error
}

// watched is the reply to watchNode: whether the node exists, and its
// owner (a data watch was left on it when it does).
type watched struct {
	Cmd    uint64
	Exists bool
	Owner  int64
	Err    error
}

// fired: the watch left by watchNode Cmd fired (or ended:
// EventNotWatching).
type fired struct {
	Cmd  uint64
	Type zk.EventType
}

func (i joinCall) String() string  { return fmt.Sprintf("join req=%d", i.Req) }
func (i setCall) String() string   { return fmt.Sprintf("set req=%d %q", i.Req, i.Data) }
func (i leaveCall) String() string { return fmt.Sprintf("leave req=%d", i.Req) }
func (i created) String() string {
	if i.Err != nil {
		return fmt.Sprintf("created cmd=%d err=%v owner=%#x %q v%d", i.Cmd, i.Err, i.Owner, i.Data, i.Version)
	}
	return fmt.Sprintf("created cmd=%d", i.Cmd)
}
func (i written) String() string { return fmt.Sprintf("written cmd=%d err=%v", i.Cmd, i.Err) }
func (i deleted) String() string { return fmt.Sprintf("deleted cmd=%d err=%v", i.Cmd, i.Err) }
func (i watched) String() string {
	return fmt.Sprintf("watched cmd=%d exists=%t owner=%#x err=%v", i.Cmd, i.Exists, i.Owner, i.Err)
}
func (i fired) String() string { return fmt.Sprintf("watch cmd=%d %s", i.Cmd, i.Type) }

// command is a request the machine asks its shell to make.
type command interface {
	ID() uint64
	String() string
}

// create makes our ephemeral node with Data (and the group's missing
// parents, as containers); when it is there already it reads it.
type create struct {
	Cmd  uint64
	Path string
	Data []byte
}

// setData writes Data to our node.
type setData struct {
	Cmd  uint64
	Path string
	Data []byte
}

// remove deletes our node, or one our previous session left (Version:
// the version it was read at).
type remove struct {
	Cmd     uint64
	Path    string
	Version int32
}

// watchNode leaves a watch on our node: its deletion is seen.
type watchNode struct {
	Cmd  uint64
	Path string
}

func (c create) ID() uint64    { return c.Cmd }
func (c setData) ID() uint64   { return c.Cmd }
func (c remove) ID() uint64    { return c.Cmd }
func (c watchNode) ID() uint64 { return c.Cmd }

func (c create) String() string  { return fmt.Sprintf("create cmd=%d %s %q", c.Cmd, c.Path, c.Data) }
func (c setData) String() string { return fmt.Sprintf("set cmd=%d %s %q", c.Cmd, c.Path, c.Data) }
func (c remove) String() string {
	return fmt.Sprintf("delete cmd=%d %s v%d", c.Cmd, c.Path, c.Version)
}
func (c watchNode) String() string { return fmt.Sprintf("exists cmd=%d %s", c.Cmd, c.Path) }
