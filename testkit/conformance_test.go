package testkit

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// The conformance suite: one table of the ZooKeeper 3.8 behaviours recipes
// rely on (docs/zk-semantics.md §0–§10), each row a small scenario over a few
// sessions, run on every target (the simulator and a real server). A row
// that passes on one target and fails on the other is a bug in the
// simulator, never a reason to skip. Each row gets an empty tree.
var conformance = []struct {
	name string
	run  func(t *testing.T, tg Target)
}{
	{"sequence/format and one counter per parent", seqFormat},
	{"sequence/counter is not cversion", seqNotCversion},
	{"sequence/no reset on deletes", seqNoReset},
	{"sequence/restarts with the parent", seqRestart},
	{"sequence/collision", seqCollision},
	{"sequence/in a multi", seqMulti},
	{"ephemeral/owner", ephemeralOwner},
	{"ephemeral/no children", ephemeralNoChildren},
	{"ephemeral/close deletes in one transaction", ephemeralClose},
	{"container/reaped once it had a child", containerReaped},
	{"container/cascade", containerCascade},
	{"container/errors and stat", containerErrors},
	{"watch/firing", watchFiring},
	{"watch/one notification per session", watchOnce},
	{"watch/multi", watchMulti},
	{"watch/own change", watchOwnChange},
	{"multi/all or nothing", multiAllOrNothing},
	{"multi/ops see earlier ops", multiSequential},
	{"stat/fields", statFields},
	{"stat/zxids", statZxids},
	{"errors", errorsTable},
	{"builtins", builtins},
	{"children/unsorted", childrenUnsorted},
	{"session/reconnect replays watches", sessionReplay},
	{"session/requests wait while cut", sessionRequestsWait},
	{"session/expiry", sessionExpiry},
	{"session/close", sessionClose},
	{"fault/lost reply", faultLostReply},
	{"fault/held reply", faultHeldReply},
	{"fault/disarm", faultDisarm},
	{"limits/request frame", limitsFrame},
	{"sync", syncNoop},
}

func TestConformance(t *testing.T) {
	for _, row := range conformance {
		t.Run(row.name, func(t *testing.T) {
			ForEachTarget(t, row.run)
		})
	}
}

// connect opens n sessions on tg.
func connect(t *testing.T, tg Target, n int) []session {
	var out []session
	for range n {
		out = append(out, newSession(t, tg.Connect(t)))
	}
	return out
}

// quiet fails if any of chans has an event once a round trip on s has come
// back: the server sends s's notifications before later replies. On a real
// server the adapter forwards each watch on a goroutine of its own, so the
// check looks again after a short grace; on the simulator delivery is
// synchronous.
func quiet(t *testing.T, tg Target, s session, chans ...<-chan zk.WatchEvent) {
	t.Helper()
	check(t, s.Sync(s.ctx, "/"))
	if tg.Name() != "sim" {
		// An observation window for an absence, not a wait for a condition.
		<-time.After(50 * time.Millisecond)
	}
	for _, ch := range chans {
		undelivered(t, ch)
	}
}

// awaitReaped waits for ch's event while the target reaps containers: the
// simulator pass by pass, a real server on its own (every 200 ms).
func awaitReaped(t *testing.T, tg Target, ch <-chan zk.WatchEvent) zk.WatchEvent {
	t.Helper()
	sim, ok := SimOf(tg)
	if !ok {
		return await(t, ch)
	}
	for range 10 {
		sim.ReapContainers()
		select {
		case ev := <-ch:
			return ev
		default:
		}
	}
	t.Fatal("no event after 10 reaping passes")
	return zk.WatchEvent{}
}

func wantEvent(t *testing.T, ev zk.WatchEvent, typ zk.EventType, path string) {
	t.Helper()
	if ev.Type != typ || ev.Path != path {
		t.Fatalf("watch event %v %s, want %v %s", ev.Type, ev.Path, typ, path)
	}
}

func wantName(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("created %q, want %q", got, want)
	}
}

// §1: the suffix is the parent's creation counter in %010d, shared by every
// prefix and mode.
func seqFormat(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	wantName(t, a.create("/P/a-", nil, zk.ModePersistentSequential), "/P/a-0000000000")
	a.mkdir("/P/plain")
	wantName(t, a.create("/P/b-", nil, zk.ModePersistentSequential), "/P/b-0000000002")
	wantName(t, a.create("/P/lock-", nil, zk.ModeEphemeralSequential), "/P/lock-0000000003")
	wantName(t, b.create("/P/e-", nil, zk.ModeEphemeralSequential), "/P/e-0000000004")
	if st := a.stat("/P"); st.Cversion != 5 || st.NumChildren != 5 {
		t.Fatalf("parent cversion %d numChildren %d, want 5 5", st.Cversion, st.NumChildren)
	}
}

// §1: deletes move Cversion but not the counter; failures move neither.
func seqNotCversion(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	cversion := func(want int32) {
		t.Helper()
		if st := a.stat("/P"); st.Cversion != want {
			t.Fatalf("cversion %d, want %d", st.Cversion, want)
		}
	}
	wantName(t, a.create("/P/n-", nil, zk.ModePersistentSequential), "/P/n-0000000000")
	cversion(1)
	a.mkdir("/P/c")
	cversion(2)
	wantName(t, a.create("/P/n-", nil, zk.ModePersistentSequential), "/P/n-0000000002")
	cversion(3)
	a.set("/P/c", []byte("x"))
	a.set("/P", []byte("x"))
	_, err := a.Create(a.ctx, "/P/c", nil, zk.ModePersistent)
	wantErr(t, "create existing", err, zk.ErrNodeExists)
	wantErr(t, "delete missing", a.Delete(a.ctx, "/P/missing", -1), zk.ErrNoNode)
	cversion(3)
	a.del("/P/c")
	cversion(4)
	wantName(t, a.create("/P/n-", nil, zk.ModePersistentSequential), "/P/n-0000000003")
	st := a.stat("/P")
	if (st.Cversion+st.NumChildren)/2 != 4 {
		t.Fatalf("(cversion+numChildren)/2 = %d, want the counter 4", (st.Cversion+st.NumChildren)/2)
	}
}

// §1: emptying the parent does not reset the counter.
func seqNoReset(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	for range 3 {
		a.del(a.create("/P/n-", nil, zk.ModePersistentSequential))
	}
	if st := a.stat("/P"); st.Cversion != 6 {
		t.Fatalf("cversion %d after 3 creates and 3 deletes", st.Cversion)
	}
	wantName(t, a.create("/P/n-", nil, zk.ModePersistentSequential), "/P/n-0000000003")
}

