package testkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// Tests of what only the simulator has: determinism, its own hooks, and the
// fault verbs in detail. The ZooKeeper behaviours it shares with a real
// server are in conformance_test.go.

// simSessions connects n sessions to s.
func simSessions(t *testing.T, s *Sim, n int) []session {
	var out []session
	for range n {
		out = append(out, newSession(t, s.Connect()))
	}
	return out
}

// transcript runs a fixed script of requests and faults on a fresh Sim and
// returns every observation as text.
func transcript(t *testing.T, opts ...SimOption) []string {
	clock := time.UnixMilli(1_700_000_000_000)
	tick := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	s := NewSim(append([]SimOption{WithClock(tick)}, opts...)...)
	defer s.Close()
	var out []string
	note := func(f string, args ...any) { out = append(out, fmt.Sprintf(f, args...)) }
	ss := simSessions(t, s, 2)
	a, b := ss[0], ss[1]
	la := recordSession(t, a)
	a.create("/q", nil, zk.ModeContainer)
	w := b.childrenW("/q")
	for i := range 12 {
		c := a
		if i%3 == 0 {
			c = b
		}
		p, err := c.Create(c.ctx, "/q/item-", []byte{byte(i)}, zk.ModeEphemeralSequential)
		note("create %s %v", p, err)
	}
	note("watch %+v", delivered(t, w))
	names, st, err := b.Children(b.ctx, "/q")
	note("children %v %+v %v", names, st, err)
	res, err := a.Multi(a.ctx, &zk.DeleteOp{Path: "/q/item-0000000001", Version: 0},
		&zk.CreateOp{Path: "/q/m-", Mode: zk.ModePersistentSequential}, &zk.CheckOp{Path: "/nope", Version: -1})
	note("multi %+v %v", res, err)
	s.Disconnect(a.Conn)
	b.set("/q/item-0000000002", []byte("x"))
	s.Reconnect(a.Conn)
	s.Expire(b.Conn)
	names, st, err = a.Children(a.ctx, "/q")
	note("children %v %+v %v", names, st, err)
	note("session a %v, b %x", la.events(), b.SessionID())
	return out
}

func TestSimDeterministic(t *testing.T) {
	first, second := transcript(t), transcript(t)
	if !slices.Equal(first, second) {
		t.Fatalf("two runs differ:\n%s\n---\n%s", strings.Join(first, "\n"), strings.Join(second, "\n"))
	}
	if other := transcript(t, WithSeed(42)); slices.Equal(first, other) {
		t.Fatal("another seed gave the same child order")
	}
}

func TestSimSessionIDsAndZxids(t *testing.T) {
	s := NewSim()
	defer s.Close()
	ss := simSessions(t, s, 2)
	if ss[0].SessionID() != 0x0100000000000001 || ss[1].SessionID() != 0x0100000000000002 {
		t.Fatalf("session ids %x %x", ss[0].SessionID(), ss[1].SessionID())
	}
	ss[0].mkdir("/z")
	if st := ss[0].stat("/z"); st.Czxid != 3 { // two createSessions, then this create
		t.Fatalf("czxid %d", st.Czxid)
	}
}

