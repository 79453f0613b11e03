package zk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const eventWait = 10 * time.Second

func TestConnectRefusesBadInput(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		servers []string
		opts    []Option
		want    error
	}{
		{"no servers", nil, nil, ErrNoServers},
		{"empty address", []string{"127.0.0.1:1", ""}, nil, ErrNoServers},
		{"zero session timeout", []string{"127.0.0.1:1"}, []Option{WithSessionTimeout(0)}, ErrBadArguments},
		{"huge session timeout", []string{"127.0.0.1:1"}, []Option{WithSessionTimeout(math.MaxInt64)}, ErrBadArguments},
		{"zero backoff", []string{"127.0.0.1:1"}, []Option{WithReconnectBackoff(0, time.Second)}, ErrBadArguments},
		{"max below base", []string{"127.0.0.1:1"}, []Option{WithReconnectBackoff(time.Second, time.Millisecond)}, ErrBadArguments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Connect(ctx, tc.servers, tc.opts...)
			if !errors.Is(err, tc.want) || c != nil {
				t.Fatalf("Connect = %v, %v; want nil, %v", c, err, tc.want)
			}
		})
	}
}

func TestConnectEndsWithItsContext(t *testing.T) {
	// A port nobody listens on: every dial is refused, the backoff runs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := Connect(canceled, []string{addr}); err != context.Canceled || c != nil {
		t.Fatalf("Connect(canceled ctx) = %v, %v", c, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	c, err := Connect(ctx, []string{addr})
	if err != context.DeadlineExceeded || c != nil {
		t.Fatalf("Connect to a dead port = %v, %v; want context.DeadlineExceeded", c, err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("Connect returned %v after its deadline", d)
	}
	// TestMain's goleak check verifies that nothing of it is left running.
}

func TestCRUD(t *testing.T) {
	c := connect(t, needServer(t))
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)

	if c.State() != StateConnected || c.SessionID() == 0 {
		t.Fatalf("after Connect: state %v, session %x", c.State(), c.SessionID())
	}

	p, err := c.Create(ctx, root+"/a", []byte("one"), ModePersistent)
	if err != nil || p != root+"/a" {
		t.Fatalf("Create = %q, %v", p, err)
	}
	if _, err := c.Create(ctx, root+"/a", nil, ModePersistent); !errors.Is(err, ErrNodeExists) {
		t.Fatalf("Create existing: %v, want ErrNodeExists", err)
	}
	if _, err := c.Create(ctx, root+"/missing/x", nil, ModePersistent); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Create under a missing parent: %v, want ErrNoNode", err)
	}
	if _, err := c.Create(ctx, root+"/a", nil, CreateMode(42)); !errors.Is(err, ErrBadArguments) {
		t.Fatalf("Create with mode 42: %v, want ErrBadArguments", err)
	}

	data, st, err := c.Get(ctx, root+"/a")
	if err != nil || string(data) != "one" || st.Version != 0 || st.DataLength != 3 || st.Czxid == 0 || st.EphemeralOwner != 0 {
		t.Fatalf("Get = %q, %+v, %v", data, st, err)
	}
	st2, err := c.Set(ctx, root+"/a", []byte("two"), 0)
	if err != nil || st2.Version != 1 || st2.Czxid != st.Czxid || st2.Mzxid <= st.Mzxid {
		t.Fatalf("Set = %+v, %v", st2, err)
	}
	if _, err := c.Set(ctx, root+"/a", []byte("x"), 0); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("Set with a stale version: %v, want ErrBadVersion", err)
	}
	if _, err := c.Set(ctx, root+"/missing", nil, AnyVersion); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Set missing: %v, want ErrNoNode", err)
	}
	if _, _, err := c.Get(ctx, root+"/missing"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Get missing: %v, want ErrNoNode", err)
	}

	st3, ok, err := c.Exists(ctx, root+"/a")
	if err != nil || !ok || st3 != st2 {
		t.Fatalf("Exists = %+v, %v, %v; want %+v", st3, ok, err, st2)
	}
	if st, ok, err := c.Exists(ctx, root+"/missing"); err != nil || ok || st != (Stat{}) {
		t.Fatalf("Exists missing = %+v, %v, %v", st, ok, err)
	}

	e, err := c.Create(ctx, root+"/e", nil, ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	if _, st, err := c.Get(ctx, e); err != nil || st.EphemeralOwner != c.SessionID() {
		t.Fatalf("ephemeral owner %x, session %x, err %v", st.EphemeralOwner, c.SessionID(), err)
	}
	if _, err := c.Create(ctx, e+"/child", nil, ModePersistent); !errors.Is(err, ErrNoChildrenForEphemerals) {
		t.Fatalf("child of an ephemeral: %v, want ErrNoChildrenForEphemerals", err)
	}

	names, pst, err := c.Children(ctx, root)
	sort.Strings(names)
	if err != nil || fmt.Sprint(names) != "[a e]" || pst.NumChildren != 2 {
		t.Fatalf("Children = %v, %+v, %v", names, pst, err)
	}
	if names, _, err := c.Children(ctx, root+"/a"); err != nil || names == nil || len(names) != 0 {
		t.Fatalf("Children of a leaf = %#v, %v; want empty", names, err)
	}
	if err := c.Delete(ctx, root, AnyVersion); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Delete non-empty: %v, want ErrNotEmpty", err)
	}
	if err := c.Delete(ctx, root+"/a", 0); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("Delete with a stale version: %v, want ErrBadVersion", err)
	}
	if err := c.Delete(ctx, root+"/a", 1); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := c.Delete(ctx, root+"/a", AnyVersion); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Delete missing: %v, want ErrNoNode", err)
	}
	if err := c.Sync(ctx, root); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func TestSequentialNames(t *testing.T) {
	c := connect(t, needServer(t))
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)
	seq := regexp.MustCompile(`^` + regexp.QuoteMeta(root) + `/(lock|q)-(\d{10})$`)
	var got []string
	for i, m := range []CreateMode{ModePersistentSequential, ModeEphemeralSequential, ModePersistentSequential} {
		prefix := root + "/lock-"
		if i == 2 {
			prefix = root + "/q-"
		}
		p, err := c.Create(ctx, prefix, nil, m)
		if err != nil {
			t.Fatal(err)
		}
		sm := seq.FindStringSubmatch(p)
		if sm == nil {
			t.Fatalf("sequential name %q", p)
		}
		got = append(got, sm[2])
	}
	// One counter per parent, whatever the prefix.
	if fmt.Sprint(got) != "[0000000000 0000000001 0000000002]" {
		t.Fatalf("suffixes %v", got)
	}
	if _, err := c.Create(ctx, root+"/", nil, ModePersistentSequential); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("sequential create with a trailing slash: %v, want ErrInvalidPath", err)
	}
}