// §1: a re-created parent counts from 0 again: names repeat over time.
func seqRestart(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	first := a.create("/P/n-", nil, zk.ModePersistentSequential)
	a.create("/P/n-", nil, zk.ModePersistentSequential)
	a.del("/P/n-0000000000")
	a.del("/P/n-0000000001")
	a.del("/P")
	a.mkdir("/P")
	wantName(t, a.create("/P/n-", nil, zk.ModePersistentSequential), first)
}

// §1: a sequential create whose name exists fails without advancing the
// counter, so a retry fails too until another create moves it on.
func seqCollision(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	a.create("/P/n-", nil, zk.ModePersistentSequential) // the counter is 1
	a.mkdir("/P/x0000000002")                           // 2
	for range 2 {
		_, err := a.Create(a.ctx, "/P/x", nil, zk.ModePersistentSequential)
		wantErr(t, "colliding sequential create", err, zk.ErrNodeExists)
	}
	if st := a.stat("/P"); st.Cversion != 2 {
		t.Fatalf("cversion %d after the failed creates, want 2", st.Cversion)
	}
	wantName(t, a.create("/P/y", nil, zk.ModePersistentSequential), "/P/y0000000002")
	wantName(t, a.create("/P/x", nil, zk.ModePersistentSequential), "/P/x0000000003")
}

// §1, §5: sequential creates in a multi are numbered in op order and share
// the multi's zxid; a failed multi leaves the counter where it was.
func seqMulti(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	res, err := a.Multi(a.ctx,
		&zk.CreateOp{Path: "/P/s-", Mode: zk.ModePersistentSequential},
		&zk.CreateOp{Path: "/P/s-", Mode: zk.ModeEphemeralSequential},
		&zk.CreateOp{Path: "/P/plain", Mode: zk.ModePersistent})
	check(t, err)
	var paths []string
	for _, r := range res {
		paths = append(paths, r.Path)
	}
	if want := []string{"/P/s-0000000000", "/P/s-0000000001", "/P/plain"}; !slices.Equal(paths, want) {
		t.Fatalf("multi created %v, want %v", paths, want)
	}
	z := a.stat(paths[0]).Czxid
	for _, p := range paths[1:] {
		if c := a.stat(p).Czxid; c != z {
			t.Fatalf("czxid of %s is %#x, of %s %#x: want one zxid", paths[0], z, p, c)
		}
	}
	_, err = a.Multi(a.ctx, &zk.CreateOp{Path: "/P/s-", Mode: zk.ModePersistentSequential}, &zk.CheckOp{Path: "/P/missing", Version: -1})
	wantErr(t, "failed multi", err, zk.ErrNoNode)
	wantName(t, a.create("/P/s-", nil, zk.ModePersistentSequential), "/P/s-0000000003")
}

// §2, §3: ephemeralOwner is the creating session; 0 for persistent nodes
// and containers, which no Stat field tells apart.
func ephemeralOwner(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	a.create("/P/e", nil, zk.ModeEphemeral)
	a.create("/P/c", nil, zk.ModeContainer)
	if o := b.stat("/P/e").EphemeralOwner; o != a.SessionID() || o == 0 {
		t.Fatalf("ephemeral owner %#x, want %#x", o, a.SessionID())
	}
	p, c := b.stat("/P"), b.stat("/P/c")
	if p.EphemeralOwner != 0 || c.EphemeralOwner != 0 {
		t.Fatalf("owners: persistent %#x, container %#x", p.EphemeralOwner, c.EphemeralOwner)
	}
	if c.Version != 0 || c.Cversion != 0 || c.NumChildren != 0 || c.DataLength != 0 {
		t.Fatalf("fresh container stat %+v", c)
	}
}

// §2: nothing can be created under an ephemeral; anyone may change or
// delete it.
func ephemeralNoChildren(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	a.create("/P/e", nil, zk.ModeEphemeral)
	for _, s := range ss {
		for _, m := range []zk.CreateMode{zk.ModePersistent, zk.ModeEphemeral, zk.ModePersistentSequential, zk.ModeEphemeralSequential} {
			_, err := s.Create(s.ctx, "/P/e/x", nil, m)
			wantErr(t, fmt.Sprintf("create %v under an ephemeral", m), err, zk.ErrNoChildrenForEphemerals)
		}
		_, err := s.Create(s.ctx, "/P/e", nil, zk.ModeEphemeral)
		wantErr(t, "create the ephemeral again", err, zk.ErrNodeExists)
	}
	wantErr(t, "delete the parent of an ephemeral", a.Delete(a.ctx, "/P", -1), zk.ErrNotEmpty)
	if st := b.set("/P/e", []byte("x")); st.Version != 1 {
		t.Fatalf("set by another session: version %d", st.Version)
	}
	b.del("/P/e")
}

// §2: closing a session deletes its ephemerals in one transaction; watchers
// get each deletion and one ChildrenChanged.
func ephemeralClose(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	for _, n := range []string{"e1", "e2", "e3"} {
		a.create("/P/"+n, nil, zk.ModeEphemeral)
	}
	w1, w3, wp := b.existsW("/P/e1"), b.getW("/P/e3"), b.childrenW("/P")
	before := b.stat("/P")
	check(t, a.Close())
	wantEvent(t, await(t, w1), zk.EventNodeDeleted, "/P/e1")
	wantEvent(t, await(t, w3), zk.EventNodeDeleted, "/P/e3")
	wantEvent(t, await(t, wp), zk.EventNodeChildrenChanged, "/P")
	after := b.stat("/P")
	if after.NumChildren != 0 || after.Cversion != before.Cversion+3 || after.Pzxid != before.Pzxid+1 {
		t.Fatalf("parent before %+v, after %+v: want 3 deletes in one zxid", before, after)
	}
}

// §3: only a container that once had a child is reaped, by a normal delete
// that fires watches; the counter restarts with it.
func containerReaped(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	a.create("/P/never", []byte("data"), zk.ModeContainer)
	a.create("/P/used", nil, zk.ModeContainer)
	wantName(t, a.create("/P/used/lock-", nil, zk.ModeEphemeralSequential), "/P/used/lock-0000000000")
	w, wp := b.existsW("/P/used"), b.childrenW("/P")
	a.del("/P/used/lock-0000000000")
	wantEvent(t, awaitReaped(t, tg, w), zk.EventNodeDeleted, "/P/used")
	wantEvent(t, await(t, wp), zk.EventNodeChildrenChanged, "/P")
	if !a.exists("/P/never") {
		t.Fatal("a container that never had a child was reaped")
	}
	_, err := a.Create(a.ctx, "/P/used/lock-", nil, zk.ModeEphemeralSequential)
	wantErr(t, "create under a reaped container", err, zk.ErrNoNode)
	a.create("/P/used", nil, zk.ModeContainer)
	wantName(t, a.create("/P/used/lock-", nil, zk.ModeEphemeralSequential), "/P/used/lock-0000000000")
}

