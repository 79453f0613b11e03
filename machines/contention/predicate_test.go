package contention

import (
	"errors"
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

const (
	rd = "__READ__"
	wr = "__WRIT__"
)

func newRWTranscript(t *testing.T) *transcript {
	return newTranscriptWith(t, Config{Dir: "/app/rw", Markers: []string{wr, rd}, Predicate: ReadWrite(rd)})
}

// granted reports whether out answers req with a grant, and makes no request.
func grantedAtOnce(out output, req uint64) bool {
	return len(out.Commands) == 0 && slices.ContainsFunc(out.Replies, func(r Reply) bool { return r.Req == req && r.Granted })
}

// only returns out's one command, if it is the only one and a C.
func only[C command](out output) (C, bool) {
	var c C
	if len(out.Commands) != 1 {
		return c, false
	}
	c, ok := out.Commands[0].(C)
	return c, ok
}

// A reader behind readers holds at once: readers do not exclude readers.
func TestTranscriptReaderBehindReaders(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1, Marker: rd})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__READ__0000000003"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-__READ__0000000001", "_c_b-__READ__0000000002", "_c_uuid1-__READ__0000000003"}, Own: own(0x50), OwnExists: true})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("a reader behind readers: want a grant at once, got %+v", out)
	}
	tr.check("rw_reader_behind_readers")
}

// Two writers and four readers interleaved (the shape that deadlocked
// kazoo): our reader waits for the writers below it, never for the writer
// above it. It watches the deletion of each (one round), not the last
// one's mark (other readers watch that mark, so it could not be fired
// safely were the writer to go without it), and holds when the last goes,
// with no read.
func TestTranscriptReaderWatchesEachWriterBelow(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1, Marker: rd})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__READ__0000000004"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{
		"_c_w0-__WRIT__0000000000", "_c_r1-__READ__0000000001", "_c_w2-__WRIT__0000000002",
		"_c_r3-__READ__0000000003", "_c_uuid1-__READ__0000000004", "_c_w5-__WRIT__0000000005", "_c_r6-__READ__0000000006",
	}, Own: own(0x50), OwnExists: true})
	if c, ok := only[checkNodes](out); !ok || !slices.Equal(c.Paths, []string{"/app/rw/_c_w0-__WRIT__0000000000", "/app/rw/_c_w2-__WRIT__0000000002"}) {
		t.Fatalf("want the writers below (w0, w2) watched, got %+v", out.Commands)
	}
	tr.step(nodesChecked{Cmd: 3, Exists: []bool{true, true}})
	out = tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_w0-__WRIT__0000000000"}})
	if len(out.Replies)+len(out.Commands) != 0 {
		t.Fatalf("w2 still below: want nothing yet, got %+v", out)
	}
	out = tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_w2-__WRIT__0000000002"}})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("want a grant with no read once both are gone, got %+v", out)
	}
	tr.check("rw_reader_watches_each_writer_below")
}

// A writer behind readers alone: they all hold and go in any order, so it
// watches each of them (a check that leaves a watch on each) and holds
// when the last goes, with no read.
func TestTranscriptWriterBehindReaders(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__WRIT__0000000003"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_r1-__READ__0000000001", "_c_r2-__READ__0000000002", "_c_uuid1-__WRIT__0000000003"}, Own: own(0x50), OwnExists: true})
	if c, ok := only[checkNodes](out); !ok || len(c.Paths) != 2 {
		t.Fatalf("want both readers watched, got %+v", out.Commands)
	}
	tr.step(nodesChecked{Cmd: 3, Exists: []bool{true, true}})
	out = tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_r2-__READ__0000000002"}})
	if len(out.Replies)+len(out.Commands) != 0 {
		t.Fatalf("one reader left below: want nothing yet, got %+v", out)
	}
	out = tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_r1-__READ__0000000001"}})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("want a grant with no read once both are gone, got %+v", out)
	}
	tr.check("rw_writer_behind_readers")
}

