// Package sim is an in-memory ZooKeeper 3.8 behind adapters/zk's Conn, for
// tests and for programs that want a ZooKeeper without a server (the demo,
// a benchmark's smoke run). It imports no testing package; package testkit
// wraps it (testkit.NewSim) with a Target for behavioural tests.
//
// It is one standalone server seen through go-zookeeper and our adapter, as
// docs/zk-semantics.md describes them: per-parent sequence counters (not
// Cversion; restarting with the parent), ephemerals, containers, one-shot
// watches with the server's firing rules and order, atomic multi with
// per-op results, full Stats from one zxid counter (failed writes, a whole
// multi, opening and closing a session each take one), children listed in
// a seeded, stable, never-sorted order, the request frame limits (a request
// over the client's buffer is zk.ErrRequestTooLarge, as through the
// adapter), per-node ACLs and digest identities (AddAuth) checked where
// and in the order the server checks them. It has no goroutines and no timers: the same calls in the same
// order give the same names, zxids and events, and time enters only through
// WithClock. A session's own watch event is in its channel before the reply
// of the change that fired it.
//
// Faults are small verbs on a Sim: Disconnect, Reconnect, Expire,
// LoseNextReply and HoldNextReply (which return a *fault.Reply that says
// whether it fired and can be disarmed), ReapContainers, SetSequence.
package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/fault"
)

// Sim is an in-memory ZooKeeper 3.8 for tests: one standalone server and
// the go-zookeeper client behind our adapter, with the semantics recipes
// rely on (docs/zk-semantics.md): sequence counters, ephemerals, containers,
// one-shot watches and their order, atomic multi, Stat fields, errors,
// watch replay after a reconnect, expiry, ACLs. Its conns have the
// method AddAuth(ctx, scheme, cred) of the adapter's, which zk.Wrap uses
// for zk.WithAuth; every conn has the identity ip:127.0.0.1, and there is
// no superuser.
//
// It is deterministic: it has no goroutines and no timers, and the same
// calls in the same order give the same names, zxids, child orders and
// events. Time enters only through the clock (WithClock) for ctime/mtime
// and event times. Session expiry and container reaping happen when a test
// says so (Expire, ReapContainers, or WithAutoReap): a session never times
// out, however long its conn stays cut (on a real server it would expire
// after its timeout).
//
// Requests are answered synchronously by the calling goroutine. Session
// events and watch events are handed to a conn's subscribers and channels
// in order, never under the Sim's lock, before the call that caused them
// returns (unless a held reply holds them back, see HoldNextReply).
// Subscriber callbacks must not call the Sim or the Conn.
//
// The fault verbs (Disconnect, Reconnect, Expire, LoseNextReply,
// HoldNextReply) are safe to call from any goroutine. They panic when given
// a Conn that this Sim did not create: that is a bug in the test.
type Sim struct {
	mu       sync.Mutex
	now      func() time.Time
	seed     uint64
	autoReap bool
	reaping  bool // an automatic reaping is under way

	nodes       map[string]*node
	zxid        int64 // the last zxid used
	nextSession int64
	conns       []*simConn // open conns, in creation order
	pending     []*simConn // conns with deliveries queued
	closed      bool
}

// Option configures a Sim.
type Option func(*Sim)

// WithSeed sets the seed of the order in which Children lists names. The
// default is 0. Any seed gives an order that is stable between calls and
// never sorted (for two or more children), so a recipe that forgets to sort
// fails.
func WithSeed(seed int64) Option { return func(s *Sim) { s.seed = uint64(seed) } }

// WithClock sets the clock for ctime, mtime and session event times. The
// default is time.Now.
func WithClock(now func() time.Time) Option { return func(s *Sim) { s.now = now } }

// WithAutoReap makes the Sim reap containers as soon as a write leaves one
// reapable, through the whole cascade of nested containers, before the
// writer gets its reply: the earliest a real server could do it. The default
// is to reap only when ReapContainers is called.
func WithAutoReap() Option { return func(s *Sim) { s.autoReap = true } }

// The first session id: a standalone server's id (1) in the top byte.
const firstSession int64 = 0x0100000000000001