// §3: nested containers go one level at a time, innermost first; an
// ephemeral child's session ending empties a container too.
func containerCascade(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.create("/outer", nil, zk.ModeContainer)
	a.create("/outer/inner", nil, zk.ModeContainer)
	a.create("/outer/inner/x", nil, zk.ModeEphemeral)
	wi, wo := b.existsW("/outer/inner"), b.existsW("/outer")
	check(t, a.Close())
	wantEvent(t, awaitReaped(t, tg, wi), zk.EventNodeDeleted, "/outer/inner")
	wantEvent(t, awaitReaped(t, tg, wo), zk.EventNodeDeleted, "/outer")
}

// §3: containers refuse what persistent nodes refuse.
func containerErrors(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.create("/C", nil, zk.ModeContainer)
	a.mkdir("/C/x")
	wantErr(t, "delete a container with a child", a.Delete(a.ctx, "/C", -1), zk.ErrNotEmpty)
	_, err := a.Create(a.ctx, "/C", nil, zk.ModeContainer)
	wantErr(t, "create an existing container", err, zk.ErrNodeExists)
	_, err = a.Create(a.ctx, "/missing/C", nil, zk.ModeContainer)
	wantErr(t, "create a container under a missing parent", err, zk.ErrNoNode)
	a.del("/C/x")
	// The client may win the race with the reaper, or lose it.
	if err := a.Delete(a.ctx, "/C", -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("delete an emptied container: %v", err)
	}
}

// §4: which watch fires on which change, and what it says.
func watchFiring(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	none := func(chans ...<-chan zk.WatchEvent) { t.Helper(); quiet(t, tg, a, chans...) }
	cases := []struct {
		name string
		run  func(p string)
	}{
		{"existsW missing, created", func(p string) {
			w := a.existsW(p)
			b.mkdir(p)
			wantEvent(t, await(t, w), zk.EventNodeCreated, p)
		}},
		{"existsW existing, set", func(p string) {
			b.mkdir(p)
			w := a.existsW(p)
			b.set(p, []byte("x"))
			wantEvent(t, await(t, w), zk.EventNodeDataChanged, p)
		}},
		{"existsW existing, deleted", func(p string) {
			b.mkdir(p)
			w := a.existsW(p)
			b.del(p)
			wantEvent(t, await(t, w), zk.EventNodeDeleted, p)
		}},
		{"getW, set with the same bytes", func(p string) {
			b.create(p, []byte("same"), zk.ModePersistent)
			w := a.getW(p)
			if st := b.set(p, []byte("same")); st.Version != 1 {
				t.Fatalf("version %d", st.Version)
			}
			wantEvent(t, await(t, w), zk.EventNodeDataChanged, p)
		}},
		{"getW, deleted", func(p string) {
			b.mkdir(p)
			w := a.getW(p)
			b.del(p)
			wantEvent(t, await(t, w), zk.EventNodeDeleted, p)
		}},
		{"getW, child created", func(p string) {
			b.mkdir(p)
			w := a.getW(p)
			b.mkdir(p + "/c")
			none(w)
		}},
		{"childrenW, child created then deleted", func(p string) {
			b.mkdir(p)
			w := a.childrenW(p)
			b.mkdir(p + "/c")
			wantEvent(t, await(t, w), zk.EventNodeChildrenChanged, p)
			w = a.childrenW(p)
			b.del(p + "/c")
			wantEvent(t, await(t, w), zk.EventNodeChildrenChanged, p)
		}},
		{"childrenW, child set, grandchild created, node set", func(p string) {
			b.mkdir(p)
			b.mkdir(p + "/c")
			w := a.childrenW(p)
			b.set(p+"/c", []byte("x"))
			b.mkdir(p + "/c/g")
			b.set(p, []byte("x"))
			none(w)
		}},
		{"childrenW on a childless node, deleted", func(p string) {
			b.mkdir(p)
			w := a.childrenW(p)
			b.del(p)
			wantEvent(t, await(t, w), zk.EventNodeDeleted, p)
		}},
		{"existsW missing, created then deleted", func(p string) {
			w := a.existsW(p)
			b.mkdir(p)
			b.del(p)
			wantEvent(t, await(t, w), zk.EventNodeCreated, p)
			if _, open := <-w; open {
				t.Fatal("a one-shot watch delivered twice")
			}
		}},
		{"getW and childrenW, deleted", func(p string) {
			b.mkdir(p)
			wg, wc := a.getW(p), a.childrenW(p)
			b.del(p)
			wantEvent(t, await(t, wg), zk.EventNodeDeleted, p)
			wantEvent(t, await(t, wc), zk.EventNodeDeleted, p)
		}},
		{"getW and childrenW, child created", func(p string) {
			b.mkdir(p)
			wg, wc := a.getW(p), a.childrenW(p)
			b.mkdir(p + "/c")
			wantEvent(t, await(t, wc), zk.EventNodeChildrenChanged, p)
			none(wg)
		}},
		{"getW and childrenW on a missing node leave no watch", func(p string) {
			_, _, w, err := a.GetW(a.ctx, p)
			wantErr(t, "getW missing", err, zk.ErrNoNode)
			_, _, w2, err := a.ChildrenW(a.ctx, p)
			wantErr(t, "childrenW missing", err, zk.ErrNoNode)
			if w != nil || w2 != nil {
				t.Fatal("a watch channel for a missing node")
			}
		}},
		{"getW, deleted by a multi", func(p string) {
			b.mkdir(p)
			w := a.getW(p)
			_, err := b.Multi(b.ctx, &zk.DeleteOp{Path: p, Version: -1})
			check(t, err)
			wantEvent(t, await(t, w), zk.EventNodeDeleted, p)
		}},
		{"getW, a failed multi", func(p string) {
			b.mkdir(p)
			w := a.getW(p)
			_, err := b.Multi(b.ctx, &zk.SetOp{Path: p, Version: -1}, &zk.CreateOp{Path: p + "/no/x"})
			wantErr(t, "failed multi", err, zk.ErrNoNode)
			none(w)
		}},
		{"existsW below a missing parent, a failed create", func(p string) {
			w := a.existsW(p + "/deep")
			_, err := b.Create(b.ctx, p+"/deep", nil, zk.ModePersistent)
			wantErr(t, "create under a missing parent", err, zk.ErrNoNode)
			none(w)
			b.mkdir(p)
			b.mkdir(p + "/deep")
			wantEvent(t, await(t, w), zk.EventNodeCreated, p+"/deep")
		}},
	}
	a.mkdir("/W")
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(fmt.Sprintf("/W/case%02d", i)) })
	}
}