func TestWatches(t *testing.T) {
	addr := needServer(t)
	c := connect(t, addr)
	other := connect(t, addr)
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)
	n := root + "/n"

	// Existence watch on a missing node fires on create.
	st, ok, ch, err := c.ExistsW(ctx, n)
	if err != nil || ok || st != (Stat{}) {
		t.Fatalf("ExistsW missing = %+v, %v, %v", st, ok, err)
	}
	if _, err := other.Create(ctx, n, []byte("x"), ModePersistent); err != nil {
		t.Fatal(err)
	}
	if ev := waitWatch(t, ch, eventWait); ev != (WatchEvent{Type: EventNodeCreated, Path: n}) {
		t.Fatalf("ExistsW event %+v", ev)
	}

	// Data watch from Get fires on set.
	if _, _, ch, err = c.GetW(ctx, n); err != nil {
		t.Fatal(err)
	}
	// Data watch from ExistsW on an existing node fires on set too.
	_, ok, ch2, err := c.ExistsW(ctx, n)
	if err != nil || !ok {
		t.Fatalf("ExistsW existing: %v, %v", ok, err)
	}
	if _, err := other.Set(ctx, n, []byte("y"), AnyVersion); err != nil {
		t.Fatal(err)
	}
	for _, w := range []<-chan WatchEvent{ch, ch2} {
		if ev := waitWatch(t, w, eventWait); ev != (WatchEvent{Type: EventNodeDataChanged, Path: n}) {
			t.Fatalf("data watch event %+v", ev)
		}
	}

	// Child watch fires on a child create.
	_, _, ch, err = c.ChildrenW(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(ctx, root+"/kid", nil, ModeEphemeral); err != nil {
		t.Fatal(err)
	}
	if ev := waitWatch(t, ch, eventWait); ev != (WatchEvent{Type: EventNodeChildrenChanged, Path: root}) {
		t.Fatalf("ChildrenW event %+v", ev)
	}

	// Delete fires the data watch and the node's own child watch.
	_, _, ch, err = c.GetW(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	_, _, ch2, err = c.ChildrenW(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(ctx, n, AnyVersion); err != nil {
		t.Fatal(err)
	}
	for _, w := range []<-chan WatchEvent{ch, ch2} {
		if ev := waitWatch(t, w, eventWait); ev != (WatchEvent{Type: EventNodeDeleted, Path: n}) {
			t.Fatalf("watch event on delete %+v", ev)
		}
	}

	// No watch is left on a missing node by GetW or ChildrenW.
	if _, _, ch, err := c.GetW(ctx, n); !errors.Is(err, ErrNoNode) || ch != nil {
		t.Fatalf("GetW missing = %v, %v", ch, err)
	}
	if _, _, ch, err := c.ChildrenW(ctx, n); !errors.Is(err, ErrNoNode) || ch != nil {
		t.Fatalf("ChildrenW missing = %v, %v", ch, err)
	}
}

func TestMulti(t *testing.T) {
	addr := needServer(t)
	c := connect(t, addr)
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)
	if _, err := c.Create(ctx, root+"/a", nil, ModePersistent); err != nil {
		t.Fatal(err)
	}

	res, err := c.Multi(ctx,
		&CheckOp{Path: root + "/a", Version: 0},
		&SetOp{Path: root + "/a", Data: []byte("v1"), Version: 0},
		&CreateOp{Path: root + "/s-", Mode: ModeEphemeralSequential},
		&CreateOp{Path: root + "/b", Data: []byte("b"), Mode: ModePersistent},
		&DeleteOp{Path: root + "/b", Version: 0},
	)
	if err != nil || len(res) != 5 {
		t.Fatalf("Multi = %+v, %v", res, err)
	}
	if res[1].Stat.Version != 1 || res[2].Path != root+"/s-0000000001" || res[3].Path != root+"/b" {
		t.Fatalf("Multi results %+v", res)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("op %d: %v", i, r.Err)
		}
	}
	if _, st, err := c.Get(ctx, res[2].Path); err != nil || st.EphemeralOwner != c.SessionID() {
		t.Fatalf("node created in a multi: %+v, %v", st, err)
	}

	// A failing op: nothing applied, its error first, later ops skipped.
	res, err = c.Multi(ctx,
		&CreateOp{Path: root + "/x1", Mode: ModePersistent},
		&CheckOp{Path: root + "/a", Version: 7},
		&CreateOp{Path: root + "/x3", Mode: ModePersistent},
	)
	if !errors.Is(err, ErrBadVersion) || len(res) != 3 {
		t.Fatalf("failing Multi = %+v, %v; want ErrBadVersion", res, err)
	}
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrBadVersion) || !errors.Is(res[2].Err, ErrRuntimeInconsistency) {
		t.Fatalf("failing Multi results %+v", res)
	}
	for _, p := range []string{root + "/x1", root + "/x3"} {
		if _, ok, err := c.Exists(ctx, p); ok || err != nil {
			t.Fatalf("%s after a failed multi: exists %v, %v", p, ok, err)
		}
	}

	// Refused before anything is sent.
	for _, tc := range []struct {
		name string
		ops  []Op
		want error
	}{
		{"container", []Op{&CreateOp{Path: root + "/c", Mode: ModeContainer}}, ErrBadArguments},
		{"bad mode", []Op{&CreateOp{Path: root + "/c", Mode: 9}}, ErrBadArguments},
		{"nil op", []Op{nil}, ErrBadArguments},
		{"nil create", []Op{(*CreateOp)(nil)}, ErrBadArguments},
		{"bad path", []Op{&CheckOp{Path: root + "/a"}, &DeleteOp{Path: root + "//a"}}, ErrInvalidPath},
	} {
		if res, err := c.Multi(ctx, tc.ops...); !errors.Is(err, tc.want) || res != nil {
			t.Errorf("%s: Multi = %v, %v; want %v", tc.name, res, err, tc.want)
		}
	}
}