func TestSimChildrenOrder(t *testing.T) {
	s := NewSim()
	defer s.Close()
	ss := simSessions(t, s, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/p")
	a.mkdir("/p/a")
	a.mkdir("/p/b")
	if two := a.children("/p"); !slices.Equal(two, []string{"b", "a"}) {
		t.Fatalf("two children listed %v, want them never sorted", two)
	}
	for i := range 20 {
		a.mkdir(fmt.Sprintf("/p/n%02d", i))
	}
	first, again := a.children("/p"), b.children("/p")
	if slices.IsSorted(first) || !slices.Equal(first, again) {
		t.Fatalf("order %v then %v: want unsorted and stable", first, again)
	}
}

func TestSimSetSequenceWraps(t *testing.T) {
	s := NewSim()
	defer s.Close()
	c := simSessions(t, s, 1)[0]
	c.mkdir("/w")
	check(t, s.SetSequence("/w", 2147483646))
	var got []string
	for range 3 {
		got = append(got, c.create("/w/n-", nil, zk.ModePersistentSequential))
	}
	if want := []string{"/w/n-2147483646", "/w/n-2147483647", "/w/n--2147483648"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	wantErr(t, "SetSequence on a missing node", s.SetSequence("/missing", 1), zk.ErrNoNode)
}

func TestSimCancelledContextAppliesNothing(t *testing.T) {
	s := NewSim()
	defer s.Close()
	c := simSessions(t, s, 1)[0]
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Create(ctx, "/x", nil, zk.ModePersistent)
	wantErr(t, "create", err, context.Canceled)
	_, err = c.Multi(ctx, &zk.CreateOp{Path: "/x"})
	wantErr(t, "multi", err, context.Canceled)
	if c.exists("/x") {
		t.Fatal("a cancelled create was applied")
	}
}

func TestSimRefusesBeforeSending(t *testing.T) {
	s := NewSim()
	defer s.Close()
	c := simSessions(t, s, 1)[0]
	before := c.stat(c.create("/before", nil, zk.ModePersistent)).Czxid
	for _, p := range []string{"", "a", "/a/", "/a//b", "/a/./b", "/a\x00"} {
		_, err := c.Create(c.ctx, p, nil, zk.ModePersistentSequential)
		wantErr(t, fmt.Sprintf("create %q", p), err, zk.ErrInvalidPath)
		_, _, err = c.Get(c.ctx, p)
		wantErr(t, fmt.Sprintf("get %q", p), err, zk.ErrInvalidPath)
	}
	_, err := c.Create(c.ctx, "/m", nil, zk.CreateMode(9))
	wantErr(t, "bad mode", err, zk.ErrBadArguments)
	for _, op := range []zk.Op{&zk.CreateOp{Path: "/c", Mode: zk.ModeContainer}, (*zk.SetOp)(nil), nil} {
		_, err := c.Multi(c.ctx, op)
		wantErr(t, fmt.Sprintf("multi %#v", op), err, zk.ErrBadArguments)
	}
	_, err = c.Multi(c.ctx, &zk.CheckOp{Path: "x"})
	wantErr(t, "multi with a relative path", err, zk.ErrInvalidPath)
	_, err = c.Create(c.ctx, "/big", make([]byte, 1536*1024), zk.ModePersistent)
	wantErr(t, "a request larger than the client's buffer", err, zk.ErrBadArguments)
	if after := c.stat(c.create("/after", nil, zk.ModePersistent)).Czxid; after != before+1 || c.State() != zk.StateConnected {
		t.Errorf("a refused request reached the server: czxids %d then %d, state %v", before, after, c.State())
	}
}

func TestSimDisconnectedRequestsWait(t *testing.T) {
	s := NewSim()
	defer s.Close()
	c := simSessions(t, s, 1)[0]
	log := recordSession(t, c)
	s.Disconnect(c.Conn)
	if c.State() != zk.StateSuspended || c.SessionID() != 0x0100000000000001 {
		t.Fatalf("after Disconnect: %v %x", c.State(), c.SessionID())
	}
	short, cancel := context.WithTimeout(c.ctx, 20*time.Millisecond)
	defer cancel()
	_, err := c.Create(short, "/x", nil, zk.ModePersistent)
	wantErr(t, "request while cut", err, context.DeadlineExceeded)
	done := make(chan error, 1)
	go func() {
		_, err := c.Create(c.ctx, "/y", nil, zk.ModePersistent)
		done <- err
	}()
	s.Reconnect(c.Conn)
	check(t, <-done)
	if c.exists("/x") {
		t.Fatal("the request whose ctx ended while waiting was applied")
	}
	if got := log.states(); !slices.Equal(got, []zk.SessionState{zk.StateSuspended, zk.StateReconnected}) {
		t.Fatalf("session events %v", got)
	}

	s.Disconnect(c.Conn)
	go func() {
		_, err := c.Create(c.ctx, "/z", nil, zk.ModePersistent)
		done <- err
	}()
	check(t, c.Close())
	wantErr(t, "waiting request at Close", <-done, zk.ErrClosed)
}

func TestSimExpire(t *testing.T) {
	s := NewSim()
	defer s.Close()
	ss := simSessions(t, s, 2)
	a, b := ss[0], ss[1]
	a.create("/e", nil, zk.ModeEphemeral)
	own, other := a.getW("/e"), b.existsW("/e")
	log := recordSession(t, a)
	old := a.SessionID()
	s.Expire(a.Conn)
	if ev := delivered(t, other); ev.Type != zk.EventNodeDeleted {
		t.Fatalf("other session: %+v", ev)
	}
	if ev := delivered(t, own); ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrSessionExpired) {
		t.Fatalf("own watch: %+v", ev)
	}
	evs := log.events()
	if len(evs) != 3 || evs[0].State != zk.StateSuspended || evs[1].State != zk.StateLost || evs[1].SessionID != old ||
		evs[2].State != zk.StateConnected || evs[2].SessionID != a.SessionID() || a.SessionID() == old {
		t.Fatalf("session events %+v (old %x, now %x)", evs, old, a.SessionID())
	}
	p := a.create("/e", nil, zk.ModeEphemeral)
	if st := b.stat(p); st.EphemeralOwner != a.SessionID() {
		t.Fatalf("new ephemeral owned by %x, want %x", st.EphemeralOwner, a.SessionID())
	}

	// Expiry while cut: the requests waiting for the connection run in the
	// new session, as go-zookeeper's queued requests do.
	s.Disconnect(a.Conn)
	done := make(chan error, 1)
	go func() {
		_, err := a.Create(a.ctx, "/queued", nil, zk.ModeEphemeral)
		done <- err
	}()
	s.Expire(a.Conn)
	check(t, <-done)
	if st := b.stat("/queued"); st.EphemeralOwner != a.SessionID() {
		t.Fatalf("queued create owned by %x, want the new session %x", st.EphemeralOwner, a.SessionID())
	}
}

func TestSimClose(t *testing.T) {
	s := NewSim()
	ss := simSessions(t, s, 2)
	a, b := ss[0], ss[1]
	a.create("/e", nil, zk.ModeEphemeral)
	own, keep := a.getW("/e"), a.existsW("/other")
	log := recordSession(t, a)
	check(t, a.Close())
	if ev := delivered(t, own); ev.Type != zk.EventNodeDeleted {
		t.Fatalf("own watch on own ephemeral: %+v", ev)
	}
	if ev := delivered(t, keep); ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrClosed) {
		t.Fatalf("other watch: %+v", ev)
	}
	if got := log.states(); !slices.Equal(got, []zk.SessionState{zk.StateClosed}) {
		t.Fatalf("session events %v", got)
	}
	_, _, err := a.Get(a.ctx, "/")
	wantErr(t, "after Close", err, zk.ErrClosed)
	wantErr(t, "second Close", a.Close(), nil)
	if a.SessionID() != 0 || a.State() != zk.StateClosed {
		t.Fatalf("closed conn: %x %v", a.SessionID(), a.State())
	}
	s.Close()
	if b.State() != zk.StateClosed {
		t.Fatal("Sim.Close left a conn open")
	}
	if c := s.Connect(); c.State() != zk.StateClosed {
		t.Fatal("Connect after Sim.Close gave an open conn")
	}
}