// §4: a session gets one notification per (path, event), delivered to all
// its channels on that path, then nothing until it watches again.
func watchOnce(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/n")
	chans := []<-chan zk.WatchEvent{a.getW("/n"), a.getW("/n"), a.existsW("/n")}
	b.set("/n", []byte("1"))
	for _, w := range chans {
		wantEvent(t, await(t, w), zk.EventNodeDataChanged, "/n")
	}
	b.set("/n", []byte("2"))
	for _, w := range chans {
		if _, open := <-w; open {
			t.Fatal("a one-shot watch delivered twice")
		}
	}
}

// §4, §5: a multi fires one event per affected watch; the parent's child
// watch is spent by the first child change.
func watchMulti(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	for _, n := range []string{"m1", "m2", "m3"} {
		a.mkdir("/P/" + n)
	}
	w3, w2, w1, w4, wp := a.getW("/P/m3"), a.getW("/P/m2"), a.getW("/P/m1"), a.existsW("/P/m4"), a.childrenW("/P")
	_, err := b.Multi(b.ctx,
		&zk.SetOp{Path: "/P/m1", Version: -1},
		&zk.DeleteOp{Path: "/P/m2", Version: -1},
		&zk.SetOp{Path: "/P/m3", Version: -1},
		&zk.CreateOp{Path: "/P/m4"})
	check(t, err)
	wantEvent(t, await(t, w1), zk.EventNodeDataChanged, "/P/m1")
	wantEvent(t, await(t, w2), zk.EventNodeDeleted, "/P/m2")
	wantEvent(t, await(t, wp), zk.EventNodeChildrenChanged, "/P")
	wantEvent(t, await(t, w3), zk.EventNodeDataChanged, "/P/m3")
	wantEvent(t, await(t, w4), zk.EventNodeCreated, "/P/m4")
}

// §4: the session that makes a change gets its own watch's event. ZooKeeper
// sends it before the change's reply, and go-zookeeper puts it in the
// watch's channel first; the adapter forwards each watch on a goroutine of
// its own, so through a zk.Conn only its arrival is certain (the simulator
// delivers it before the reply: TestSimWatchBeforeReply).
func watchOwnChange(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	w := a.existsW("/P/n")
	a.mkdir("/P/n")
	wantEvent(t, await(t, w), zk.EventNodeCreated, "/P/n")
	w = a.childrenW("/P/n")
	a.mkdir("/P/n/c")
	wantEvent(t, await(t, w), zk.EventNodeChildrenChanged, "/P/n")
	w = a.getW("/P/n")
	a.set("/P/n", nil)
	wantEvent(t, await(t, w), zk.EventNodeDataChanged, "/P/n")
	w = a.getW("/P/n/c")
	a.del("/P/n/c")
	wantEvent(t, await(t, w), zk.EventNodeDeleted, "/P/n/c")
}

// wantResults checks a multi's per-op errors.
func wantResults(t *testing.T, res []zk.OpResult, want ...error) {
	t.Helper()
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d", len(res), len(want))
	}
	for i, r := range res {
		if want[i] == nil && r.Err != nil || want[i] != nil && !errors.Is(r.Err, want[i]) {
			t.Fatalf("op %d: %v, want %v", i, r.Err, want[i])
		}
	}
}

// §5: a failed multi changes nothing and reports nil before the failing op,
// its error, and RuntimeInconsistency after.
func multiAllOrNothing(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	a.mkdir("/P/b")
	ri := zk.ErrRuntimeInconsistency
	cases := []struct {
		name string
		ops  []zk.Op
		want []error
	}{
		{"wrong version check", []zk.Op{&zk.CheckOp{Path: "/P", Version: 7}, &zk.CreateOp{Path: "/P/x"}}, []error{zk.ErrBadVersion, ri}},
		{"check of a missing node", []zk.Op{&zk.CheckOp{Path: "/P/missing", Version: -1}, &zk.CreateOp{Path: "/P/x"}}, []error{zk.ErrNoNode, ri}},
		{"second of three fails", []zk.Op{&zk.CreateOp{Path: "/P/x"}, &zk.CreateOp{Path: "/P/no/x"}, &zk.CreateOp{Path: "/P/y"}}, []error{nil, zk.ErrNoNode, ri}},
		{"set with a wrong version", []zk.Op{&zk.CreateOp{Path: "/P/x"}, &zk.SetOp{Path: "/P", Version: 42}, &zk.DeleteOp{Path: "/P/b", Version: -1}}, []error{nil, zk.ErrBadVersion, ri}},
		{"only the first failure", []zk.Op{&zk.CreateOp{Path: "/P/b"}, &zk.DeleteOp{Path: "/P/missing", Version: -1}}, []error{zk.ErrNodeExists, ri}},
		{"the same path twice", []zk.Op{&zk.CreateOp{Path: "/P/x"}, &zk.CreateOp{Path: "/P/x"}}, []error{nil, zk.ErrNodeExists}},
		{"a child of a new ephemeral", []zk.Op{&zk.CreateOp{Path: "/P/x", Mode: zk.ModeEphemeral}, &zk.CreateOp{Path: "/P/x/y"}}, []error{nil, zk.ErrNoChildrenForEphemerals}},
		{"a check after a set", []zk.Op{&zk.CheckOp{Path: "/P/b", Version: 0}, &zk.SetOp{Path: "/P/b", Version: 0}, &zk.CheckOp{Path: "/P/b", Version: 0}}, []error{nil, nil, zk.ErrBadVersion}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := a.stat("/P")
			res, err := a.Multi(a.ctx, c.ops...)
			if want := firstErr(c.want); !errors.Is(err, want) {
				t.Fatalf("multi error %v, want %v", err, want)
			}
			wantResults(t, res, c.want...)
			if a.exists("/P/x") || a.exists("/P/y") || !a.exists("/P/b") {
				t.Fatal("a failed multi changed the tree")
			}
			if after := a.stat("/P"); after.Cversion != before.Cversion || a.stat("/P/b").Version != 0 {
				t.Fatal("a failed multi changed a stat")
			}
		})
	}
	res, err := a.Multi(a.ctx)
	if err != nil || len(res) != 0 {
		t.Fatalf("empty multi: %v %v", res, err)
	}
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// §5: each op sees the effects of the ops before it; results carry the
// created path and the set's Stat.
func multiSequential(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	a.mkdir("/P/a")
	res, err := a.Multi(a.ctx,
		&zk.CheckOp{Path: "/P/a", Version: 0},
		&zk.SetOp{Path: "/P/a", Data: []byte("x"), Version: 0},
		&zk.DeleteOp{Path: "/P/a", Version: 1},
		&zk.CreateOp{Path: "/P/b"},
		&zk.CheckOp{Path: "/P/b", Version: 0},
		&zk.SetOp{Path: "/P/b", Version: 0},
		&zk.CheckOp{Path: "/P/b", Version: 1},
		&zk.CreateOp{Path: "/P/c"},
		&zk.CreateOp{Path: "/P/c/d"},
		&zk.DeleteOp{Path: "/P/c/d", Version: -1},
		&zk.DeleteOp{Path: "/P/c", Version: -1})
	check(t, err)
	wantResults(t, res, make([]error, 11)...)
	if res[1].Stat.Version != 1 || res[1].Stat.DataLength != 1 || res[3].Path != "/P/b" || res[5].Stat.Version != 1 {
		t.Fatalf("results %+v", res)
	}
	if a.exists("/P/a") || !a.exists("/P/b") || a.exists("/P/c") {
		t.Fatal("the multi's effects are wrong")
	}
}

