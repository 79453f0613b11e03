package contention

import (
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
func grantedAtOnce(out Output, req uint64) bool {
	return len(out.Commands) == 0 && slices.ContainsFunc(out.Replies, func(r Reply) bool { return r.Req == req && r.Granted })
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
// kazoo): our reader waits on the last writer below it, never on the
// writer above it, and when that writer leaves as a holder (its release
// mark), no writer is left below: it holds with no read.
func TestTranscriptReaderWaitsOnLastWriterBelow(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1, Marker: rd})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__READ__0000000004"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{
		"_c_w0-__WRIT__0000000000", "_c_r1-__READ__0000000001", "_c_w2-__WRIT__0000000002",
		"_c_r3-__READ__0000000003", "_c_uuid1-__READ__0000000004", "_c_w5-__WRIT__0000000005", "_c_r6-__READ__0000000006",
	}, Own: own(0x50), OwnExists: true})
	if len(out.Commands) != 1 || out.Commands[0].(watchNode).Path != "/app/rw/_c_w2-__WRIT__0000000002" {
		t.Fatalf("want a watch on the last writer below (w2), got %+v", out.Commands)
	}
	tr.step(watching{Cmd: 3, Exists: true})
	out = tr.step(watchFired{Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeCreated, Path: ReleaseMark("/app/rw/_c_w2-__WRIT__0000000002")}})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("want a grant with no read, got %+v", out)
	}
	tr.check("rw_reader_waits_on_last_writer_below")
}

// A writer waits on its immediate predecessor, a reader. Readers below it
// may hold together, so when that reader goes, even as a holder, the
// writer checks the other nodes it saw (one read), waits on the one left,
// and holds once it is gone.
func TestTranscriptWriterBehindReaders(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__WRIT__0000000003"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_r1-__READ__0000000001", "_c_r2-__READ__0000000002", "_c_uuid1-__WRIT__0000000003"}, Own: own(0x50), OwnExists: true})
	if len(out.Commands) != 1 || out.Commands[0].(watchNode).Path != "/app/rw/_c_r2-__READ__0000000002" {
		t.Fatalf("want a watch on the immediate predecessor (r2), got %+v", out.Commands)
	}
	tr.step(watching{Cmd: 3, Exists: true})
	out = tr.step(watchFired{Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeCreated, Path: ReleaseMark("/app/rw/_c_r2-__READ__0000000002")}})
	if len(out.Replies) != 0 {
		t.Fatalf("a writer held behind a reader with other readers below: %+v", out)
	}
	tr.step(nodesChecked{Cmd: 4, Exists: []bool{true}})
	tr.step(watching{Cmd: 5, Exists: true})
	tr.step(watchFired{Cmd: 5, Event: zk.WatchEvent{Type: zk.EventNodeDeleted, Path: "/app/rw/_c_r1-__READ__0000000001"}})
	tr.check("rw_writer_behind_readers")
}

// A writer behind a writer that held looks again (one listing) before it
// holds: a downgrading writer makes a reader below it. Here the listing
// finds one, and the writer waits for it.
func TestTranscriptWriterBehindWriterRereads(t *testing.T) {
	tr := newRWTranscript(t)
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/rw/_c_uuid1-__WRIT__0000000002"})
	tr.step(dirRead{Cmd: 2, Children: []string{"_c_w1-__WRIT__0000000001", "_c_uuid1-__WRIT__0000000002"}, Own: own(0x50), OwnExists: true})
	tr.step(watching{Cmd: 3, Exists: true})
	out := tr.step(watchFired{Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeCreated, Path: ReleaseMark("/app/rw/_c_w1-__WRIT__0000000001")}})
	if len(out.Commands) != 1 {
		t.Fatalf("want one read, got %+v", out)
	}
	if _, ok := out.Commands[0].(readDir); !ok {
		t.Fatalf("want the directory read again, got %T", out.Commands[0])
	}
	out = tr.step(dirRead{Cmd: 4, Children: []string{"_c_w1-__READ__0000000000", "_c_uuid1-__WRIT__0000000002"}, Own: own(0x50), OwnExists: true})
	if len(out.Replies) != 0 || len(out.Commands) != 1 || out.Commands[0].(watchNode).Path != "/app/rw/_c_w1-__READ__0000000000" {
		t.Fatalf("want a watch on the downgraded reader, got %+v", out)
	}
	tr.check("rw_writer_behind_writer_rereads")
}

