package cache

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/golden"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// transcript drives a machine with scripted inputs and records, for each
// input, the events, replies and commands it produced and the state after.
type transcript struct {
	*golden.Transcript
	m *machine
}

func newTranscript(t *testing.T, cfg config) *transcript {
	cfg.Up, cfg.Data = true, true
	m, err := newMachine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &transcript{m: m, Transcript: &golden.Transcript{T: t, State: m.State,
		Event: func(e events.Event) string {
			s := fmt.Sprintf("%s state=%s", e.Type, e.State)
			if e.Node != "" {
				s += fmt.Sprintf(" %s %q v%d", e.Node, e.Data, e.Version)
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

func st(czxid, mzxid int64, version int32) zk.Stat {
	return zk.Stat{Czxid: czxid, Mzxid: mzxid, Version: version}
}

// The first load of a tree: the root, its listing, its children (each
// read, then listed, up to the depth), pipelined; INITIALIZED once all
// are in, and an Initialized call waiting for it is answered.
func TestTranscriptFirstLoad(t *testing.T) {
	tr := newTranscript(t, config{Path: "/s", MaxDepth: 1})
	tr.step(initCall{Req: 1})
	tr.step(dataRead{Cmd: 1, Data: []byte("root"), Stat: st(1, 1, 0)})
	tr.step(kidsRead{Cmd: 2, Names: []string{"b", "a"}, Stat: st(1, 1, 0)})
	tr.step(dataRead{Cmd: 4, Data: []byte("B"), Stat: st(3, 3, 0)})
	out := tr.step(dataRead{Cmd: 3, Data: []byte("A"), Stat: st(2, 2, 0)})
	if len(out.Replies) != 1 {
		t.Errorf("Initialized not answered: %+v", out.Replies)
	}
	tr.step(initCall{Req: 2})
	tr.Check("first_load")
}

// Watches after the load: a set is read again and published as an
// update; a child's deletion, seen by its data watch first, is a remove
// (the parent's listing then agrees); a new child is read and added; two
// sets seen as one watch are one update with the later data.
func TestTranscriptChanges(t *testing.T) {
	tr := newTranscript(t, config{Path: "/s", MaxDepth: 1})
	tr.step(dataRead{Cmd: 1, Data: []byte("root"), Stat: st(1, 1, 0)})
	tr.step(kidsRead{Cmd: 2, Names: []string{"a", "b"}, Stat: st(1, 1, 0)})
	tr.step(dataRead{Cmd: 3, Data: []byte("A"), Stat: st(2, 2, 0)})
	tr.step(dataRead{Cmd: 4, Data: []byte("B"), Stat: st(3, 3, 0)})
	tr.step(fired{Cmd: 3, Path: "/s/a", Type: zk.EventNodeDataChanged})
	tr.step(dataRead{Cmd: 5, Data: []byte("A3"), Stat: st(2, 7, 2)})
	tr.step(fired{Cmd: 4, Path: "/s/b", Type: zk.EventNodeDeleted})
	tr.step(fired{Cmd: 2, Path: "/s", Type: zk.EventNodeChildrenChanged})
	tr.step(kidsRead{Cmd: 6, Names: []string{"a", "c"}, Stat: st(1, 1, 0)})
	tr.step(dataRead{Cmd: 7, Data: []byte("C"), Stat: st(9, 9, 0)})
	tr.Check("changes")
}

// An absent root is waited for (an exists watch) and the cache is
// initialized empty; its creation is read and added; its deletion removes
// it and what is under it, children first, and it is waited for again.
func TestTranscriptAbsentRoot(t *testing.T) {
	tr := newTranscript(t, config{Path: "/s", MaxDepth: 1})
	tr.step(dataRead{Cmd: 1, Err: zk.ErrNoNode})
	tr.step(existsRead{Cmd: 2, Exists: false})
	tr.step(fired{Cmd: 2, Path: "/s", Type: zk.EventNodeCreated})
	tr.step(dataRead{Cmd: 3, Data: []byte("root"), Stat: st(5, 5, 0)})
	tr.step(kidsRead{Cmd: 4, Names: []string{"a"}, Stat: st(5, 5, 0)})
	tr.step(dataRead{Cmd: 5, Data: []byte("A"), Stat: st(6, 6, 0)})
	tr.step(fired{Cmd: 3, Path: "/s", Type: zk.EventNodeDeleted})
	tr.step(existsRead{Cmd: 6, Exists: false})
	tr.Check("absent_root")
}

// A connection loss: the requests it failed are made again once the
// connection is back, nothing else; the watches survived.
func TestTranscriptDisconnect(t *testing.T) {
	tr := newTranscript(t, config{Path: "/s", MaxDepth: 1})
	tr.step(dataRead{Cmd: 1, Data: []byte("root"), Stat: st(1, 1, 0)})
	tr.step(kidsRead{Cmd: 2, Names: []string{"a", "b"}, Stat: st(1, 1, 0)})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: 1})
	tr.step(dataRead{Cmd: 3, Err: zk.ErrConnectionLoss})
	tr.step(dataRead{Cmd: 4, Data: []byte("B"), Stat: st(3, 3, 0)})
	tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: 1})
	tr.step(dataRead{Cmd: 5, Data: []byte("A"), Stat: st(2, 2, 0)})
	tr.step(fired{Cmd: 4, Path: "/s/b", Type: zk.EventNodeDataChanged})
	tr.step(dataRead{Cmd: 6, Data: []byte("B2"), Stat: st(3, 8, 1)})
	tr.Check("disconnect")
}

// A session's end: once a new session is there every node is read again;
// only what differs is published (b changed, c is new, d went; a, the
// same, is not; e, deleted and made again, is removed and added).
func TestTranscriptExpiry(t *testing.T) {
	tr := newTranscript(t, config{Path: "/s", MaxDepth: 1})
	tr.step(dataRead{Cmd: 1, Data: []byte("root"), Stat: st(1, 1, 0)})
	tr.step(kidsRead{Cmd: 2, Names: []string{"a", "b", "d", "e"}, Stat: st(1, 1, 0)})
	tr.step(dataRead{Cmd: 3, Data: []byte("A"), Stat: st(2, 2, 0)})
	tr.step(dataRead{Cmd: 4, Data: []byte("B"), Stat: st(3, 3, 0)})
	tr.step(dataRead{Cmd: 5, Data: []byte("D"), Stat: st(4, 4, 0)})
	tr.step(dataRead{Cmd: 6, Data: []byte("E"), Stat: st(5, 5, 0)})
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: 1})
	tr.step(runtime.SessionChange{State: zk.StateLost, SessionID: 1})
	tr.step(fired{Cmd: 3, Path: "/s/a", Type: zk.EventNotWatching})
	tr.step(runtime.SessionChange{State: zk.StateConnected, SessionID: 2})
	tr.step(dataRead{Cmd: 7, Data: []byte("root"), Stat: st(1, 1, 0)})
	tr.step(dataRead{Cmd: 8, Data: []byte("A"), Stat: st(2, 2, 0)})
	tr.step(dataRead{Cmd: 9, Data: []byte("B2"), Stat: st(3, 9, 1)})
	tr.step(dataRead{Cmd: 10, Err: zk.ErrNoNode})
	tr.step(dataRead{Cmd: 11, Data: []byte("E"), Stat: st(12, 12, 0)})
	tr.step(kidsRead{Cmd: 12, Names: []string{"a", "b", "c", "e"}, Stat: st(1, 1, 0)})
	tr.step(dataRead{Cmd: 13, Data: []byte("C"), Stat: st(11, 11, 0)})
	tr.Check("expiry")
}