func TestSimLoseNextReply(t *testing.T) {
	s := NewSim()
	defer s.Close()
	a := simSessions(t, s, 1)[0]
	a.mkdir("/p")
	w := a.childrenW("/p")
	log := recordSession(t, a)
	s.LoseNextReply(a.Conn, OpCreate, "/p/")
	a.mkdir("/other") // not matched
	_, err := a.Create(a.ctx, "/p/n-", nil, zk.ModeEphemeralSequential)
	wantErr(t, "lost reply", err, zk.ErrConnectionLoss)
	// Its own watch fires once, through the replay after the reconnect.
	if ev := delivered(t, w); ev.Type != zk.EventNodeChildrenChanged {
		t.Fatalf("watch: %+v", ev)
	}
	if got := log.states(); !slices.Equal(got, []zk.SessionState{zk.StateSuspended, zk.StateReconnected}) {
		t.Fatalf("session events %v", got)
	}
	if names := a.children("/p"); !slices.Equal(names, []string{"n-0000000000"}) {
		t.Fatalf("children %v", names)
	}
	// A read whose reply is lost leaves no watch (TestLostReadLeavesNoWatch
	// in package sim looks inside).
	s.LoseNextReply(a.Conn, OpGet, "")
	_, _, ch, err := a.GetW(a.ctx, "/p")
	wantErr(t, "lost GetW", err, zk.ErrConnectionLoss)
	if ch != nil {
		t.Fatal("a lost read returned a watch")
	}
}

