package contention

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Leases(2): a holder goes between the listing that made the third
// contender wait and the directory watch it set after it. No event will
// tell of it, so the children the watch was set with do: it holds at once.
func TestTranscriptLeasesReleaseBeforeTheWatch(t *testing.T) {
	tr := newTranscriptWith(t, Config{Dir: "/app/sem", Markers: []string{"lock-"}, Predicate: Leases(2)})
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/sem/_c_uuid1-lock-0000000002"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_uuid1-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	out := tr.step(watching{Cmd: 3, Exists: true, Children: []string{"_c_b-lock-0000000001", "_c_uuid1-lock-0000000002"}})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("a holder gone before the watch: want a grant with no more requests, got %+v", out)
	}
	// The watch's later event finds no waiting term.
	if out := tr.step(watchFired{Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeChildrenChanged, Path: "/app/sem"}}); len(out.Commands) != 0 || len(out.Replies) != 0 {
		t.Fatalf("a stale directory event acted: %+v", out)
	}
	tr.check("leases_release_before_the_watch")
}

// Leases(2): by the time the directory's watch is set, our node is gone
// (deleted by someone else, or with the directory). The few children
// left are no grant: the waiter reads again, finds its node gone, and
// fails.
func TestTranscriptLeasesOwnNodeGoneBeforeTheWatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    watching
		read dirListed
	}{
		{"node deleted", watching{Cmd: 3, Exists: true, Children: []string{"_c_b-lock-0000000001"}}, dirListed{Cmd: 4, Children: []string{"_c_b-lock-0000000001"}}},
		{"directory deleted", watching{Cmd: 3}, dirListed{Cmd: 4, Err: zk.ErrNoNode}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTranscriptWith(t, Config{Dir: "/app/sem", Markers: []string{"lock-"}, Predicate: Leases(2)})
			tr.step(Acquire{Req: 1})
			tr.step(created{Cmd: 1, Path: "/app/sem/_c_uuid1-lock-0000000002"})
			tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_uuid1-lock-0000000002"}, Own: own(0x50), OwnExists: true})
			out := tr.step(tc.w)
			if l, ok := only[listDir](out); !ok || !l.Relist || len(out.Replies) != 0 {
				t.Fatalf("want the directory read again and no grant, got %+v", out)
			}
			out = tr.step(tc.read)
			if len(out.Replies) != 1 || out.Replies[0].Err != testErrors.NodeDeleted {
				t.Fatalf("want the waiter failed with NodeDeleted, got %+v", out.Replies)
			}
		})
	}
}
