package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
	"github.com/zkrecipes/zkrecipes/testkit/zkserver"
)

// ForEachTarget runs fn once per Target, each as a subtest named after it:
//
//   - "sim": a fresh simulator (NewSim().Target()), closed after the test;
//   - "zk": a real standalone ZooKeeper shared by the whole test binary,
//     started when a test first needs it and stopped by Main. Each "zk"
//     subtest starts on an empty tree (everything but /zookeeper is deleted
//     first, as the server's super user, so nodes whose ACL shuts everyone
//     else out go too), so these subtests must not run in parallel with each other;
//     one that tries fails. The server checks for empty containers every
//     200 ms, so containers are reaped as a production server would, only
//     sooner. If ZooKeeper is not installed the subtest is skipped, or fails
//     when ZK_REQUIRED=1.
//
// Select one with -run, e.g. -run 'TestLock/zk'.
func ForEachTarget(t *testing.T, fn func(t *testing.T, tg Target)) {
	t.Helper()
	t.Run("sim", func(t *testing.T) {
		sim := NewSim()
		t.Cleanup(sim.Close)
		fn(t, sim.Target())
	})
	t.Run("zk", func(t *testing.T) {
		srv := sharedServer(t)
		claimSharedTree(t, srv.Addr())
		fn(t, NewServerTarget(srv.Addr()))
	})
}

// The server ForEachTarget shares, and whether a test is using its tree.
var shared struct {
	mu      sync.Mutex
	started bool
	srv     *Server
	err     error
	inUse   bool
}

// sharedServer returns the shared server, starting it on first use.
func sharedServer(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		shared.srv, shared.err = zkserver.Launch(context.Background(), zkserver.WithQuickJIT(true),
			zkserver.WithContainerCheckInterval(200*time.Millisecond), zkserver.WithSuperUser(superUser, superPassword))
	}
	if shared.err != nil {
		failOrSkip(t, shared.err)
	}
	return shared.srv
}

// stopSharedServer stops the shared server if one was started, first
// printing its log tail when the tests failed.
func stopSharedServer(failed bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		return
	}
	if failed {
		fmt.Fprintf(os.Stderr, "testkit: shared ZooKeeper %s log tail:\n%s\n", shared.srv.Addr(), shared.srv.LogTail(40))
	}
	shared.srv.Close()
	shared.srv = nil
}