// A late write is lost, then applied after the conn's next read (which
// misses it), or before its next write or sync, or before its session ends.
func TestSimLateNextWrite(t *testing.T) {
	s := NewSim()
	defer s.Close()
	ss := simSessions(t, s, 2)
	a, b := ss[0], ss[1]
	a.mkdir("/p")
	log := recordSession(t, a)

	f := s.LateNextWrite(a.Conn, OpCreate, "/p/")
	_, err := a.Create(a.ctx, "/p/n-", nil, zk.ModeEphemeralSequential)
	wantErr(t, "late create", err, zk.ErrConnectionLoss)
	if got := log.states(); !slices.Equal(got, []zk.SessionState{zk.StateSuspended, zk.StateReconnected}) {
		t.Fatalf("session events %v", got)
	}
	if names := b.children("/p"); len(names) != 0 {
		t.Fatalf("applied at once: %v", names)
	}
	if names := a.children("/p"); len(names) != 0 {
		t.Fatalf("the next read saw the late write: %v", names)
	}
	<-f.Fired()
	if names := b.children("/p"); !slices.Equal(names, []string{"n-0000000000"}) {
		t.Fatalf("after the read: %v", names)
	}

	f = s.LateNextWrite(a.Conn, OpDelete, "/p/")
	wantErr(t, "late delete", a.Delete(a.ctx, "/p/n-0000000000", -1), zk.ErrConnectionLoss)
	if err := a.Sync(a.ctx, "/p"); err != nil {
		t.Fatal(err)
	}
	<-f.Fired()
	if names := a.children("/p"); len(names) != 0 {
		t.Fatalf("a sync did not apply the late delete first: %v", names)
	}

	f = s.LateNextWrite(a.Conn, OpCreate, "/p/")
	_, err = a.Create(a.ctx, "/p/e", nil, zk.ModeEphemeral)
	wantErr(t, "late create", err, zk.ErrConnectionLoss)
	s.Expire(a.Conn)
	<-f.Fired() // applied on the old session, whose end removed it
	if names := b.children("/p"); len(names) != 0 {
		t.Fatalf("after the expiry: %v", names)
	}
}