// New returns an empty simulated server: only / and the built-in
// /zookeeper, /zookeeper/config and /zookeeper/quota exist, and the last
// zxid is 0.
func New(opts ...Option) *Sim {
	s := &Sim{now: time.Now, nodes: newTree(), nextSession: firstSession}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Connect opens a new session, CONNECTED when it returns (its subscribers
// see only later changes). Session ids start at 0x0100000000000001 and grow
// by one per session, as on a standalone server; opening a session takes a
// zxid. After Close, the returned Conn is closed already.
//
// opts are zk.Connect's, applied with zk.Wrap: authentication, chroot, ACL
// and ACL provider act as on a server; TLS, the session timeout and the
// backoff mean nothing here and are accepted. Connect panics if Wrap
// refuses them (a bad option, a refused authentication): a test's options
// are its own constants. To see that error, call zk.Wrap on Connect().
func (s *Sim) Connect(opts ...zk.Option) zk.Conn {
	c := s.connect()
	if len(opts) == 0 {
		return c
	}
	w, err := zk.Wrap(context.Background(), c, opts...)
	if err != nil {
		_ = c.Close()
		panic(fmt.Sprintf("sim: Connect: %v", err))
	}
	return w
}

func (s *Sim) connect() *simConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &simConn{s: s, state: zk.StateClosed, watches: map[watchKey][]watcher{}, up: make(chan struct{}), link: newLink()}
	close(c.up)
	if s.closed {
		return c
	}
	c.session = s.newSession()
	c.state = zk.StateConnected
	s.conns = append(s.conns, c)
	return c
}

// newSession takes the next session id and the createSession zxid.
func (s *Sim) newSession() int64 {
	s.zxid++
	id := s.nextSession
	s.nextSession++
	return id
}

// Close closes every conn (their sessions end, their ephemerals go) and
// makes later Connects return closed conns.
func (s *Sim) Close() {
	s.mu.Lock()
	s.closed = true
	conns := append([]*simConn(nil), s.conns...)
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// own returns c as one of s's conns.
func (s *Sim) own(c zk.Conn) *simConn {
	sc, ok := zk.Underlying[*simConn](c)
	if !ok || sc.s != s {
		panic(fmt.Sprintf("sim: %T is not a conn of this Sim", c))
	}
	return sc
}

// Disconnect cuts c's connection and keeps it cut: c's subscribers see
// SUSPENDED, its session and ephemerals stay, its watches stop firing (they
// are replayed on Reconnect), requests in flight (held replies) fail with
// zk.ErrConnectionLoss and new requests wait until Reconnect, Expire, Close
// or the end of their ctx. A no-op if c is already cut or closed.
func (s *Sim) Disconnect(c zk.Conn) {
	sc := s.own(c)
	s.mu.Lock()
	if sc.online() {
		sc.cut(zk.ErrConnectionLoss)
	}
	s.mu.Unlock()
	s.deliver()
}

// Reconnect ends a Disconnect: c's subscribers see RECONNECTED (same
// session), then its watches are replayed against what changed since the
// last reply c received, and waiting requests go on. A no-op unless c is
// cut.
func (s *Sim) Reconnect(c zk.Conn) {
	sc := s.own(c)
	s.mu.Lock()
	if sc.state == zk.StateSuspended {
		sc.restore()
	}
	s.mu.Unlock()
	s.deliver()
}

// Expire ends c's session as the server does when it times out: its
// ephemerals are deleted in one transaction (other sessions' watches fire).
// c then sees what go-zookeeper reports through our adapter: SUSPENDED (if
// it was connected), LOST with the old session id, EventNotWatching with
// zk.ErrSessionExpired on every watch, and CONNECTED with a new session id.
// Replies in flight fail with zk.ErrSessionExpired; requests waiting for the
// connection go on in the new session. A no-op if c is closed.
func (s *Sim) Expire(c zk.Conn) {
	sc := s.own(c)
	s.mu.Lock()
	if sc.state != zk.StateClosed {
		if sc.online() {
			sc.cut(zk.ErrSessionExpired)
		}
		old := sc.session
		sc.applyLate() // committed before the session's end
		sc.emit(zk.StateLost, old)
		sc.dropWatches(zk.ErrSessionExpired)
		s.closeSession(old)
		sc.session = s.newSession()
		sc.lastZxid = 0
		sc.state = zk.StateConnected
		close(sc.up)
		sc.emit(zk.StateConnected, sc.session)
	}
	s.mu.Unlock()
	s.deliver()
}

// closeSession deletes session's ephemerals in one transaction.
func (s *Sim) closeSession(session int64) {
	s.write(func(t *txn) error {
		for _, p := range s.ephemerals(session) {
			t.remove(p)
		}
		return nil
	})
}

// LoseNextReply arms a one-shot fault on c: the next request of kind op
// whose path (any op's path, for a multi) starts with pathPrefix is applied
// but its reply is lost. The caller gets zk.ErrConnectionLoss; c sees
// SUSPENDED, then at once RECONNECTED with the same session and its watches
// replayed (so a watch its own lost write triggered fires then). A read
// whose reply is lost leaves no watch. The fault's Fired closes when the
// request is applied, before its caller gets the error; Disarm disarms it.
func (s *Sim) LoseNextReply(c zk.Conn, op fault.OpKind, pathPrefix string) *fault.Reply {
	sc := s.own(c)
	f := fault.New(op, pathPrefix, false, nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	sc.faults = append(sc.faults, f)
	return f
}

// LateNextWrite arms a one-shot fault on c: the next write of kind op
// (create, delete, set or multi) whose path (any op's path, for a multi)
// starts with pathPrefix is lost as LoseNextReply loses one, but applied
// only later, as happens in an ensemble when the client reconnects to a
// server that has not applied it yet, or when the write was still on its
// way to the leader: once c makes its next request, before it if that is a
// write or a sync (which makes the server catch up), after it if it is a
// read (so the read misses the write); and before c's session ends. The
// fault's Fired closes when it is applied. The real server's target has
// no such fault: code that syncs before it looks for a write whose reply
// was lost finds it on both.
func (s *Sim) LateNextWrite(c zk.Conn, op fault.OpKind, pathPrefix string) *fault.Reply {
	if !op.Write() {
		panic(fmt.Sprintf("sim: LateNextWrite of a %s: only writes are applied late", op))
	}
	sc := s.own(c)
	f := fault.NewLate(op, pathPrefix)
	s.mu.Lock()
	defer s.mu.Unlock()
	sc.faults = append(sc.faults, f)
	return f
}

// HoldNextReply arms a one-shot fault on c: the next matching request (as
// for LoseNextReply) is applied, and the fault's Fired is closed, but its
// reply is held until the fault's Release, and so is everything after it
// on c's connection: the replies to c's later requests (which are applied
// at once) and the watch events c gets meanwhile. Release delivers the
// held watch events before the held callers return. If c's connection
// drops first, the held callers get the error of the drop and the held
// watch events are lost, their watches left for the replay.
func (s *Sim) HoldNextReply(c zk.Conn, op fault.OpKind, pathPrefix string) *fault.Reply {
	sc := s.own(c)
	var f *fault.Reply
	f = fault.New(op, pathPrefix, true, func() {
		s.mu.Lock()
		sc.faults = slices.DeleteFunc(sc.faults, func(g *fault.Reply) bool { return g == f })
		sc.holds = slices.DeleteFunc(sc.holds, func(ch <-chan struct{}) bool { return ch == f.Released() })
		if len(sc.holds) == 0 {
			parked := sc.parked
			sc.parked = nil
			for _, d := range parked {
				sc.post(d)
			}
		}
		s.mu.Unlock()
		s.deliver()
	})
	s.mu.Lock()
	sc.faults = append(sc.faults, f)
	s.mu.Unlock()
	return f
}

// SetSequence sets the sequence counter of parent: its next sequential
// child gets the suffix next (as int32 in %010d; counters wrap past
// 2^31−1 to −2^31, as ZooKeeper's do). Cversion follows the counter. For
// testing wrap-around. Returns zk.ErrNoNode if parent does not exist.
func (s *Sim) SetSequence(parent string, next int32) error {
	if err := zk.ValidatePath(parent); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[parent]
	if n == nil {
		return fmt.Errorf("%w: %s", zk.ErrNoNode, parent)
	}
	n.childCreates = next
	return nil
}

// ReapContainers does one pass of ZooKeeper's container reaper: every
// container that once had a child and has none now is deleted, each in its
// own transaction, firing watches like a client delete. A container emptied
// by this pass waits for the next one (nested containers go one level per
// pass). It returns how many it deleted.
func (s *Sim) ReapContainers() int {
	s.mu.Lock()
	n := s.reapPass()
	s.mu.Unlock()
	s.deliver()
	return n
}

func (s *Sim) reapPass() int {
	paths := s.reapable()
	for _, p := range paths {
		s.write(func(t *txn) error {
			t.remove(p)
			return nil
		})
	}
	return len(paths)
}

// write runs fn as one transaction: it takes the next zxid whatever the
// outcome; on error fn's changes are undone and nothing fires; on success
// the watch events fire in order and, with WithAutoReap, the containers it
// left empty are reaped.
func (s *Sim) write(fn func(t *txn) error) error {
	s.zxid++
	t := &txn{s: s, zxid: s.zxid, now: s.now().UnixMilli()}
	if err := fn(t); err != nil {
		t.rollback()
		return err
	}
	for _, e := range t.events {
		s.trigger(e.path, e.typ)
	}
	if s.autoReap && !s.reaping {
		s.reaping = true
		for more := true; more; {
			more = s.reapPass() > 0
		}
		s.reaping = false
	}
	return nil
}

// WatchedPaths returns the paths on which c has a data or exists watch
// armed, sorted: what a real server's wchc lists for c's session (it
// leaves child watches out). A recipe that is done with a path should
// leave none there.
func (s *Sim) WatchedPaths(c zk.Conn) []string {
	sc := s.own(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	var paths []string
	for k, chs := range sc.watches {
		if len(chs) > 0 && k.kind != watchChild && !slices.Contains(paths, k.path) {
			paths = append(paths, k.path)
		}
	}
	slices.Sort(paths)
	return paths
}