// A writer behind a writer that went with no mark (a plain delete: a
// downgrading writer's release, a waiter that gave up, Curator) looks
// again (one listing) before it holds: the writer may have left a reader
// at its sequence, below ours. Here the listing finds one, and the writer
// waits for it.
func TestTranscriptWriterBehindWriterRereads(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__WRIT__0000000002"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_w1-__WRIT__0000000001", "_c_uuid1-__WRIT__0000000002"}, Own: own(0x50), OwnExists: true})
	tr.step(watching{Cmd: 3, Exists: true})
	out := tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_w1-__WRIT__0000000001"}})
	if l, ok := only[listDir](out); !ok || !l.Relist {
		t.Fatalf("want the directory listed again, got %+v", out.Commands)
	}
	out = tr.step(dirListed{Cmd: 4, Children: []string{"_c_w1-__READ__0000000001", "_c_uuid1-__WRIT__0000000002"}})
	if len(out.Replies) != 0 || len(out.Commands) != 1 || out.Commands[0].(watchNode).Path != "/app/rw/_c_w1-__READ__0000000001" {
		t.Fatalf("want a watch on the downgraded reader, got %+v", out)
	}
	tr.step(watching{Cmd: 5, Exists: true})
	out = tr.step(fired{What: watchFired, Cmd: 5, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_w1-__READ__0000000001"}})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("want a grant once the reader is gone, got %+v", out)
	}
	// w1 went without its mark: our watch on it waits in vain. The release
	// fires it (we are w1's successor, its mark's only watcher).
	out = tr.step(Release{Req: 2})
	if d, ok := only[deleteNode](out); !ok || !slices.Equal(d.Fire, []string{ReleaseMark("/app/rw/_c_w1-__WRIT__0000000001")}) {
		t.Fatalf("want the release to fire w1's mark, got %+v", out.Commands)
	}
	tr.check("rw_writer_behind_writer_rereads")
}

// A writer behind a writer that left with its release mark holds with no
// read: a writer releases with the mark only when it leaves no reader of
// its own beside it (a downgrade's release is plain, Release.NoMark).
func TestTranscriptWriterBehindMarkedWriterHolds(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__WRIT__0000000002"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_w1-__WRIT__0000000001", "_c_uuid1-__WRIT__0000000002"}, Own: own(0x50), OwnExists: true})
	tr.step(watching{Cmd: 3, Exists: true})
	out := tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeCreated, Path: ReleaseMark("/app/rw/_c_w1-__WRIT__0000000001")}})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("want a grant with no read, got %+v", out)
	}
	tr.check("rw_writer_behind_marked_writer_holds")
}

// A held writer released with NoMark deletes its node plainly.
func TestTranscriptReleaseNoMark(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__WRIT__0000000001"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_uuid1-__WRIT__0000000001"}, Own: own(0x50), OwnExists: true})
	out := tr.step(Release{Req: 2, NoMark: true})
	if d, ok := only[deleteNode](out); !ok || d.Release {
		t.Fatalf("want a plain delete, got %+v", out.Commands)
	}
	tr.check("rw_release_no_mark")
}

// A writer behind a reader lists the directory again when the reader goes
// and a writer is among the other nodes it saw below: that writer, if
// gone, may have downgraded to a reader at its own sequence, below ours,
// which no check of what we saw can find. One listing shows both what is
// left and any such reader; the writer waits for it.
func TestTranscriptWriterListsWhenAWriterIsAmongTheRest(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__WRIT__0000000003"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_w1-__WRIT__0000000001", "_c_r2-__READ__0000000002", "_c_uuid1-__WRIT__0000000003"}, Own: own(0x50), OwnExists: true})
	if out := tr.step(watching{Cmd: 3, Exists: true}); len(out.Commands) != 0 {
		t.Fatalf("want nothing until the reader goes, got %+v", out.Commands)
	}
	out := tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_r2-__READ__0000000002"}})
	if l, ok := only[listDir](out); !ok || !l.Relist || len(out.Replies) != 0 {
		t.Fatalf("a writer among the rest: want the directory listed again and no grant, got %+v", out)
	}
	out = tr.step(dirListed{Cmd: 4, Children: []string{"_c_w1-__READ__0000000001", "_c_uuid1-__WRIT__0000000003"}})
	if w, ok := only[watchNode](out); !ok || w.Path != "/app/rw/_c_w1-__READ__0000000001" {
		t.Fatalf("want a watch on the downgraded reader, got %+v", out)
	}
	tr.check("rw_writer_lists_when_a_writer_is_among_the_rest")
}