func TestSimHoldNextReply(t *testing.T) {
	s := NewSim()
	defer s.Close()
	ss := simSessions(t, s, 2)
	a, b := ss[0], ss[1]
	w := a.existsW("/watched")
	f := s.HoldNextReply(a.Conn, OpCreate, "/held")
	type result struct {
		path string
		err  error
	}
	held, later := make(chan result, 1), make(chan result, 1)
	go func() {
		p, err := a.Create(a.ctx, "/held", nil, zk.ModeEphemeral)
		held <- result{p, err}
	}()
	<-f.Fired()
	if !b.exists("/held") {
		t.Fatal("held create not applied")
	}
	// A later request on the same conn is applied at once, but its reply
	// waits behind the held one.
	created := b.existsW("/after")
	go func() {
		p, err := a.Create(a.ctx, "/after", nil, zk.ModePersistent)
		later <- result{p, err}
	}()
	if ev := await(t, created); ev.Type != zk.EventNodeCreated {
		t.Fatalf("watch on the later request's node: %+v", ev)
	}
	select {
	case r := <-later:
		t.Fatalf("a later reply overtook the held one: %+v", r)
	case r := <-held:
		t.Fatalf("held reply not held: %+v", r)
	default:
	}
	// Watch events wait behind the held reply too.
	b.mkdir("/watched")
	undelivered(t, w)
	f.Release()
	f.Release()
	wantEvent(t, delivered(t, w), zk.EventNodeCreated, "/watched")
	if r := <-held; r.err != nil || r.path != "/held" {
		t.Fatalf("held reply %+v", r)
	}
	if r := <-later; r.err != nil {
		t.Fatalf("later reply %+v", r)
	}

	// A connection drop fails the held reply.
	w = a.getW("/held")
	f = s.HoldNextReply(a.Conn, OpSet, "")
	defer f.Release()
	go func() {
		_, err := a.Set(a.ctx, "/after", []byte("x"), -1)
		held <- result{err: err}
	}()
	<-f.Fired()
	b.set("/held", nil)
	s.Disconnect(a.Conn)
	wantErr(t, "held reply at Disconnect", (<-held).err, zk.ErrConnectionLoss)
	undelivered(t, w)
	s.Reconnect(a.Conn) // the held event was lost; the replay brings it
	wantEvent(t, delivered(t, w), zk.EventNodeDataChanged, "/held")

	// A ctx that ends while the reply is held.
	f = s.HoldNextReply(a.Conn, OpDelete, "")
	defer f.Release()
	short, cancel := context.WithCancel(a.ctx)
	go func() { held <- result{err: a.Delete(short, "/after", -1)} }()
	<-f.Fired()
	cancel()
	wantErr(t, "held reply with ended ctx", (<-held).err, context.Canceled)
}

func TestSimFrameLimit(t *testing.T) {
	s := NewSim()
	defer s.Close()
	c := simSessions(t, s, 1)[0]
	log := recordSession(t, c)
	path := "/" + strings.Repeat("p", 41) // 42 bytes, as in docs/zk-semantics.md §10
	c.create(path, make([]byte, 1048486), zk.ModePersistent)
	c.set(path, make([]byte, 1048513))
	_, err := c.Set(c.ctx, path, make([]byte, 1048514), -1)
	wantErr(t, "set one byte over", err, zk.ErrConnectionLoss)
	if got := log.states(); !slices.Equal(got, []zk.SessionState{zk.StateSuspended, zk.StateReconnected}) {
		t.Fatalf("session events %v", got)
	}
	if st := c.stat(path); st.Version != 1 {
		t.Fatalf("the refused set was applied: version %d", st.Version)
	}
}

