package group

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// transcript drives a member's machine with scripted inputs and records,
// for each input, the events, replies and commands it produced and the
// state after.
type transcript struct {
	*golden.Transcript
	m *machine
}

const node = "/g/x"

func newTranscript(t *testing.T, session int64) *transcript {
	m, err := newMachine(config{Path: "/g", ID: "x", Data: []byte("d1"), SessionID: session})
	if err != nil {
		t.Fatal(err)
	}
	tr := &transcript{m: m, Transcript: &golden.Transcript{T: t, State: m.State,
		Event: func(e events.Event) string {
			s := fmt.Sprintf("%s state=%s term=%d", e.Type, e.State, e.Term)
			if e.Node != "" {
				s += " " + e.Node
			}
			if e.Data != nil {
				s += fmt.Sprintf(" %q v%d", e.Data, e.Version)
			}
			return s
		},
	}}
	track(m.fsm)
	golden.Record(tr.Transcript, "(start)", m.Start())
	t.Cleanup(func() {
		if err := m.Bug(); err != nil {
			t.Errorf("an illegal transition: %v", err)
		}
	})
	return tr
}

func (tr *transcript) step(in input) runtime.Output[command] {
	out := tr.m.Step(in)
	golden.Record(tr.Transcript, in.String(), out)
	return out
}

// Join makes our node and watches it; SetData writes the latest data, one
// set at a time (two calls while one is in flight are one set, answered
// together); Leave deletes the node and ends the member.
func TestTranscriptJoinSetLeave(t *testing.T) {
	tr := newTranscript(t, 0x10)
	tr.step(joinCall{Req: 1})
	tr.step(created{Cmd: 1})
	tr.step(watched{Cmd: 2, Exists: true, Owner: 0x10})
	tr.step(setCall{Req: 2, Data: []byte("d2")})
	tr.step(setCall{Req: 3, Data: []byte("d3")})
	tr.step(fired{Cmd: 2, Type: zk.EventNodeDataChanged})
	tr.step(written{Cmd: 3, Version: 1})
	tr.step(setCall{Req: 4, Data: []byte("d4")})
	tr.step(watched{Cmd: 4, Exists: true, Owner: 0x10})
	tr.step(written{Cmd: 5, Version: 2})
	tr.step(leaveCall{Req: 5})
	tr.step(written{Cmd: 6, Version: 3})
	tr.step(deleted{Cmd: 7})
	tr.Check("join_set_leave")
}

// A create whose reply was lost: made again, it finds the node there,
// this session's, and takes it; its data is not the latest (a SetData
// came meanwhile), so the latest is written.
func TestTranscriptLostCreateReply(t *testing.T) {
	tr := newTranscript(t, 0x10)
	tr.step(joinCall{Req: 1})
	tr.step(created{Cmd: 1, Err: zk.ErrConnectionLoss})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: 0x10})
	tr.step(setCall{Req: 2, Data: []byte("d2")})
	tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: 0x10})
	tr.step(created{Cmd: 2, Err: zk.ErrNodeExists, Owner: 0x10, Data: []byte("d1")})
	tr.step(written{Cmd: 3, Version: 1})
	tr.Check("lost_create_reply")
}

// A disconnect: a set that failed with the connection is made again once
// it is back; nothing else is (the node and its watch lived).
func TestTranscriptDisconnect(t *testing.T) {
	tr := newTranscript(t, 0x10)
	tr.step(joinCall{Req: 1})
	tr.step(created{Cmd: 1})
	tr.step(watched{Cmd: 2, Exists: true, Owner: 0x10})
	tr.step(setCall{Req: 2, Data: []byte("d2")})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: 0x10})
	tr.step(written{Cmd: 3, Err: zk.ErrConnectionLoss})
	tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: 0x10})
	tr.step(written{Cmd: 4, Version: 1})
	tr.Check("disconnect")
}

// The session ends: our node went with it (MEMBER_LEFT, OFFER again); a
// SetData while there is no session is kept; once a new session is there
// the node is made again with the latest data, and the Set is answered.
// The old session's late replies and watches are ignored.
func TestTranscriptExpiry(t *testing.T) {
	tr := newTranscript(t, 0x10)
	tr.step(joinCall{Req: 1})
	tr.step(created{Cmd: 1})
	tr.step(watched{Cmd: 2, Exists: true, Owner: 0x10})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: 0x10})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: 0x10})
	tr.step(setCall{Req: 2, Data: []byte("d2")})
	tr.step(fired{Cmd: 2, Type: zk.EventNotWatching})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: 0x20})
	tr.step(created{Cmd: 3})
	tr.step(watched{Cmd: 4, Exists: true, Owner: 0x20})
	tr.Check("expiry")
}