// claimSharedTree gives t the shared server's tree, emptied, until t ends.
func claimSharedTree(t testing.TB, addr string) {
	t.Helper()
	shared.mu.Lock()
	busy := shared.inUse
	shared.inUse = true
	shared.mu.Unlock()
	if busy {
		t.Fatal("testkit: ForEachTarget's zk subtests share one server and must not run in parallel")
	}
	t.Cleanup(func() {
		shared.mu.Lock()
		shared.inUse = false
		shared.mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := wipeTree(ctx, addr); err != nil {
		t.Fatalf("testkit: emptying the shared ZooKeeper's tree: %v", err)
	}
}

// The shared server's super user, which passes every ACL: wipeTree
// deletes as it what tests created with ACLs that shut others out.
const superUser, superPassword = "super", "zkrecipes-testkit"

// wipeTree deletes every node but /zookeeper and its children.
func wipeTree(ctx context.Context, addr string) error {
	c, err := zk.Connect(ctx, []string{addr}, zk.WithSessionTimeout(targetSessionTimeout),
		zk.WithAuth("digest", []byte(superUser+":"+superPassword)))
	if err != nil {
		return err
	}
	defer c.Close()
	top, _, err := c.Children(ctx, "/")
	if err != nil {
		return err
	}
	for _, name := range top {
		if name != "zookeeper" {
			if err := deleteAll(ctx, c, "/"+name); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteAll deletes path and everything under it. Nodes that vanish on
// their own (an ephemeral whose session ends, a reaped container) are fine.
func deleteAll(ctx context.Context, c zk.Conn, path string) error {
	for {
		children, _, err := c.Children(ctx, path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, name := range children {
			if err := deleteAll(ctx, c, zk.Join(path, name)); err != nil {
				return err
			}
		}
		err = c.Delete(ctx, path, zk.AnyVersion)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if !errors.Is(err, zk.ErrNotEmpty) { // a child appeared: go again
			return err
		}
	}
}

// targetSessionTimeout is the session timeout of the connections a server
// target opens: short, so that expiry-driven behaviour shows up quickly,
// and long enough for a disconnect of a second or so to be survived.
const targetSessionTimeout = 2 * time.Second

// targetWait bounds how long a server target waits for a session state.
const targetWait = 15 * time.Second

// NewServerTarget returns a Target on the real ZooKeeper server at addr,
// named "zk". Each Connect opens a session with a 2 s timeout through a
// Proxy of its own, which the fault verbs drive:
//
//   - Disconnect blocks the proxy and cuts its connections. The session
//     stays alive on the server only for its timeout: reconnect within
//     about 1.5 s or the session expires, as in production.
//   - Expire disconnects, closes the session on the server from a
//     connection of its own (the server deletes its ephemerals at once),
//     and lets the client connect again to learn it.
//   - LoseNextReply and HoldNextReply use the proxy's reply faults.
//
// Every verb returns once the Conn has seen the session events it causes,
// and fails the test if they do not come within 15 s.
func NewServerTarget(addr string) Target {
	return &serverTarget{name: "zk", addr: addr, proxies: map[zk.Conn]*Proxy{}}
}

// NewTLSServerTarget returns a Target named "zk-tls" on the secure client
// port of srv, a server started with zkserver.WithTLS (WithTLS(false): no
// plain-text port at all). It is NewServerTarget's, fault verbs included,
// with every connection TLS end to end: each Connect dials a proxy of its
// own that terminates TLS (NewTLSProxy) with zk.WithTLS(srv.TLSConfig()),
// added before Connect's options.
func NewTLSServerTarget(srv *Server) Target {
	return &serverTarget{name: "zk-tls", addr: srv.TLSAddr(), tlsServer: srv, proxies: map[zk.Conn]*Proxy{}}
}

type serverTarget struct {
	name      string
	addr      string
	tlsServer *Server // nil: plain text
	mu        sync.Mutex
	proxies   map[zk.Conn]*Proxy
}

func (tg *serverTarget) Name() string { return tg.name }

// Connect connects through a proxy of its own (the fault verbs cut it),
// with the 2 s session timeout before opts (which may change it).
func (tg *serverTarget) Connect(t testing.TB, opts ...zk.Option) zk.Conn {
	t.Helper()
	preOpts := []zk.Option{zk.WithSessionTimeout(targetSessionTimeout)}
	var (
		p   *Proxy
		err error
	)
	if tg.tlsServer != nil {
		p, err = NewTLSProxy(tg.tlsServer)
		preOpts = append(preOpts, zk.WithTLS(tg.tlsServer.TLSConfig()))
	} else {
		p, err = NewProxy(tg.addr)
	}
	if err != nil {
		t.Fatalf("testkit: proxy to %s: %v", tg.addr, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), targetWait)
	defer cancel()
	c, err := zk.Connect(ctx, []string{p.Addr()}, append(preOpts, opts...)...)
	if err != nil {
		p.Close()
		t.Fatalf("testkit: connect to ZooKeeper %s: %v", tg.addr, err)
	}
	key := innermost(c)
	tg.mu.Lock()
	tg.proxies[key] = p
	tg.mu.Unlock()
	t.Cleanup(func() {
		p.Unblock() // let Close reach the server, which then drops the ephemerals at once
		c.Close()
		p.Close()
		tg.mu.Lock()
		delete(tg.proxies, key)
		tg.mu.Unlock()
	})
	return c
}

// innermost follows c's Unwrap methods (the views of package zk) to the
// Conn Connect dialled, which keys the proxies.
func innermost(c zk.Conn) zk.Conn {
	for {
		u, ok := c.(interface{ Unwrap() zk.Conn })
		if !ok {
			return c
		}
		c = u.Unwrap()
	}
}

func (tg *serverTarget) proxy(t testing.TB, c zk.Conn) *Proxy {
	t.Helper()
	tg.mu.Lock()
	defer tg.mu.Unlock()
	p, ok := tg.proxies[innermost(c)]
	if !ok {
		t.Fatalf("testkit: %T was not opened by this target's Connect", c)
	}
	return p
}

func (tg *serverTarget) Disconnect(t testing.TB, c zk.Conn) {
	t.Helper()
	p := tg.proxy(t, c)
	w := watchStates(c)
	defer w.stop()
	cutOff(t, "Disconnect", p, c, w)
}

// cutOff blocks c's proxy and cuts its connection, and waits (through w)
// until c is SUSPENDED.
func cutOff(t testing.TB, verb string, p *Proxy, c zk.Conn, w *stateWatch) {
	t.Helper()
	p.Block()
	p.Cut()
	if c.State() != zk.StateSuspended {
		w.await(t, verb, zk.StateSuspended)
	}
}

func (tg *serverTarget) Reconnect(t testing.TB, c zk.Conn) {
	t.Helper()
	p := tg.proxy(t, c)
	w := watchStates(c)
	defer w.stop()
	p.Unblock()
	switch c.State() {
	case zk.StateConnected, zk.StateReconnected:
	case zk.StateLost:
		t.Fatalf("testkit: Reconnect: the session was already lost")
	default:
		w.await(t, "Reconnect", zk.StateReconnected)
	}
}

func (tg *serverTarget) Expire(t testing.TB, c zk.Conn) {
	t.Helper()
	p := tg.proxy(t, c)
	w := watchStates(c)
	defer w.stop()
	cutOff(t, "Expire", p, c, w)
	ctx, cancel := context.WithTimeout(t.Context(), targetWait)
	defer cancel()
	if err := p.ExpireSession(ctx, c.SessionID()); err != nil && !errors.Is(err, proxy.ErrSessionGone) {
		p.Unblock()
		t.Fatalf("testkit: Expire: %v", err)
	}
	p.Unblock()
	w.await(t, "Expire", zk.StateLost, zk.StateConnected)
}

func (tg *serverTarget) LoseNextReply(t testing.TB, c zk.Conn, op OpKind, pathPrefix string) *ReplyFault {
	t.Helper()
	return tg.proxy(t, c).LoseNextReply(op, pathPrefix)
}

func (tg *serverTarget) HoldNextReply(t testing.TB, c zk.Conn, op OpKind, pathPrefix string) *ReplyFault {
	t.Helper()
	f := tg.proxy(t, c).HoldNextReply(op, pathPrefix)
	t.Cleanup(f.Release)
	return f
}

// stateWatch collects a Conn's session events while a fault verb runs.
type stateWatch struct {
	ch     chan zk.SessionEvent
	mu     sync.Mutex
	missed bool // ch was full: events were dropped
	cancel func()
}

func watchStates(c zk.Conn) *stateWatch {
	w := &stateWatch{ch: make(chan zk.SessionEvent, 64)}
	w.cancel = c.Subscribe(func(ev zk.SessionEvent) {
		select {
		case w.ch <- ev:
		default:
			w.mu.Lock()
			w.missed = true
			w.mu.Unlock()
		}
	})
	return w
}

func (w *stateWatch) stop() { w.cancel() }

// await waits for the given states, in that order (other states may come
// between them), and fails the test if they do not all come in time.
func (w *stateWatch) await(t testing.TB, verb string, want ...zk.SessionState) {
	t.Helper()
	timer := time.NewTimer(targetWait)
	defer timer.Stop()
	var seen []zk.SessionState
	for len(want) > 0 {
		select {
		case ev := <-w.ch:
			seen = append(seen, ev.State)
			if ev.State == want[0] {
				want = want[1:]
			} else if ev.State == zk.StateLost && !slices.Contains(want, zk.StateLost) {
				t.Fatalf("testkit: %s: the session expired (states seen: %v); on a real server a "+
					"disconnected session lives only for its %v timeout", verb, seen, targetSessionTimeout)
			}
		case <-timer.C:
			w.mu.Lock()
			missed := w.missed
			w.mu.Unlock()
			t.Fatalf("testkit: %s: no %v within %v (states seen: %v, events dropped: %v)", verb, want[0], targetWait, seen, missed)
		}
	}
}