func TestContainer(t *testing.T) {
	c := connect(t, needServer(t))
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)
	box := root + "/box"
	if p, err := c.Create(ctx, box, nil, ModeContainer); err != nil || p != box {
		t.Fatalf("Create container = %q, %v", p, err)
	}
	kid, err := c.Create(ctx, box+"/k", nil, ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := c.ExistsW(ctx, box)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, kid, AnyVersion); err != nil {
		t.Fatal(err)
	}
	// The server (container check every 100 ms) reaps the emptied container:
	// it really is one, ZooKeeper 3.8 needs no fallback.
	if ev := waitWatch(t, ch, eventWait); ev != (WatchEvent{Type: EventNodeDeleted, Path: box}) {
		t.Fatalf("container watch event %+v", ev)
	}
	if c.(*client).noContainers.Load() {
		t.Fatal("fell back to persistent nodes on a server with containers")
	}
}

func TestInvalidInputSendsNothing(t *testing.T) {
	p := newProxy(t, needServer(t))
	c := connect(t, p.Addr())
	ctx := testCtx(t, 30*time.Second)
	canceled, cancel := context.WithCancel(ctx)
	cancel()

	before := p.Requests()
	for _, bad := range []string{"", "a", "/a/", "/a//b", "/a/./b", "/a/..", "/a\x00b", "/a\x01"} {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, ErrInvalidPath) {
				t.Errorf("%s(%q): %v, want ErrInvalidPath", op, bad, err)
			}
		}
		_, err := c.Create(ctx, bad, nil, ModePersistent)
		check("Create", err)
		_, err = c.Create(ctx, bad, nil, ModeContainer)
		check("Create container", err)
		check("Delete", c.Delete(ctx, bad, AnyVersion))
		_, _, err = c.Exists(ctx, bad)
		check("Exists", err)
		_, _, _, err = c.ExistsW(ctx, bad)
		check("ExistsW", err)
		_, _, err = c.Get(ctx, bad)
		check("Get", err)
		_, _, _, err = c.GetW(ctx, bad)
		check("GetW", err)
		_, _, err = c.Children(ctx, bad)
		check("Children", err)
		_, _, _, err = c.ChildrenW(ctx, bad)
		check("ChildrenW", err)
		_, err = c.Set(ctx, bad, nil, AnyVersion)
		check("Set", err)
		_, err = c.Multi(ctx, &SetOp{Path: bad})
		check("Multi", err)
		check("Sync", c.Sync(ctx, bad))
	}
	if _, err := c.Multi(ctx, &CreateOp{Path: "/c", Mode: ModeContainer}); !errors.Is(err, ErrBadArguments) {
		t.Errorf("container in Multi: %v", err)
	}
	if _, _, err := c.Get(canceled, "/"); err != context.Canceled {
		t.Errorf("Get with a canceled ctx: %v, want context.Canceled", err)
	}
	// One real request to compare with: exactly one more on the wire.
	if err := c.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	if got := p.Requests() - before; got != 1 {
		t.Fatalf("%d requests reached the server, want only the final Sync", got)
	}
}

