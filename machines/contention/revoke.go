package contention

import (
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
)

// The data that asks a revocable holder (Config.Revocable) to give up:
// Curator's Revoker writes RevokeMessage; ZooKeeper's recipe text says
// UnlockMessage. A holder honours both.
const (
	RevokeMessage = "__REVOKE__"
	UnlockMessage = "unlock"
)

// IsRevokeRequest reports whether data, a holder's node's data, asks it to
// give up.
func IsRevokeRequest(data []byte) bool {
	return string(data) == RevokeMessage || string(data) == UnlockMessage
}

// readData reads Path's data and leaves a one-shot data watch on it
// (Config.Revocable: a holder watches its own node). Replies: dataRead,
// then dataChanged when the watch fires.
type readData struct {
	cmdID
	Path string
}

// dataRead is the reply to readData.
type dataRead struct {
	Cmd  uint64
	Data []byte
	Err  error
}

func (c readData) String() string {
	return fmt.Sprintf("ReadData cmd=%d path=%s", c.Cmd, c.Path)
}

func (i dataRead) String() string {
	return fmt.Sprintf("DataRead cmd=%d data=%q%s", i.Cmd, i.Data, errText(i.Err))
}

// readData reads the data of t's node with a watch, beside the term's
// progress (the term holds).
func (m *machine) readData(t *term) {
	t.dataWatch = m.nextCmd()
	m.send(&request{cmd: readData{cmdID: cmdID{t.dataWatch}, Path: t.node}, term: t, aside: true})
}

// live returns the term a readData's reply or event is for, nil when it is
// stale (the term ended, or a later read replaced it).
func (m *machine) live(cmd uint64) *term {
	if t := m.term; t != nil && t.dataWatch == cmd && m.State() == events.StateLeader {
		return t
	}
	return nil
}

func (m *machine) dataRead(in dataRead) {
	r, _ := m.take(in.Cmd)
	t := m.live(in.Cmd)
	switch {
	case r == nil || t == nil:
	case errors.Is(in.Err, zk.ErrConnectionLoss):
		m.send(r) // again once connected: the watch was not left
	case in.Err != nil:
		// NoNode: our node is gone, which the watch on it reports;
		// anything else ends the session, which LOST reports.
		t.dataWatch = 0
	case IsRevokeRequest(in.Data):
		// Tell the holder it is asked to give up: once, for the watch is
		// not armed again (dataWatch 0 makes later answers stale).
		t.revoked = true
		t.dataWatch = 0
		m.emit(events.RevokeRequested, nil)
		m.out.Revoked = append(m.out.Revoked, t.n)
	}
}

// dataChanged re-reads our node's data when it changed, which re-arms the
// watch; once revocation was requested there is nothing more to learn.
func (m *machine) dataChanged(in fired) {
	t := m.live(in.Cmd)
	if t == nil {
		return
	}
	t.dataWatch = 0
	if in.Event.Type == zk.EventNodeDataChanged && !t.revoked {
		m.readData(t)
	}
}