// Leases(2): a third contender is the first waiter: it watches both
// holders (a check that leaves a watch on each) and holds when either
// goes, with no read; having waited, it marks its node promoted for the
// waiter behind it.
func TestTranscriptLeases(t *testing.T) {
	tr := newTranscriptWith(t, Config{Dir: "/app/sem", Markers: []string{"lock-"}, Predicate: Leases(2)})
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/sem/_c_uuid1-lock-0000000002"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_uuid1-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	if c, ok := only[checkNodes](out); !ok || len(c.Paths) != 2 {
		t.Fatalf("want both holders watched, got %+v", out.Commands)
	}
	tr.step(nodesChecked{Cmd: 3, Exists: []bool{true, true}})
	out = tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/sem/_c_b-lock-0000000001"}})
	if len(out.Replies) != 1 || !out.Replies[0].Granted {
		t.Fatalf("want a grant when a holder goes, got %+v", out)
	}
	if p, ok := only[promote](out); !ok || p.Node != "/app/sem/_c_uuid1-lock-0000000002" {
		t.Fatalf("want our node promoted, got %+v", out.Commands)
	}
	// The other holder's later deletion finds the term holding.
	if out := tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/sem/_c_a-lock-0000000000"}}); len(out.Commands)+len(out.Replies) != 0 {
		t.Fatalf("a stale holder's deletion acted: %+v", out)
	}
	tr.check("leases_2")
}

// Leases(2): a fourth contender waits behind the third (a waiter) on its
// data only; when the third is promoted to a holder, the fourth lists
// again, is now the first waiter, and watches the holders.
func TestTranscriptLeasesPromotion(t *testing.T) {
	tr := newTranscriptWith(t, Config{Dir: "/app/sem", Markers: []string{"lock-"}, Predicate: Leases(2)})
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/sem/_c_uuid1-lock-0000000003"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_c-lock-0000000002", "_c_uuid1-lock-0000000003"}, Own: own(0x50), OwnExists: true})
	if w, ok := only[watchNode](out); !ok || !w.Promotion || w.Path != "/app/sem/_c_c-lock-0000000002" {
		t.Fatalf("want the waiter ahead's promotion watched, got %+v", out.Commands)
	}
	tr.step(watching{Cmd: 3, Exists: true})
	out = tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDataChanged, Path: "/app/sem/_c_c-lock-0000000002"}})
	if l, ok := only[listDir](out); !ok || !l.Relist {
		t.Fatalf("want a listing once the waiter ahead holds, got %+v", out.Commands)
	}
	out = tr.step(dirListed{Cmd: 4, Children: []string{"_c_b-lock-0000000001", "_c_c-lock-0000000002", "_c_uuid1-lock-0000000003"}})
	if c, ok := only[checkNodes](out); !ok || len(c.Paths) != 2 {
		t.Fatalf("the first waiter now: want both holders watched, got %+v", out.Commands)
	}
	tr.step(nodesChecked{Cmd: 5, Exists: []bool{false, true}})
	tr.check("leases_promotion")
}

// waitFor is what DETERMINE decides from a listing, as the machine does
// it: the nodes below ours (serial order), the predicate's blockers of
// them, and what it watches: nothing when it holds; under leases, every
// holder ("holders") for the first waiter, else the waiter ahead; else the
// last blocker.
func waitFor(p Predicate, markers, children []string, ours string) (holds bool, watch string) {
	seq, _ := parseSeq(ours, markers)
	blockers := p.blockers(lower(children, markers, ours, seq, "/d"), "/d/"+ours)
	switch {
	case len(blockers) == 0:
		return true, ""
	case p.kind == leases && len(blockers) == p.leases:
		return false, "holders"
	case p.writerBehindReaders("/d/"+ours, blockers):
		return false, "readers"
	}
	return false, blockers[len(blockers)-1]
}