func TestCallReturnsWhenContextEnds(t *testing.T) {
	p := newProxy(t, needServer(t))
	c := connect(t, p.Addr(), WithSessionTimeout(4*time.Second))
	rec := record(t, c)
	p.Blackhole() // requests go out and nothing comes back

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, _, err := c.Get(ctx, "/")
	if err != context.DeadlineExceeded {
		t.Fatalf("Get on a silent connection: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("Get returned %v after its 100 ms deadline", d)
	}
	rec.none(t) // the connection has not even been noticed dead yet
	p.Restore()
}

func TestCloseEndsEverything(t *testing.T) {
	addr := needServer(t)
	c := connect(t, addr)
	other := connect(t, addr)
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)
	rec := record(t, c)
	sid := c.SessionID()

	e, err := c.Create(ctx, root+"/e", nil, ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	// A watch the close itself does not fire (the ephemeral's deletion
	// would: the closing session is notified of it before the reply).
	_, _, watch, err := c.GetW(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	_, _, otherWatch, err := other.ExistsW(ctx, e)
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(t0))
	if ev := rec.expect(t, eventWait, StateClosed); ev[0].SessionID != sid {
		t.Fatalf("CLOSED for session %x, want %x", ev[0].SessionID, sid)
	}
	rec.none(t)
	if ev := waitWatch(t, watch, eventWait); ev.Type != EventNotWatching || ev.Err != ErrClosed {
		t.Fatalf("watch after Close: %+v, want NotWatching/ErrClosed", ev)
	}
	// The server dropped the session at once: its ephemeral is gone.
	if ev := waitWatch(t, otherWatch, eventWait); ev != (WatchEvent{Type: EventNodeDeleted, Path: e}) {
		t.Fatalf("other session saw %+v, want the ephemeral deleted", ev)
	}

	if c.State() != StateClosed || c.SessionID() != 0 {
		t.Fatalf("after Close: state %v, session %x", c.State(), c.SessionID())
	}
	if _, _, err := c.Get(ctx, "/"); err != ErrClosed {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Multi(ctx, &CheckOp{Path: "/", Version: AnyVersion}); err != ErrClosed {
		t.Fatalf("Multi after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil (Close is idempotent)", err)
	}
	c.Subscribe(func(SessionEvent) { t.Error("event after Close") })
}

func TestCloseWhileDisconnected(t *testing.T) {
	p := newProxy(t, needServer(t))
	c := connect(t, p.Addr(), WithSessionTimeout(time.Second))
	rec := record(t, c)
	ctx := testCtx(t, 30*time.Second)
	_, _, watch, err := c.GetW(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	rec.expect(t, eventWait, StateSuspended)

	// A request waiting for a connection ends with Close.
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Get(ctx, "/")
		done <- err
	}()
	t0 := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	d := time.Since(t0)
	t.Logf("Close while disconnected took %v", d)
	if d > 3*time.Second {
		t.Fatalf("Close while disconnected took %v", d)
	}
	rec.expect(t, eventWait, StateClosed)
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending Get: %v, want ErrClosed", err)
	}
	if ev := waitWatch(t, watch, eventWait); ev.Type != EventNotWatching || ev.Err != ErrClosed {
		t.Fatalf("watch: %+v", ev)
	}
}

func TestSessionExpiry(t *testing.T) {
	addr := needServer(t)
	p := newProxy(t, addr)
	// A short backoff cap, so the redial after Restore comes soon.
	c := connect(t, p.Addr(), WithSessionTimeout(time.Second), WithReconnectBackoff(5*time.Millisecond, 50*time.Millisecond))
	observer := connect(t, addr)
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)
	rec := record(t, c)
	old := c.SessionID()

	e, err := c.Create(ctx, root+"/e", nil, ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := c.GetW(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := observer.ExistsW(ctx, e)
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	p.Blackhole()
	// The silent connection is noticed after 2/3 of the session timeout.
	if ev := rec.expect(t, eventWait, StateSuspended); ev[0].SessionID != old {
		t.Fatalf("SUSPENDED for %x, want %x", ev[0].SessionID, old)
	}
	t.Logf("SUSPENDED %v after the black hole", time.Since(t0))
	// The server expires the session: its ephemeral goes.
	if ev := waitWatch(t, gone, eventWait); ev.Type != EventNodeDeleted {
		t.Fatalf("observer saw %+v", ev)
	}
	t.Logf("session expired on the server %v after the black hole", time.Since(t0))
	if c.State() != StateSuspended || c.SessionID() != old {
		t.Fatalf("before reconnecting: %v, session %x", c.State(), c.SessionID())
	}
	rec.none(t)

	p.Restore()
	evs := rec.expect(t, eventWait, StateLost, StateConnected)
	if evs[0].SessionID != old || evs[1].SessionID == old || evs[1].SessionID == 0 {
		t.Fatalf("LOST(%x) CONNECTED(%x), old session %x", evs[0].SessionID, evs[1].SessionID, old)
	}
	t.Logf("LOST and CONNECTED %v after the black hole", time.Since(t0))
	if c.SessionID() != evs[1].SessionID || c.State() != StateConnected {
		t.Fatalf("after the new session: %v, session %x", c.State(), c.SessionID())
	}
	if ev := waitWatch(t, watch, eventWait); ev.Type != EventNotWatching || ev.Err != ErrSessionExpired || ev.Path != root {
		t.Fatalf("watch of the expired session: %+v", ev)
	}
	// The new session works and owns what it creates.
	e2, err := c.Create(ctx, root+"/e2", nil, ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	if _, st, err := c.Get(ctx, e2); err != nil || st.EphemeralOwner != evs[1].SessionID {
		t.Fatalf("new ephemeral: %+v, %v", st, err)
	}
}

func TestCutKeepsTheSessionAndReconnectsFast(t *testing.T) {
	addr := needServer(t)
	p := newProxy(t, addr)
	c := connect(t, p.Addr(), WithSessionTimeout(4*time.Second))
	other := connect(t, addr)
	ctx := testCtx(t, 60*time.Second)
	root := testRoot(t, c)
	rec := record(t, c)
	sid := c.SessionID()

	e, err := c.Create(ctx, root+"/e", nil, ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := c.ChildrenW(ctx, root)
	if err != nil {
		t.Fatal(err)
	}

	const cuts = 20
	lat := make([]time.Duration, 0, cuts)
	for i := range cuts {
		t0 := time.Now()
		p.Cut()
		evs := rec.expect(t, eventWait, StateSuspended, StateReconnected)
		lat = append(lat, evs[1].Time.Sub(t0))
		for _, ev := range evs {
			if ev.SessionID != sid {
				t.Fatalf("cut %d: %v for session %x, want %x", i, ev.State, ev.SessionID, sid)
			}
		}
		// The connection works again.
		if err := c.Sync(ctx, "/"); err != nil {
			t.Fatalf("cut %d: Sync: %v", i, err)
		}
	}
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("reconnect after a cut, %d cuts: p50 %v, p99 %v, min %v, max %v", cuts, p50, p99, lat[0], lat[len(lat)-1])
	if p50 >= 50*time.Millisecond {
		t.Fatalf("reconnect p50 %v, want < 50 ms", p50)
	}

	// The session survived: its ephemeral is there and its watch still armed.
	if _, st, err := c.Get(ctx, e); err != nil || st.EphemeralOwner != sid {
		t.Fatalf("ephemeral after the cuts: %+v, %v", st, err)
	}
	noWatch(t, watch)
	if _, err := other.Create(ctx, root+"/kid", nil, ModeEphemeral); err != nil {
		t.Fatal(err)
	}
	if ev := waitWatch(t, watch, eventWait); ev != (WatchEvent{Type: EventNodeChildrenChanged, Path: root}) {
		t.Fatalf("watch after the cuts: %+v", ev)
	}
}

func TestUnansweredHandshakeIsAbandoned(t *testing.T) {
	addr := needServer(t)
	p := newProxy(t, addr)
	const session = 3 * time.Second
	c := connect(t, p.Addr(), WithSessionTimeout(session))
	rec := record(t, c)
	sid := c.SessionID()

	// The next connection is taken and never served, as ZooKeeper 3.8 does
	// with one that asks for a session while it loads its database.
	// go-zookeeper alone would wait 20 s for the handshake reply, and the
	// session would expire.
	p.MuteNext(1)
	t0 := time.Now()
	p.Cut()
	evs := rec.expect(t, eventWait, StateSuspended, StateReconnected)
	took := evs[1].Time.Sub(t0)
	t.Logf("reconnected after %v with one unanswered handshake", took)
	if evs[1].SessionID != sid {
		t.Fatalf("RECONNECTED for session %x, want %x", evs[1].SessionID, sid)
	}
	if bound := handshakeTimeout(session); took < bound {
		t.Fatalf("reconnected after %v, before the handshake bound %v: the mute connection was not dialled", took, bound)
	}
	if err := c.Sync(testCtx(t, 10*time.Second), "/"); err != nil {
		t.Fatalf("Sync after the reconnect: %v", err)
	}
}

func TestHandshakeGuard(t *testing.T) {
	t.Run("reply read in pieces stops the timer", func(t *testing.T) {
		client, server := net.Pipe()
		defer server.Close()
		g := newHandshakeGuard(client, time.Hour)
		defer g.Close()
		go server.Write([]byte{0, 0, 0, 5, 1, 2, 3, 4, 5})
		buf := make([]byte, 3)
		for i, want := range []bool{false, false, true} {
			if _, err := io.ReadFull(g, buf); err != nil {
				t.Fatal(err)
			}
			if g.replyRead() != want {
				t.Fatalf("after read %d: replyRead = %v (%d header bytes, %d body bytes to go), want %v", i, !want, g.got, g.body, want)
			}
		}
	})
	t.Run("reply cut short closes the connection", func(t *testing.T) {
		client, server := net.Pipe()
		defer server.Close()
		g := newHandshakeGuard(client, 50*time.Millisecond)
		defer g.Close()
		go server.Write([]byte{0, 0, 0, 5, 1, 2})
		buf := make([]byte, 9)
		if n, err := io.ReadFull(g, buf); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("read %d bytes, %v; want io.ErrClosedPipe", n, err)
		}
	})
}

func TestSubscribers(t *testing.T) {
	p := newProxy(t, needServer(t))
	c := connect(t, p.Addr())
	var got [3][]string
	cancels := make([]func(), 3)
	done := make(chan struct{})
	for i := range cancels {
		cancels[i] = c.Subscribe(func(ev SessionEvent) {
			got[i] = append(got[i], ev.State.String())
			// Subscribers are called in order: the last active one seeing
			// RECONNECTED means every one has.
			if i == 1 && ev.State == StateReconnected {
				close(done)
			}
		})
	}
	cancels[2]()
	p.Cut()
	select {
	case <-done:
	case <-time.After(eventWait):
		t.Fatal("no RECONNECTED")
	}
	cancels[1]()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"[SUSPENDED RECONNECTED CLOSED]", "[SUSPENDED RECONNECTED]", "[]"}
	for i := range got {
		if s := fmt.Sprint(got[i]); s != want[i] {
			t.Errorf("subscriber %d got %s, want %s", i, s, want[i])
		}
	}
}

func TestLoggerGetsGoZookeeperLines(t *testing.T) {
	p := newProxy(t, needServer(t))
	var buf bytes.Buffer
	c := connect(t, p.Addr(), WithLogger(zerolog.New(zerolog.SyncWriter(&buf))))
	rec := record(t, c)
	p.Cut()
	rec.expect(t, eventWait, StateSuspended, StateReconnected)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Read after Close: go-zookeeper's goroutines are done writing.
	out := buf.String()
	if !strings.Contains(out, `"level":"warn","component":"go-zookeeper"`) || !strings.Contains(out, "recv loop terminated") {
		t.Fatalf("log has no go-zookeeper warning about the cut:\n%s", out)
	}
	if strings.Contains(out, "authenticated: id=") || strings.Contains(out, "connected to") {
		t.Fatalf("go-zookeeper's info lines were not switched off:\n%s", out)
	}
}

// A watch costs no goroutine: its event comes from the event callback,
// in the server's order. 200 armed watches leave the goroutine count
// where it was, and each fires once on its node's change.
func TestAWatchHoldsNoGoroutine(t *testing.T) {
	addr := needServer(t)
	c := connect(t, addr)
	other := connect(t, addr)
	ctx := testCtx(t, 30*time.Second)
	root := testRoot(t, c)
	const n = 200
	for i := range n {
		if _, err := c.Create(ctx, fmt.Sprintf("%s/n%d", root, i), nil, ModePersistent); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()
	chs := make([]<-chan WatchEvent, n)
	for i := range n {
		_, _, ch, err := c.GetW(ctx, fmt.Sprintf("%s/n%d", root, i))
		if err != nil {
			t.Fatal(err)
		}
		chs[i] = ch
	}
	if d := runtime.NumGoroutine() - before; d > n/10 {
		t.Fatalf("%d goroutines more with %d watches armed, want none per watch", d, n)
	}
	for i := range n {
		if _, err := other.Set(ctx, fmt.Sprintf("%s/n%d", root, i), []byte("x"), AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range chs {
		if ev := waitWatch(t, ch, eventWait); ev != (WatchEvent{Type: EventNodeDataChanged, Path: fmt.Sprintf("%s/n%d", root, i)}) {
			t.Fatalf("watch %d: %+v", i, ev)
		}
	}
}