// A node of a session of ours that ended, still there when we make ours
// again: deleted at the version read, and made again; one of another live
// session: not touched, ErrMemberExists, FAILED; SetData says so.
func TestTranscriptTaken(t *testing.T) {
	tr := newTranscript(t, 0x10)
	tr.step(joinCall{Req: 1})
	tr.step(created{Cmd: 1})
	tr.step(watched{Cmd: 2, Exists: true, Owner: 0x10})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: 0x10})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: 0x20})
	tr.step(created{Cmd: 3, Err: zk.ErrNodeExists, Owner: 0x10, Data: []byte("d1"), Version: 0})
	tr.step(deleted{Cmd: 4})
	tr.step(created{Cmd: 5})
	tr.step(watched{Cmd: 6, Exists: true, Owner: 0x20})
	// Deleted by someone, and theirs made at once.
	tr.step(fired{Cmd: 6, Type: zk.EventNodeDeleted})
	tr.step(created{Cmd: 7, Err: zk.ErrNodeExists, Owner: 0x99, Data: []byte("theirs")})
	tr.step(setCall{Req: 2, Data: []byte("d2")})
	tr.step(runtime.Shutdown{Req: 3})
	tr.Check("taken")
}

// A delete the server refuses (an ACL that does not let us delete our
// node: NoAuth): Leave gets the error, the member is FAILED with its node
// still there and makes nothing; SetData says so; Close tries the delete
// again, and gets the error too.
func TestTranscriptLeaveRefused(t *testing.T) {
	tr := newTranscript(t, 0x10)
	tr.step(joinCall{Req: 1})
	tr.step(created{Cmd: 1})
	tr.step(watched{Cmd: 2, Exists: true, Owner: 0x10})
	tr.step(leaveCall{Req: 2})
	tr.step(deleted{Cmd: 3, Err: zk.ErrNoAuth})
	tr.step(setCall{Req: 3, Data: []byte("d2")})
	tr.step(runtime.Shutdown{Req: 4})
	tr.step(deleted{Cmd: 4, Err: zk.ErrNoAuth})
	tr.Check("leave_refused")
}

// Join when the id is another's: Join gets ErrMemberExists; Close then
// deletes nothing.
func TestTranscriptJoinRefused(t *testing.T) {
	tr := newTranscript(t, 0x10)
	tr.step(joinCall{Req: 1})
	tr.step(created{Cmd: 1, Err: zk.ErrNodeExists, Owner: 0x99, Data: []byte("theirs")})
	tr.step(runtime.Shutdown{Req: 2})
	tr.Check("join_refused")
}

// Close while our create is in flight: once it is answered the node is
// deleted. Close when the connection is down: the handover gives the
// node to the janitor. A closed connection ends the member.
func TestTranscriptClose(t *testing.T) {
	tr := newTranscript(t, 0x10)
	tr.step(joinCall{Req: 1})
	tr.step(runtime.Cancel{Req: 1})
	tr.step(runtime.Shutdown{Req: 2})
	tr.step(created{Cmd: 1})
	tr.step(deleted{Cmd: 2})
	tr2 := newTranscript(t, 0x10)
	tr2.step(joinCall{Req: 1})
	tr2.step(created{Cmd: 1})
	tr2.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: 0x10})
	tr2.step(runtime.Shutdown{Req: 2})
	out := tr2.step(runtime.Handover{Req: 3})
	if l, _ := out.Replies[0].Value.(runtime.Leftovers); out.Replies[0].Req != 3 || l.Session != 0x10 || len(l.Nodes) != 1 || l.Nodes[0] != node {
		t.Errorf("leftovers %+v", out.Replies)
	}
	tr3 := newTranscript(t, 0)
	tr3.step(runtime.SessionChange{State: zk.StateConnected, SessionID: 0x10})
	tr3.step(joinCall{Req: 1})
	tr3.step(runtime.SessionChange{State: zk.StateClosed})
	tr4 := newTranscript(t, 0)
	tr4.step(runtime.Shutdown{Req: 1})
	tr.Append("--- Close while cut off\n" + tr2.String() + "--- the connection closed\n" + tr3.String() +
		"--- closed before Join, with no session yet\n" + tr4.String())
	tr.Check("close")
}