func TestSimContainers(t *testing.T) {
	s := NewSim()
	defer s.Close()
	c := simSessions(t, s, 1)[0]
	for _, p := range []string{"/never", "/outer", "/outer/inner"} {
		c.create(p, nil, zk.ModeContainer)
	}
	c.mkdir("/outer/inner/x")
	if n := s.ReapContainers(); n != 0 {
		t.Fatalf("reaped %d containers that have children or never had one", n)
	}
	c.del("/outer/inner/x")
	w := c.existsW("/outer")
	if n := s.ReapContainers(); n != 1 {
		t.Fatalf("first pass reaped %d, want inner only", n)
	}
	undelivered(t, w)
	if n := s.ReapContainers(); n != 1 {
		t.Fatalf("second pass reaped %d, want outer", n)
	}
	if ev := delivered(t, w); ev.Type != zk.EventNodeDeleted {
		t.Fatalf("watch on outer: %+v", ev)
	}
	if !c.exists("/never") {
		t.Fatal("a container that never had a child was reaped")
	}

	auto := NewSim(WithAutoReap())
	defer auto.Close()
	c = simSessions(t, auto, 1)[0]
	c.create("/a", nil, zk.ModeContainer)
	c.create("/a/b", nil, zk.ModeContainer)
	c.create("/a/b/c", nil, zk.ModeEphemeral)
	c.del("/a/b/c")
	if c.exists("/a") {
		t.Fatal("WithAutoReap left the emptied containers")
	}
}

// TestSimWatchBeforeReply: a session's own watch event is in its channel
// when the reply of the change that fired it returns (docs/zk-semantics.md §4).
func TestSimWatchBeforeReply(t *testing.T) {
	s := NewSim()
	defer s.Close()
	a := simSessions(t, s, 1)[0]
	w := a.existsW("/n")
	a.mkdir("/n")
	wantEvent(t, delivered(t, w), zk.EventNodeCreated, "/n")
	w = a.childrenW("/n")
	a.mkdir("/n/c")
	wantEvent(t, delivered(t, w), zk.EventNodeChildrenChanged, "/n")
	w = a.getW("/n/c")
	a.del("/n/c")
	wantEvent(t, delivered(t, w), zk.EventNodeDeleted, "/n/c")
}

func TestSimTarget(t *testing.T) {
	s := NewSim()
	defer s.Close()
	tg := s.Target()
	if got, ok := SimOf(tg); tg.Name() != "sim" || !ok || got != s {
		t.Fatal("target name or Sim")
	}
	var c zk.Conn
	t.Run("connect", func(t *testing.T) { c = tg.Connect(t) })
	if c.State() != zk.StateClosed {
		t.Fatal("the target's conn outlived its test")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a foreign conn did not panic")
		}
	}()
	NewSim().Disconnect(s.Connect())
}

// TestSimConcurrent runs requests and faults from many goroutines, for the
// race detector, and checks that every conn's session events stay in a
// legal order.
func TestSimConcurrent(t *testing.T) {
	s := NewSim(WithAutoReap())
	defer s.Close()
	simSessions(t, s, 1)[0].create("/c", nil, zk.ModeContainer)
	next := map[zk.SessionState][]zk.SessionState{
		zk.StateConnected:   {zk.StateSuspended, zk.StateClosed},
		zk.StateReconnected: {zk.StateSuspended, zk.StateClosed},
		zk.StateSuspended:   {zk.StateReconnected, zk.StateLost, zk.StateClosed},
		zk.StateLost:        {zk.StateConnected},
	}
	var wg sync.WaitGroup
	for g, c := range simSessions(t, s, 4) {
		log := recordSession(t, c)
		wg.Go(func() {
			for i := range 300 {
				switch i % 7 {
				case 0:
					s.Disconnect(c.Conn)
					s.Reconnect(c.Conn)
				case 1:
					s.LoseNextReply(c.Conn, OpCreate, "/c")
				case 2:
					_, _, _, _ = c.ChildrenW(c.ctx, "/c")
				case 3:
					if i%5 == 0 {
						s.Expire(c.Conn)
					}
				default:
					_, _ = c.Create(c.ctx, fmt.Sprintf("/c/g%d-", g), nil, zk.ModeEphemeralSequential)
				}
			}
		})
		t.Cleanup(func() {
			prev := zk.StateConnected
			for _, st := range log.states() {
				if !slices.Contains(next[prev], st) {
					t.Errorf("conn %d: %v after %v", g, st, prev)
				}
				prev = st
			}
		})
	}
	wg.Wait()
}