// §6: what each Stat field says, and when it moves.
func statFields(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.create("/P", []byte("abc"), zk.ModePersistent)
	st := a.stat("/P")
	if st.Czxid == 0 || st.Mzxid != st.Czxid || st.Pzxid != st.Czxid || st.Version != 0 || st.Cversion != 0 ||
		st.EphemeralOwner != 0 || st.DataLength != 3 || st.NumChildren != 0 || st.Ctime == 0 || st.Mtime != st.Ctime {
		t.Fatalf("new node %+v", st)
	}
	set := a.set("/P", []byte("abcdef"))
	if set.Mzxid <= st.Mzxid || set.Version != 1 || set.DataLength != 6 || set.Czxid != st.Czxid || set.Pzxid != st.Pzxid ||
		set.Ctime != st.Ctime || set.Mtime < st.Mtime {
		t.Fatalf("after set %+v (before %+v)", set, st)
	}
	if again, _, _ := a.Exists(a.ctx, "/P"); again != set {
		t.Fatalf("Exists %+v, Set returned %+v", again, set)
	}
	a.set("/P", nil)
	if d, st := a.get("/P"); d != nil || st.Version != 2 || st.DataLength != 0 {
		t.Fatalf("after set nil: %q %+v", d, st)
	}
	a.create("/P/empty", []byte{}, zk.ModePersistent)
	if d, _ := a.get("/P/empty"); d == nil || len(d) != 0 {
		t.Fatalf("empty data read back as %#v", d)
	}
	before := a.stat("/P")
	c := a.stat(a.create("/P/c", nil, zk.ModePersistent))
	p := a.stat("/P")
	if p.Pzxid != c.Czxid || p.Cversion != before.Cversion+1 || p.NumChildren != 2 || p.Mzxid != before.Mzxid || p.Version != before.Version {
		t.Fatalf("parent after a child create %+v (before %+v, child %+v)", p, before, c)
	}
	a.set("/P/c", []byte("x"))
	if again := a.stat("/P"); again != p {
		t.Fatalf("a child's set changed the parent: %+v", again)
	}
	e := a.stat(b.create("/P/e", nil, zk.ModeEphemeral))
	if p = a.stat("/P"); p.Pzxid != e.Czxid || e.EphemeralOwner != b.SessionID() {
		t.Fatalf("parent %+v after ephemeral %+v", p, e)
	}
	a.del("/P/c")
	after := a.stat("/P")
	if after.Pzxid <= p.Pzxid || after.Cversion != p.Cversion+1 || after.NumChildren != 2 {
		t.Fatalf("parent after a child delete %+v (before %+v)", after, p)
	}
	names, cst, err := a.Children(a.ctx, "/P")
	check(t, err)
	if slices.Sort(names); !slices.Equal(names, []string{"e", "empty"}) || cst != after {
		t.Fatalf("Children %v %+v, want [e empty] and the parent's Stat %+v", names, cst, after)
	}
	if leaf := a.children("/P/empty"); leaf == nil || len(leaf) != 0 {
		t.Fatalf("children of a leaf %#v, want an empty list", leaf)
	}
	if st, ok, err := a.Exists(a.ctx, "/P/missing"); ok || err != nil || st != (zk.Stat{}) {
		t.Fatalf("Exists of a missing node: %+v %v %v", st, ok, err)
	}
	for range 3 {
		a.set("/P/e", nil)
	}
	st, err = a.Set(a.ctx, "/P/e", nil, 3)
	if err != nil || st.Version != 4 {
		t.Fatalf("conditional set: %+v %v", st, err)
	}
}

// §0.4, §6: every write takes a zxid, failed or not; a multi takes one;
// reads and sync take none.
func statZxids(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	czxid := func(p string) int64 { t.Helper(); return a.stat(a.create(p, nil, zk.ModePersistent)).Czxid }
	z1 := czxid("/z1")
	_, err := a.Create(a.ctx, "/z1", nil, zk.ModePersistent)
	wantErr(t, "create existing", err, zk.ErrNodeExists)
	a.get("/z1")
	z2 := czxid("/z2")
	_, err = a.Set(a.ctx, "/z2", nil, 5)
	wantErr(t, "set with a wrong version", err, zk.ErrBadVersion)
	wantErr(t, "delete missing", a.Delete(a.ctx, "/missing", -1), zk.ErrNoNode)
	check(t, a.Sync(a.ctx, "/"))
	z3 := czxid("/z3")
	_, err = a.Multi(a.ctx, &zk.CreateOp{Path: "/z4"}, &zk.CreateOp{Path: "/z5"}, &zk.CreateOp{Path: "/missing/x"})
	wantErr(t, "failed multi", err, zk.ErrNoNode)
	z4 := czxid("/z4")
	_, err = a.Multi(a.ctx, &zk.CreateOp{Path: "/z5"}, &zk.CreateOp{Path: "/z6"})
	check(t, err)
	z5, z6 := a.stat("/z5").Czxid, a.stat("/z6").Czxid
	if z2-z1 != 2 || z3-z2 != 3 || z4-z3 != 2 || z5 != z4+1 || z6 != z5 {
		t.Fatalf("czxids %#x %#x %#x %#x %#x %#x: want deltas 2, 3, 2, 1, 0", z1, z2, z3, z4, z5, z6)
	}
	// Opening a session is a transaction, and so is closing one.
	b := connect(t, tg, 1)[0]
	z7 := czxid("/z7")
	check(t, b.Close())
	z8 := czxid("/z8")
	if z7-z6 != 2 || z8-z7 != 2 {
		t.Fatalf("czxids %#x, then %#x after a new session, %#x after its close: want deltas 2, 2", z6, z7, z8)
	}
}

