package contention

import (
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/runtime"
)

// newRevocableTranscript is a transcript of a revocable lock's machine,
// holding from its third step: node …07, token 0x42, and its data read
// (ReadData cmd=3) asked for.
func newRevocableTranscript(t *testing.T, suspendedIsLost bool) *transcript {
	t.Helper()
	tr := newTranscriptWith(t, Config{Dir: "/app/lock", SuspendedIsLost: suspendedIsLost, Revocable: true})
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/lock/_c_uuid1-lock-0000000007"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000007"}, Own: own(0x42), OwnExists: true})
	if c, ok := only[readData](out); !ok || c.Path != "/app/lock/_c_uuid1-lock-0000000007" {
		t.Fatalf("the grant reads its node's data: %v", out.Commands)
	}
	return tr
}

const ourNode = "/app/lock/_c_uuid1-lock-0000000007"

func revoked(out output) bool {
	return slices.Equal(out.Revoked, []uint64{1}) &&
		slices.ContainsFunc(out.Events, func(e events.Event) bool { return e.Type == events.RevokeRequested })
}

// A data change re-reads and re-arms; the request is signalled once; the
// holder goes on holding until it releases; later events are stale.
func TestTranscriptRevokeWhileHolding(t *testing.T) {
	tr := newRevocableTranscript(t, true)
	if out := tr.step(dataRead{Cmd: 3, Data: nil}); len(out.Revoked)+len(out.Commands) != 0 {
		t.Fatalf("an empty node is no revocation: %+v", out)
	}
	out := tr.step(fired{What: dataChanged, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDataChanged, Path: ourNode}})
	if c, ok := only[readData](out); !ok || c.Cmd != 4 {
		t.Fatalf("a data change reads again: %v", out.Commands)
	}
	tr.step(dataRead{Cmd: 4, Data: []byte("something else")})
	tr.step(fired{What: dataChanged, Cmd: 4, Event: zk.WatchEvent{Type: zk.EventNodeDataChanged, Path: ourNode}})
	if out := tr.step(dataRead{Cmd: 5, Data: []byte(RevokeMessage)}); !revoked(out) {
		t.Fatalf("__REVOKE__ is a revocation request: %+v", out)
	}
	if tr.m.State() != events.StateLeader {
		t.Fatal("a revocation request took the grant")
	}
	out = tr.step(fired{What: dataChanged, Cmd: 5, Event: zk.WatchEvent{Type: zk.EventNodeDataChanged, Path: ourNode}})
	if len(out.Revoked)+len(out.Commands)+len(out.Events) != 0 {
		t.Fatalf("after the request nothing more is read or said: %+v", out)
	}
	tr.step(Release{Req: 2})
	tr.step(done{What: deleted, Cmd: 6})
	tr.check("revoke_while_holding")
}

// Data written before the grant ("unlock", ZooKeeper's recipe word) is a
// request the first read sees.
func TestTranscriptRevokeRequestedBeforeTheGrant(t *testing.T) {
	tr := newRevocableTranscript(t, true)
	if out := tr.step(dataRead{Cmd: 3, Data: []byte(UnlockMessage)}); !revoked(out) {
		t.Fatalf("unlock is a revocation request: %+v", out)
	}
	tr.step(Release{Req: 2})
	tr.check("revoke_before_grant")
}

// A read whose reply is lost is made again once the connection is back
// (a hold that survives SUSPENDED), and its answer still counts; after
// the release a late reply is stale.
func TestTranscriptRevokeAcrossAConnectionLoss(t *testing.T) {
	tr := newRevocableTranscript(t, false)
	tr.step(runtime.SessionChange{State: zk.StateSuspended, SessionID: sess})
	if out := tr.step(dataRead{Cmd: 3, Err: zk.ErrConnectionLoss}); len(out.Commands) != 0 {
		t.Fatalf("a read while disconnected waits for the connection: %v", out.Commands)
	}
	out := tr.step(runtime.SessionChange{State: zk.StateReconnected, SessionID: sess})
	if c, ok := only[readData](out); !ok || c.Cmd != 3 {
		t.Fatalf("the read is made again on RECONNECTED: %v", out.Commands)
	}
	if out := tr.step(dataRead{Cmd: 3, Data: []byte(RevokeMessage)}); !revoked(out) {
		t.Fatalf("the request after the reconnect: %+v", out)
	}
	tr.step(Release{Req: 2})
	out = tr.step(fired{What: dataChanged, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: ourNode}})
	if len(out.Revoked)+len(out.Commands)+len(out.Events) != 0 {
		t.Fatalf("the watch's end after the release: %+v", out)
	}
	tr.check("revoke_across_connection_loss")
}

// After the release, a request that arrives is nobody's: the term is over.
func TestTranscriptRevokeAfterRelease(t *testing.T) {
	tr := newRevocableTranscript(t, true)
	tr.step(dataRead{Cmd: 3})
	tr.step(Release{Req: 2})
	out := tr.step(fired{What: dataChanged, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDataChanged, Path: ourNode}})
	if len(out.Revoked)+len(out.Commands)+len(out.Events) != 0 {
		t.Fatalf("a data change after the release: %+v", out)
	}
	tr.check("revoke_after_release")
}

// Without Config.Revocable a grant reads nothing more.
func TestNotRevocableReadsNoData(t *testing.T) {
	tr := newTranscript(t, true)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: ourNode})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-lock-0000000007"}, Own: own(0x42), OwnExists: true})
	if len(out.Commands) != 0 {
		t.Fatalf("a grant that is not revocable sends %v", out.Commands)
	}
}

func TestIsRevokeRequest(t *testing.T) {
	for data, want := range map[string]bool{"__REVOKE__": true, "unlock": true, "": false, "__revoke__": false, "unlock\n": false} {
		if got := IsRevokeRequest([]byte(data)); got != want {
			t.Errorf("IsRevokeRequest(%q) = %t", data, got)
		}
	}
}