func TestPredicateWaitFor(t *testing.T) {
	rwm := []string{wr, rd}
	lm := []string{"lock-"}
	// The kazoo shape: two writers and four readers interleaved.
	kazoo := []string{"_c_w2-__WRIT__0000000002", "_c_r0-__READ__0000000000", "_c_r3-__READ__0000000003",
		"_c_w4-__WRIT__0000000004", "_c_r1-__READ__0000000001", "_c_r5-__READ__0000000005"}
	// Across the wrap: 2147483646 and 2147483647 come before -2147483648.
	wrapped := []string{"_c_r9-__READ__-2147483647", "_c_w8-__WRIT__-2147483648", "_c_r7-__READ__2147483647", "_c_w6-__WRIT__2147483646"}
	for _, tc := range []struct {
		name     string
		p        Predicate
		markers  []string
		children []string
		ours     string
		holds    bool
		watch    string
	}{
		{"exclusive first holds", Exclusive(), lm, []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001"}, "_c_a-lock-0000000000", true, ""},
		{"exclusive watches the one right below", Exclusive(), lm, []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_c-lock-0000000002"}, "_c_c-lock-0000000002", false, "/d/_c_b-lock-0000000001"},
		{"exclusive across the wrap", Exclusive(), lm, []string{"_c_c-lock--2147483648", "_c_a-lock-2147483646", "_c_b-lock-2147483647"}, "_c_c-lock--2147483648", false, "/d/_c_b-lock-2147483647"},
		{"exclusive first across the wrap", Exclusive(), lm, []string{"_c_c-lock--2147483648", "_c_b-lock-2147483647"}, "_c_b-lock-2147483647", true, ""},
		{"reader behind readers holds", ReadWrite(rd), rwm, kazoo, "_c_r1-__READ__0000000001", true, ""},
		{"reader behind a writer waits on it", ReadWrite(rd), rwm, kazoo, "_c_r3-__READ__0000000003", false, "/d/_c_w2-__WRIT__0000000002"},
		{"reader waits on the last writer below, not the one above", ReadWrite(rd), rwm, kazoo, "_c_r5-__READ__0000000005", false, "/d/_c_w4-__WRIT__0000000004"},
		{"writer behind readers watches each", ReadWrite(rd), rwm, kazoo, "_c_w2-__WRIT__0000000002", false, "readers"},
		{"writer behind a reader behind a writer", ReadWrite(rd), rwm, kazoo, "_c_w4-__WRIT__0000000004", false, "/d/_c_r3-__READ__0000000003"},
		{"first writer holds", ReadWrite(rd), rwm, []string{"_c_w0-__WRIT__0000000000", "_c_r1-__READ__0000000001"}, "_c_w0-__WRIT__0000000000", true, ""},
		{"reader across the wrap waits on the last writer below", ReadWrite(rd), rwm, wrapped, "_c_r9-__READ__-2147483647", false, "/d/_c_w8-__WRIT__-2147483648"},
		{"writer across the wrap waits on its predecessor", ReadWrite(rd), rwm, wrapped, "_c_w8-__WRIT__-2147483648", false, "/d/_c_r7-__READ__2147483647"},
		{"reader before the wrap behind a writer", ReadWrite(rd), rwm, wrapped, "_c_r7-__READ__2147483647", false, "/d/_c_w6-__WRIT__2147483646"},
		{"leases(2) second holds", Leases(2), lm, []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_c-lock-0000000002"}, "_c_b-lock-0000000001", true, ""},
		{"leases(2) third watches the holders", Leases(2), lm, []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_c-lock-0000000002"}, "_c_c-lock-0000000002", false, "holders"},
		{"leases(2) fourth watches the third", Leases(2), lm, []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_c-lock-0000000002", "_c_d-lock-0000000003"}, "_c_d-lock-0000000003", false, "/d/_c_c-lock-0000000002"},
		{"leases(2) second across the wrap holds", Leases(2), lm, []string{"_c_b-lock--2147483648", "_c_a-lock-2147483647"}, "_c_b-lock--2147483648", true, ""},
		{"leases(2) third across the wrap waits", Leases(2), lm, []string{"_c_c-lock--2147483647", "_c_b-lock--2147483648", "_c_a-lock-2147483647"}, "_c_c-lock--2147483647", false, "holders"},
		{"leases(1) is exclusive's count", Leases(1), lm, []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001"}, "_c_b-lock-0000000001", false, "holders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holds, watch := waitFor(tc.p, tc.markers, tc.children, tc.ours)
			if holds != tc.holds || watch != tc.watch {
				t.Errorf("%s: holds=%v watch=%q, want holds=%v watch=%q", tc.p, holds, watch, tc.holds, tc.watch)
			}
		})
	}
}

// afterGone and mustRelist: what a waiter does when a node below it goes.
func TestPredicateAfterGone(t *testing.T) {
	r, w, l := "/d/_c_r-__READ__0000000005", "/d/_c_w-__WRIT__0000000005", "/d/_c_x-lock-0000000005"
	pr, pw, pl := "/d/_c_p-__READ__0000000004", "/d/_c_p-__WRIT__0000000004", "/d/_c_p-lock-0000000004"
	for _, tc := range []struct {
		name             string
		p                Predicate
		ours, gone       string
		held             bool
		hold, relist     bool
		relistWhenCheckd bool
	}{
		{"exclusive: a holder gone, hold with no read", Exclusive(), l, pl, true, true, false, false},
		{"exclusive: a waiter gone, check the rest", Exclusive(), l, pl, false, false, false, false},
		{"reader behind a writer that held holds", ReadWrite(rd), r, pw, true, true, false, false},
		{"reader behind a writer that gave up checks", ReadWrite(rd), r, pw, false, false, false, false},
		{"writer behind a writer that left with its mark holds", ReadWrite(rd), w, pw, true, true, false, true},
		{"writer behind a writer gone plainly lists again", ReadWrite(rd), w, pw, false, false, true, true},
		{"writer behind a reader that held checks the rest", ReadWrite(rd), w, pr, true, false, false, false},
		{"writer behind a reader that gave up checks the rest", ReadWrite(rd), w, pr, false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold, relist := tc.p.afterGone(tc.ours, tc.gone, tc.held)
			if hold != tc.hold || relist != tc.relist {
				t.Errorf("afterGone = hold %v relist %v, want hold %v relist %v", hold, relist, tc.hold, tc.relist)
			}
			if got := tc.p.mustRelist(tc.ours, tc.gone); got != tc.relistWhenCheckd {
				t.Errorf("mustRelist = %v, want %v", got, tc.relistWhenCheckd)
			}
		})
	}
}

// Sequence numbers wrap at 2^31, and the names right after the wrap have
// an eleven-character suffix: contenders sort in serial order across it.
func TestContendersAcrossTheWrap(t *testing.T) {
	children := []string{"_c_c-lock--2147483647", "_c_ours-lock--2147483648", "junk", "_c_b-lock-2147483647", "_c_a-lock-2147483646"}
	want := []string{"_c_a-lock-2147483646", "_c_b-lock-2147483647", "_c_ours-lock--2147483648", "_c_c-lock--2147483647"}
	if got := Contenders(children, []string{"lock-"}); !slices.Equal(got, want) {
		t.Fatalf("Contenders across the wrap = %v, want %v", got, want)
	}
}

// ZooKeeper names a sequential node with %010d of its int32 counter: ten
// characters, eleven from -2^31 to -10^9 (right after the wrap).
func TestParseSeqAcrossTheWrap(t *testing.T) {
	markers := []string{"lock-", rd, wr}
	for _, tc := range []struct {
		name string
		seq  int32
		ok   bool
	}{
		{"_c_a-lock-0000000005", 5, true},
		{"_c_a-lock-2147483647", 2147483647, true},
		{"_c_a-lock--2147483648", -2147483648, true},
		{"_c_a-lock--1000000000", -1000000000, true},
		{"_c_a-lock--999999999", -999999999, true},
		{"_c_a-lock--000000001", -1, true},
		{"_c_a-__READ__-2147483647", -2147483647, true},
		{"_c_a-__WRIT__0000000003", 3, true},
		{"_c_a-latch-0000000005", 0, false},
		{"_c_a-lock-000000005", 0, false},
		{"_c_a-lock-2147483648", 0, false},
		{"_c_a-lock-0000000005.released", 0, false},
		{"lock-", 0, false},
	} {
		if seq, ok := parseSeq(tc.name, markers); seq != tc.seq || ok != tc.ok {
			t.Errorf("parseSeq(%q) = %d, %v; want %d, %v", tc.name, seq, ok, tc.seq, tc.ok)
		}
	}
}

func TestNewMachineValidatesItsConfig(t *testing.T) {
	invalid := errors.New("test: invalid option")
	ok := Config{Dir: "/d", Markers: []string{"lock-"}, NewID: func() string { return "u" }, Errors: Errors{InvalidOption: invalid}}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"no dir", func(c *Config) { c.Dir = "" }},
		{"relative dir", func(c *Config) { c.Dir = "d" }},
		{"no markers", func(c *Config) { c.Markers = nil }},
		{"empty marker", func(c *Config) { c.Markers = []string{""} }},
		{"no NewID", func(c *Config) { c.NewID = nil }},
		{"negative leases", func(c *Config) { c.Predicate = Leases(-1) }},
		{"no leases", func(c *Config) { c.Predicate = Leases(0) }},
		{"no readers' marker", func(c *Config) { c.Markers = []string{wr, rd}; c.Predicate = ReadWrite("") }},
		{"readers' marker not among the markers", func(c *Config) { c.Markers = []string{wr}; c.Predicate = ReadWrite(rd) }},
		{"readers' marker alone", func(c *Config) { c.Markers = []string{rd}; c.Predicate = ReadWrite(rd) }},
	} {
		cfg := ok
		tc.edit(&cfg)
		if _, err := newMachine(cfg); !errors.Is(err, invalid) {
			t.Errorf("%s: newMachine = %v, want an error matching the recipe's InvalidOption", tc.name, err)
		}
	}
	for _, p := range []Predicate{Exclusive(), Leases(1), Leases(3)} {
		cfg := ok
		cfg.Predicate = p
		if _, err := newMachine(cfg); err != nil {
			t.Errorf("a valid config with %s: %v", p, err)
		}
	}
	rw := ok
	rw.Markers, rw.Predicate = []string{wr, rd}, ReadWrite(rd)
	if _, err := newMachine(rw); err != nil {
		t.Errorf("a valid read/write config: %v", err)
	}
}

// A downgrade: the holder of the writer _c_w-__WRIT__0000000003 asks for a
// reader beside it. The create is a multi that checks the writer and makes
// the reader at its sequence; the reader sees no writer strictly below it
// (its own is beside it) and holds at once.
func TestTranscriptDowngrade(t *testing.T) {
	const writer = "/app/rw/_c_w-__WRIT__0000000003"
	tr := newRWTranscript(t)
	out := tr.step(Acquire{Req: 1, Marker: rd, Beside: writer})
	if c, ok := only[createNode](out); !ok || c.Beside != writer || c.Seq != "0000000003" {
		t.Fatalf("want a create beside the writer, got %+v", out.Commands)
	}
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__READ__0000000003"})
	out = tr.step(dirRead{Cmd: 2, Children: []string{
		"_c_w-__WRIT__0000000003", "_c_uuid1-__READ__0000000003", "_c_x-__WRIT__0000000004",
	}, Own: own(0x50), OwnExists: true})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("the downgraded reader: want a grant at once, got %+v", out)
	}
	tr.check("rw_downgrade")
}