// §7: the error of each failing request, and which check comes first.
func errorsTable(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	a.mkdir("/P/c")
	a.create("/P/e", nil, zk.ModeEphemeral)
	create := func(p string, m zk.CreateMode) error { _, err := a.Create(a.ctx, p, nil, m); return err }
	get := func(p string) error { _, _, err := a.Get(a.ctx, p); return err }
	children := func(p string) error { _, _, err := a.Children(a.ctx, p); return err }
	set := func(p string, v int32) error { _, err := a.Set(a.ctx, p, nil, v); return err }
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"delete a node with children", a.Delete(a.ctx, "/P", -1), zk.ErrNotEmpty},
		{"delete a node with children, wrong version", a.Delete(a.ctx, "/P", 3), zk.ErrBadVersion},
		{"delete, wrong version", a.Delete(a.ctx, "/P/c", 3), zk.ErrBadVersion},
		{"delete a missing node with a version", a.Delete(a.ctx, "/P/missing", 3), zk.ErrNoNode},
		{"set, wrong version", set("/P/c", 3), zk.ErrBadVersion},
		{"set a missing node", set("/P/missing", -1), zk.ErrNoNode},
		{"create an existing node", create("/P/c", zk.ModePersistent), zk.ErrNodeExists},
		{"create an existing ephemeral (owner)", create("/P/e", zk.ModeEphemeral), zk.ErrNodeExists},
		{"create with a missing parent", create("/P/missing/x", zk.ModePersistent), zk.ErrNoNode},
		{"create ephemeral sequential with a missing parent", create("/P/missing/x-", zk.ModeEphemeralSequential), zk.ErrNoNode},
		{"get a missing node", get("/P/missing"), zk.ErrNoNode},
		{"children of a missing node", children("/P/missing"), zk.ErrNoNode},
		{"delete /", a.Delete(a.ctx, "/", -1), zk.ErrBadArguments},
		{"create /", create("/", zk.ModePersistent), zk.ErrNodeExists},
		{"relative path", get("P"), zk.ErrInvalidPath},
		{"trailing slash", create("/P/", zk.ModePersistent), zk.ErrInvalidPath},
		{"empty segment", get("/P//c"), zk.ErrInvalidPath},
		{"dot segment", create("/P/./x", zk.ModePersistent), zk.ErrInvalidPath},
		{"control character", get("/P/x\x01y"), zk.ErrInvalidPath},
		{"a dot in a name", create("/P/.x", zk.ModePersistent), nil},
		{"a container create in a multi", func() error {
			_, err := a.Multi(a.ctx, &zk.CreateOp{Path: "/P/k", Mode: zk.ModeContainer})
			return err
		}(), zk.ErrBadArguments},
	}
	for _, c := range cases {
		wantErr(t, c.name, c.err, c.want)
	}
	// Two sessions delete one node: one wins, the other gets ErrNoNode.
	check(t, b.Delete(b.ctx, "/P/c", -1))
	wantErr(t, "second delete", a.Delete(a.ctx, "/P/c", -1), zk.ErrNoNode)
}

// §7: the /zookeeper subtree is writable except for its three built-in
// nodes.
func builtins(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	cv := a.stat("/zookeeper").Cversion
	_, err := a.Create(a.ctx, "/zookeeper", nil, zk.ModePersistent)
	wantErr(t, "create /zookeeper", err, zk.ErrNodeExists)
	a.mkdir("/zookeeper/x")
	a.set("/zookeeper", nil)
	_, err = a.Set(a.ctx, "/zookeeper/config", nil, -1)
	wantErr(t, "set /zookeeper/config", err, zk.ErrNoAuth)
	for _, p := range []string{"/zookeeper", "/zookeeper/config", "/zookeeper/quota"} {
		wantErr(t, "delete "+p, a.Delete(a.ctx, p, -1), zk.ErrBadArguments)
	}
	a.del("/zookeeper/x")
	names := a.children("/zookeeper")
	if slices.Sort(names); !slices.Equal(names, []string{"config", "quota"}) {
		t.Fatalf("children of /zookeeper %v", names)
	}
	if got := a.stat("/zookeeper").Cversion; got != cv+2 {
		t.Fatalf("cversion of /zookeeper %d, want %d", got, cv+2)
	}
}

// §6, §11: getChildren lists the right names in no particular order (not
// sorted, not creation order), the same order from every session.
func childrenUnsorted(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	var want []string
	for _, n := range []string{"lock-", "read-", "write-", "lock-", "a", "zz", "lock-", "m", "lock-", "b",
		"q-", "q-", "q-", "q-", "q-", "q-", "q-", "q-", "q-", "q-", "q-", "q-"} {
		mode := zk.ModePersistent
		if strings.HasSuffix(n, "-") {
			mode = zk.ModePersistentSequential
		}
		want = append(want, zk.Base(a.create("/P/"+n, nil, mode)))
	}
	got, again := a.children("/P"), b.children("/P")
	if slices.IsSorted(got) || slices.Equal(got, want) || !slices.Equal(got, again) {
		t.Fatalf("children %v then %v: want an unsorted order, not creation order, stable", got, again)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("children %v, want %v", got, want)
	}
}