// Leases(2): a third contender waits, watching the directory; when a
// holder goes it reads again and holds, with one node below.
func TestTranscriptLeases(t *testing.T) {
	tr := newTranscriptWith(t, Config{Dir: "/app/sem", Markers: []string{"lock-"}, Predicate: Leases(2)})
	tr.step(Acquire{Req: 1})
	tr.step(created{Cmd: 1, Path: "/app/sem/_c_uuid1-lock-0000000002"})
	out := tr.step(dirRead{Cmd: 2, Children: []string{"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_uuid1-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	if w, ok := out.Commands[0].(watchNode); len(out.Commands) != 1 || !ok || !w.Dir {
		t.Fatalf("want a watch on the directory, got %+v", out.Commands)
	}
	tr.step(watching{Cmd: 3, Exists: true})
	tr.step(watchFired{Cmd: 3, Event: zk.WatchEvent{Type: zk.EventNodeChildrenChanged, Path: "/app/sem"}})
	out = tr.step(dirRead{Cmd: 4, Children: []string{"_c_b-lock-0000000001", "_c_uuid1-lock-0000000002"}, Own: own(0x50), OwnExists: true})
	if !grantedAtOnce(out, 1) {
		t.Fatalf("want a grant with one node below, got %+v", out)
	}
	tr.check("leases_2")
}

func TestPredicateBlockers(t *testing.T) {
	dir := "/d"
	n := func(name string) string { return zk.Join(dir, name) }
	w0, r1, w2, r3 := n("_c_w0-__WRIT__0000000000"), n("_c_r1-__READ__0000000001"), n("_c_w2-__WRIT__0000000002"), n("_c_r3-__READ__0000000003")
	for _, tc := range []struct {
		name  string
		p     Predicate
		below []string
		ours  string
		want  []string
	}{
		{"exclusive waits for all", Exclusive(), []string{w0, r1}, n("_c_x-lock-0000000002"), []string{w0, r1}},
		{"reader waits for writers only", ReadWrite(rd), []string{w0, r1, w2, r3}, n("_c_x-__READ__0000000004"), []string{w0, w2}},
		{"reader behind readers holds", ReadWrite(rd), []string{r1, r3}, n("_c_x-__READ__0000000004"), nil},
		{"writer waits for all", ReadWrite(rd), []string{r1, r3}, n("_c_x-__WRIT__0000000004"), []string{r1, r3}},
		{"leases(2) with one below holds", Leases(2), []string{w0}, n("_c_x-lock-0000000001"), nil},
		{"leases(2) with two below waits", Leases(2), []string{w0, r1}, n("_c_x-lock-0000000002"), []string{w0, r1}},
	} {
		if got := tc.p.blockers(tc.below, tc.ours); !slices.Equal(got, tc.want) {
			t.Errorf("%s: blockers = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Sequence numbers wrap at 2^31: a node made just before the wrap is
// below ours made just after it.
func TestLowerAcrossTheWrap(t *testing.T) {
	markers := []string{"lock-"}
	children := []string{"_c_a-lock-2147483646", "_c_b-lock-2147483647", "_c_ours-lock--2147483648", "_c_c-lock--2147483647"}
	got := lower(children, markers, "_c_ours-lock--2147483648", -2147483648, "/d")
	if want := []string{"/d/_c_a-lock-2147483646", "/d/_c_b-lock-2147483647"}; !slices.Equal(got, want) {
		t.Fatalf("lower across the wrap = %v, want %v", got, want)
	}
}

func TestNewMachineValidatesItsConfig(t *testing.T) {
	ok := Config{Dir: "/d", Markers: []string{"lock-"}, NewID: func() string { return "u" }}
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
	} {
		cfg := ok
		tc.edit(&cfg)
		if _, err := NewMachine(cfg); err == nil {
			t.Errorf("%s: NewMachine accepted it", tc.name)
		}
	}
	if _, err := NewMachine(ok); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
}