// Replies about different paths reach the machine in any order: a child
// read absent by a request made before its parent's latest listing was
// applied, a listing that names it, is read again, not dropped; a node
// missing from a listing made before its last read was applied is read
// again before it is removed.
func TestTranscriptCrossedReplies(t *testing.T) {
	tr := newTranscript(t, config{Path: "/s", MaxDepth: 1})
	tr.step(dataRead{Cmd: 1, Data: []byte("root"), Stat: st(1, 1, 0)})
	tr.step(kidsRead{Cmd: 2, Names: []string{"a"}, Stat: st(1, 1, 0)})
	tr.step(dataRead{Cmd: 3, Data: []byte("A"), Stat: st(2, 2, 0)})
	tr.step(fired{Cmd: 2, Path: "/s", Type: zk.EventNodeChildrenChanged}) // a deleted, made again
	tr.step(fired{Cmd: 3, Path: "/s/a", Type: zk.EventNodeDataChanged})
	tr.step(kidsRead{Cmd: 4, Names: []string{"a"}, Stat: st(1, 1, 0)}) // names the new a
	tr.step(dataRead{Cmd: 5, Err: zk.ErrNoNode})                       // made before: a was away
	tr.step(dataRead{Cmd: 6, Data: []byte("A'"), Stat: st(8, 8, 0)})
	// b comes; a listing made before b's read was applied does not name it.
	tr.step(fired{Cmd: 4, Path: "/s", Type: zk.EventNodeChildrenChanged})
	tr.step(kidsRead{Cmd: 7, Names: []string{"a", "b"}, Stat: st(1, 1, 0)})
	tr.step(fired{Cmd: 7, Path: "/s", Type: zk.EventNodeChildrenChanged})
	tr.step(dataRead{Cmd: 8, Data: []byte("B"), Stat: st(9, 9, 0)})
	tr.step(kidsRead{Cmd: 9, Names: []string{"a"}, Stat: st(1, 1, 0)})
	tr.step(dataRead{Cmd: 10, Data: []byte("B"), Stat: st(9, 9, 0)})
	tr.Check("crossed_replies")
}

// Close answers a waiting Initialized with ErrClosed; so does a closed
// connection. A children cache publishes its children, not its node.
func TestTranscriptClose(t *testing.T) {
	tr := newTranscript(t, config{Path: "/s", MaxDepth: 1, HideRoot: true})
	tr.step(initCall{Req: 1})
	tr.step(dataRead{Cmd: 1, Data: []byte("root"), Stat: st(1, 1, 0)})
	tr.step(runtime.Shutdown{Req: 2})
	tr2 := newTranscript(t, config{Path: "/s", MaxDepth: 1, HideRoot: true})
	tr2.step(dataRead{Cmd: 1, Data: []byte("root"), Stat: st(1, 1, 0)})
	tr2.step(kidsRead{Cmd: 2, Names: []string{"a"}, Stat: st(1, 1, 0)})
	tr2.step(dataRead{Cmd: 3, Data: []byte("A"), Stat: st(2, 2, 0)})
	tr2.step(runtime.SessionChange{State: zk.StateClosed})
	tr.Append("--- a children cache, its connection closed\n" + tr2.String())
	tr.Check("close")
}