// §8: after a reconnect within the session timeout, the watches are
// replayed from the last zxid the client saw: the state is compared, not
// the history.
func sessionReplay(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	log := recordSession(t, a)
	a.mkdir("/R")
	for _, n := range []string{"d1", "d3", "d4", "d6", "d7", "c1", "c2"} {
		a.mkdir("/R/" + n)
	}
	a.create("/R/eph", nil, zk.ModeEphemeral)
	d1, d2, d3, d4 := a.getW("/R/d1"), a.existsW("/R/d2"), a.getW("/R/d3"), a.getW("/R/d4")
	d5, d6, d7 := a.existsW("/R/d5"), a.getW("/R/d6"), a.existsW("/R/d7")
	c1, c2 := a.childrenW("/R/c1"), a.childrenW("/R/c2")
	sid := a.SessionID()
	tg.Disconnect(t, a.Conn)
	b.set("/R/d1", []byte("x"))
	b.mkdir("/R/d2")
	b.del("/R/d3")
	b.del("/R/d4")
	b.mkdir("/R/d4")
	b.mkdir("/R/d5")
	b.del("/R/d5")
	b.set("/R/d7", []byte("x"))
	b.mkdir("/R/c1/x")
	b.mkdir("/R/c2/x")
	b.del("/R/c2/x")
	tg.Reconnect(t, a.Conn)
	wantEvent(t, await(t, d1), zk.EventNodeDataChanged, "/R/d1")
	wantEvent(t, await(t, d2), zk.EventNodeCreated, "/R/d2")
	wantEvent(t, await(t, d3), zk.EventNodeDeleted, "/R/d3")
	wantEvent(t, await(t, d4), zk.EventNodeDataChanged, "/R/d4")
	wantEvent(t, await(t, d7), zk.EventNodeDataChanged, "/R/d7")
	wantEvent(t, await(t, c1), zk.EventNodeChildrenChanged, "/R/c1")
	wantEvent(t, await(t, c2), zk.EventNodeChildrenChanged, "/R/c2")
	quiet(t, tg, a, d5, d6)
	if ev := log.events(); len(ev) != 2 || ev[0].State != zk.StateSuspended || ev[1].State != zk.StateReconnected ||
		ev[1].SessionID != sid || a.SessionID() != sid {
		t.Fatalf("session events %+v, want SUSPENDED, RECONNECTED in session %#x", ev, sid)
	}
	if o := b.stat("/R/eph").EphemeralOwner; o != sid {
		t.Fatalf("the ephemeral's owner is %#x after the reconnect, want %#x", o, sid)
	}
	// d5's watch, missed while cut, is still armed.
	b.mkdir("/R/d5")
	wantEvent(t, await(t, d5), zk.EventNodeCreated, "/R/d5")
}

// The Target contract: while the connection is cut, requests wait; they
// go through once it is back, in the same session.
func sessionRequestsWait(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	sid := a.SessionID()
	w := b.existsW("/e")
	tg.Disconnect(t, a.Conn)
	done := make(chan error, 1)
	go func() {
		_, err := a.Create(a.ctx, "/e", nil, zk.ModeEphemeral)
		done <- err
	}()
	quiet(t, tg, b, w)
	tg.Reconnect(t, a.Conn)
	check(t, <-done)
	wantEvent(t, await(t, w), zk.EventNodeCreated, "/e")
	if o := b.stat("/e").EphemeralOwner; o != sid {
		t.Fatalf("created in session %#x, want %#x", o, sid)
	}
}

// §2: expiry deletes the session's ephemerals and fires other sessions'
// watches; the expired conn sees LOST and then CONNECTED with a new
// session, and its watches end with ErrSessionExpired.
func sessionExpiry(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	log := recordSession(t, a)
	a.mkdir("/P")
	a.create("/P/e", nil, zk.ModeEphemeral)
	own := a.existsW("/P/other")
	we, wp := b.existsW("/P/e"), b.childrenW("/P")
	old := a.SessionID()
	tg.Expire(t, a.Conn)
	wantEvent(t, await(t, we), zk.EventNodeDeleted, "/P/e")
	wantEvent(t, await(t, wp), zk.EventNodeChildrenChanged, "/P")
	if ev := await(t, own); ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrSessionExpired) {
		t.Fatalf("own watch at expiry: %+v", ev)
	}
	lost, conn := log.waitFor(t, zk.StateLost), log.waitFor(t, zk.StateConnected)
	if lost.SessionID != old || conn.SessionID == old || conn.SessionID != a.SessionID() || !lost.Time.Before(conn.Time.Add(time.Nanosecond)) {
		t.Fatalf("LOST %+v, CONNECTED %+v, old session %#x", lost, conn, old)
	}
	if o := b.stat(a.create("/P/e", nil, zk.ModeEphemeral)).EphemeralOwner; o != a.SessionID() {
		t.Fatalf("new ephemeral owned by %#x, want %#x", o, a.SessionID())
	}
}

// Close ends the session at once: CLOSED, then every call fails with
// ErrClosed, and Close is idempotent (a later Close returns nil).
func sessionClose(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	log := recordSession(t, a)
	a.create("/e", nil, zk.ModeEphemeral)
	w := a.existsW("/other")
	check(t, a.Close())
	if b.exists("/e") {
		t.Fatal("the ephemeral outlived Close")
	}
	if ev := await(t, w); ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrClosed) {
		t.Fatalf("watch at Close: %+v", ev)
	}
	if st := log.states(); !slices.Equal(st, []zk.SessionState{zk.StateClosed}) || a.State() != zk.StateClosed {
		t.Fatalf("session events %v, state %v", st, a.State())
	}
	// Every request after Close fails with ErrClosed, before anything is
	// sent; the session id is gone; Close again, also from several
	// goroutines at once, returns nil; a subscription gets no event.
	ctx := a.ctx
	errs := map[string]error{}
	_, errs["create"] = a.Create(ctx, "/x", nil, zk.ModePersistent)
	errs["delete"] = a.Delete(ctx, "/other", zk.AnyVersion)
	_, _, errs["exists"] = a.Exists(ctx, "/")
	_, _, _, errs["existsW"] = a.ExistsW(ctx, "/")
	_, _, errs["get"] = a.Get(ctx, "/")
	_, _, _, errs["getW"] = a.GetW(ctx, "/")
	_, _, errs["children"] = a.Children(ctx, "/")
	_, _, _, errs["childrenW"] = a.ChildrenW(ctx, "/")
	_, errs["set"] = a.Set(ctx, "/", nil, zk.AnyVersion)
	_, errs["multi"] = a.Multi(ctx, &zk.CheckOp{Path: "/", Version: zk.AnyVersion})
	errs["sync"] = a.Sync(ctx, "/")
	for op, err := range errs {
		wantErr(t, op+" after Close", err, zk.ErrClosed)
	}
	if id := a.SessionID(); id != 0 {
		t.Fatalf("session id %#x after Close, want 0", id)
	}
	cancel := a.Subscribe(func(ev zk.SessionEvent) { t.Errorf("session event %v after Close", ev) })
	defer cancel()
	closes := make(chan error, 3)
	for range 3 {
		go func() { closes <- a.Close() }()
	}
	for range 3 {
		wantErr(t, "a later Close", <-closes, nil)
	}
	if a.State() != zk.StateClosed {
		t.Fatalf("state %v after the later Closes", a.State())
	}
}

