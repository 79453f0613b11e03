package contention

import (
	"testing"
)

// Leases(2): a holder goes between the listing that made the third
// contender wait and the watches it sets after it. No event will tell of
// it; the check that sets the watches finds it gone: it holds at once.
func TestTranscriptLeasesReleaseBeforeTheWatch(t *testing.T) {
	tr := newTranscriptWith(t, Config{Dir: "/app/sem", Markers: []string{"lock-"}, Predicate: Leases(2)})
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/sem/_c_uuid1-lock-0000000002"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_uuid1-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	out := tr.step(nodesChecked{Cmd: 3, Exists: []bool{false, true}})
	if len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("a holder gone before the watch: want a grant, got %+v", out)
	}
	tr.check("leases_release_before_the_watch")
}

// Leases(2): the waiter ahead (watched for its promotion) was promoted, or
// went, before the watch was set: the watch's reply says so, and the
// waiter lists again at once.
func TestTranscriptLeasesPromotedBeforeTheWatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    watching
	}{
		{"promoted", watching{Cmd: 3, Exists: true, Held: true}},
		{"gone", watching{Cmd: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTranscriptWith(t, Config{Dir: "/app/sem", Markers: []string{"lock-"}, Predicate: Leases(2)})
			tr.step(Acquire{Req: 1})
			tr.step(created{Cmd: 1, Path: "/app/sem/_c_uuid1-lock-0000000003"})
			tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_c-lock-0000000002", "_c_uuid1-lock-0000000003"}, Own: own(0x50), OwnExists: true})
			out := tr.step(tc.w)
			if l, ok := only[listDir](out); !ok || !l.Relist || len(out.Replies) != 0 {
				t.Fatalf("want the directory listed again and no grant, got %+v", out)
			}
		})
	}
}