// A downgrade whose writer is gone when the create reaches the server (its
// hold ended meanwhile): the multi's check fails with NoNode and the reader
// is refused with NotHeld, not created in a place no writer holds.
func TestTranscriptDowngradeWriterGone(t *testing.T) {
	const writer = "/app/rw/_c_w-__WRIT__0000000003"
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1, Marker: rd, Beside: writer})
	out := tr.step(created{Cmd: 1, Err: zk.ErrNoNode})
	if len(out.Replies) != 1 || !errors.Is(out.Replies[0].Err, testErrors.NotHeld) || len(out.Commands) != 0 {
		t.Fatalf("want NotHeld and no request, got %+v", out)
	}
	tr.check("rw_downgrade_writer_gone")
}

// An Acquire beside a node of another directory, or beside no contender,
// is refused before anything is sent.
func TestAcquireBesideRefused(t *testing.T) {
	for _, beside := range []string{"/other/_c_w-__WRIT__0000000003", "/app/rw/plain", "/app/rw/_c_w-__WRIT__12"} {
		tr := newRWTranscript(t)
		out := tr.step(Acquire{Req: 1, Marker: rd, Beside: beside})
		if len(out.Commands) != 0 || len(out.Replies) != 1 || !errors.Is(out.Replies[0].Err, testErrors.InvalidOption) {
			t.Errorf("beside %s: want InvalidOption and no request, got %+v", beside, out)
		}
	}
	tr := newRWTranscript(t)
	if out := tr.step(Acquire{Req: 1, Marker: "__OTHER__"}); len(out.Commands) != 0 || !errors.Is(out.Replies[0].Err, testErrors.InvalidOption) {
		t.Errorf("an unknown marker: %+v", out)
	}
}

// A reader with one writer below watches only that writer's node (no mark):
// when it goes, however it went (a release, a give-up, an expiry), no
// writer is left below, and the reader holds with no read.
func TestTranscriptReaderBehindOneWriter(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1, Marker: rd})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__READ__0000000002"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_w-__WRIT__0000000001", "_c_uuid1-__READ__0000000002"}, Own: own(0x50), OwnExists: true})
	if w, ok := only[watchNode](out); !ok || !w.Plain || w.Path != "/app/rw/_c_w-__WRIT__0000000001" {
		t.Fatalf("want a plain watch on the writer, got %+v", out.Commands)
	}
	tr.step(watching{Cmd: 3, Exists: true})
	out = tr.step(fired{What: watchFired, Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_w-__WRIT__0000000001"}})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("want a grant with no read, got %+v", out)
	}
	tr.check("rw_reader_behind_one_writer")
}