// The Target contract: a lost reply was applied, the caller cannot tell,
// and the connection comes back on the same session.
func faultLostReply(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	w := a.childrenW("/P")
	log := recordSession(t, a)
	sid := a.SessionID()
	f := tg.LoseNextReply(t, a.Conn, OpCreate, "/P/")
	_, err := a.Create(a.ctx, "/P/n-", nil, zk.ModeEphemeralSequential)
	wantErr(t, "create whose reply is lost", err, zk.ErrConnectionLoss)
	select {
	case <-f.Fired():
	default:
		t.Fatal("the lost reply's fault does not say it fired")
	}
	if f.Disarm() {
		t.Fatal("Disarm of a fault that fired reports it disarmed")
	}
	log.waitFor(t, zk.StateSuspended)
	if ev := log.waitFor(t, zk.StateReconnected); ev.SessionID != sid {
		t.Fatalf("reconnected in session %#x, want %#x", ev.SessionID, sid)
	}
	if o := b.stat("/P/n-0000000000").EphemeralOwner; o != sid {
		t.Fatalf("the lost create's node owned by %#x, want %#x", o, sid)
	}
	// The session's watch fires once: before the lost reply, or in the
	// replay after the reconnect.
	wantEvent(t, await(t, w), zk.EventNodeChildrenChanged, "/P")
}

// The Target contract: a held reply's request is applied at once; the
// caller gets the reply when it is released.
func faultHeldReply(t *testing.T, tg Target) {
	ss := connect(t, tg, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/P")
	w := a.getW("/P")
	f := tg.HoldNextReply(t, a.Conn, OpCreate, "/P/")
	type result struct {
		path string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		p, err := a.Create(a.ctx, "/P/n-", nil, zk.ModeEphemeralSequential)
		done <- result{p, err}
	}()
	select {
	case <-f.Fired():
	case <-time.After(20 * time.Second):
		t.Fatal("the held request was not applied")
	}
	if !b.exists("/P/n-0000000000") {
		t.Fatal("the held create is not visible to another session")
	}
	// The watch events that come meanwhile are held with the reply.
	b.set("/P", []byte("x"))
	if tg.Name() != "sim" {
		<-time.After(50 * time.Millisecond) // an observation window for an absence
	}
	undelivered(t, w)
	select {
	case r := <-done:
		t.Fatalf("the reply was not held: %+v", r)
	default:
	}
	f.Release()
	if r := <-done; r.err != nil || r.path != "/P/n-0000000000" {
		t.Fatalf("held reply %+v", r)
	}
	wantEvent(t, await(t, w), zk.EventNodeDataChanged, "/P")
}

// The Target contract: a reply fault that no request matched yet can be
// disarmed (Disarm, or Release for a held one), and then takes nothing;
// requests of another kind or path do not take a fault.
func faultDisarm(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	a.mkdir("/P")
	log := recordSession(t, a)
	lost := tg.LoseNextReply(t, a.Conn, OpCreate, "/P/")
	held := tg.HoldNextReply(t, a.Conn, OpSet, "/P")
	a.create("/Q", nil, zk.ModePersistent) // another path
	a.set("/Q", []byte("q"))               // another path
	a.get("/P")                            // another kind
	if !lost.Disarm() {
		t.Fatal("Disarm of a lost-reply fault that no request matched: not disarmed")
	}
	if lost.Disarm() {
		t.Fatal("a second Disarm reports it disarmed")
	}
	held.Release()
	if held.Disarm() {
		t.Fatal("Disarm after Release reports it disarmed")
	}
	a.create("/P/n", nil, zk.ModePersistent) // neither lost
	a.set("/P", []byte("p"))                 // nor held
	for _, f := range []*ReplyFault{lost, held} {
		select {
		case <-f.Fired():
			t.Fatal("a disarmed fault fired")
		default:
		}
	}
	if evs := log.events(); len(evs) != 0 {
		t.Fatalf("session events after disarmed faults: %v", evs)
	}
}

// §10: a request frame over jute.maxbuffer makes the server drop the
// connection unanswered (nothing applied, the session survives); one over
// the client's 1.5 MiB buffer is never sent.
func limitsFrame(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	log := recordSession(t, a)
	sid := a.SessionID()
	path := "/" + strings.Repeat("p", 41) // 42 bytes: a create frame of exactly 0xfffff
	a.create(path, make([]byte, 1048486), zk.ModePersistent)
	_, err := a.Create(a.ctx, path+"x", make([]byte, 1048486), zk.ModePersistent)
	wantErr(t, "create one byte over", err, zk.ErrConnectionLoss)
	if ev := log.waitFor(t, zk.StateReconnected); ev.SessionID != sid {
		t.Fatalf("reconnected in session %#x, want %#x", ev.SessionID, sid)
	}
	if a.exists(path + "x") {
		t.Fatal("the oversized create was applied")
	}
	_, err = a.Set(a.ctx, path, make([]byte, 1536*1024), -1)
	wantErr(t, "set over the client's buffer", err, zk.ErrBadArguments)
	wantErr(t, "set over the client's buffer", err, zk.ErrRequestTooLarge)
	if err.Error() != zk.ErrRequestTooLarge.Error() { // one text on every target
		t.Fatalf("set over the client's buffer: %q, want %q", err, zk.ErrRequestTooLarge)
	}
	if st := a.stat(path); st.Version != 0 {
		t.Fatalf("version %d after refused sets", st.Version)
	}
}

// §9: sync returns at once, for any path, and changes nothing.
func syncNoop(t *testing.T, tg Target) {
	a := connect(t, tg, 1)[0]
	z1 := a.stat(a.create("/s1", nil, zk.ModePersistent)).Czxid
	for _, p := range []string{"/", "/s1", "/missing", "/zookeeper"} {
		check(t, a.Sync(a.ctx, p))
	}
	if z2 := a.stat(a.create("/s2", nil, zk.ModePersistent)).Czxid; z2 != z1+1 {
		t.Fatalf("czxids %#x then %#x: sync took a zxid", z1, z2)
	}
}
