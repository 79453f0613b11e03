package testkit

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
)

// proxied opens a session on the shared server through a new Proxy.
func proxied(t *testing.T, timeout time.Duration) (zk.Conn, *Proxy, *stateWatch) {
	t.Helper()
	srv := sharedServer(t)
	p, err := NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := zk.Connect(t.Context(), []string{p.Addr()}, zk.WithSessionTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	w := watchStates(c)
	t.Cleanup(func() {
		w.stop()
		p.Unblock()
		c.Close()
	})
	return c, p, w
}

// direct opens a session on the shared server, without a proxy.
func direct(t *testing.T) zk.Conn {
	t.Helper()
	c, err := zk.Connect(t.Context(), []string{sharedServer(t).Addr()}, zk.WithSessionTimeout(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// scratch creates a fresh persistent node for one test and deletes it after.
func scratch(t *testing.T, c zk.Conn, path string) string {
	t.Helper()
	ctx := t.Context()
	if err := deleteAll(ctx, c, path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, path, nil, zk.ModePersistent); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAll(context.Background(), c, path) })
	return path
}

func TestProxyForwardsAndCuts(t *testing.T) {
	c, p, w := proxied(t, 2*time.Second)
	dc := direct(t)
	dir := scratch(t, dc, "/proxy-cut")
	ctx := t.Context()
	eph, err := c.Create(ctx, dir+"/e", []byte("x"), zk.ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	t0 := time.Now()
	p.Cut()
	w.await(t, "Cut", zk.StateSuspended, zk.StateReconnected)
	t.Logf("cut: suspended and reconnected in %v", time.Since(t0))
	if c.SessionID() != sid {
		t.Fatalf("session changed across a cut: %x -> %x", sid, c.SessionID())
	}
	if data, st, err := c.Get(ctx, eph); err != nil || string(data) != "x" || st.EphemeralOwner != sid {
		t.Fatalf("after the cut: Get(%s) = %q, owner %x, %v", eph, data, st.EphemeralOwner, err)
	}
}

func TestProxyBlockExpiresTheSession(t *testing.T) {
	c, p, w := proxied(t, time.Second)
	dc := direct(t)
	dir := scratch(t, dc, "/proxy-block")
	ctx := t.Context()
	eph, err := c.Create(ctx, dir+"/e", nil, zk.ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	_, ok, gone, err := dc.ExistsW(ctx, eph)
	if err != nil || !ok {
		t.Fatalf("ExistsW(%s) = %v, %v", eph, ok, err)
	}
	t0 := time.Now()
	p.Block()
	w.await(t, "Block", zk.StateSuspended) // the client gives up on the silent connection
	t.Logf("black hole: client suspended after %v", time.Since(t0))
	select {
	case ev := <-gone:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on %s: %v", eph, ev)
		}
		t.Logf("black hole: the server expired the session after %v", time.Since(t0))
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not expire the session of a black-holed client")
	}
	old := c.SessionID()
	p.Unblock()
	w.await(t, "Unblock", zk.StateLost, zk.StateConnected)
	if c.SessionID() == old || c.SessionID() == 0 {
		t.Fatalf("after expiry the session id is %x (was %x)", c.SessionID(), old)
	}
}

func TestProxyLoseNextReply(t *testing.T) {
	c, p, w := proxied(t, 2*time.Second)
	dc := direct(t)
	dir := scratch(t, dc, "/proxy-lose")
	ctx := t.Context()
	sid := c.SessionID()
	f := p.LoseNextReply(OpCreate, dir+"/n-")
	if _, _, err := c.Exists(ctx, dir); err != nil { // not matched: forwarded as usual
		t.Fatal(err)
	}
	_, err := c.Create(ctx, dir+"/n-", []byte("lost"), zk.ModeEphemeralSequential)
	if !errors.Is(err, zk.ErrConnectionLoss) {
		t.Fatalf("create with a lost reply: err = %v, want ErrConnectionLoss", err)
	}
	select {
	case <-f.Fired():
	default:
		t.Fatal("the create's reply was lost, and Fired is open")
	}
	w.await(t, "LoseNextReply", zk.StateSuspended, zk.StateReconnected)
	if c.SessionID() != sid {
		t.Fatalf("session changed: %x -> %x", sid, c.SessionID())
	}
	kids, _, err := dc.Children(ctx, dir)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of %s = %v, %v; want the one node the lost create made", dir, kids, err)
	}
	if _, st, err := dc.Get(ctx, dir+"/"+kids[0]); err != nil || st.EphemeralOwner != sid {
		t.Fatalf("the created node: owner %x, %v; want %x", st.EphemeralOwner, err, sid)
	}
	// One-shot: the next create gets its reply.
	if _, err := c.Create(ctx, dir+"/n-", nil, zk.ModeEphemeralSequential); err != nil {
		t.Fatal(err)
	}
}

func TestProxyHoldNextReply(t *testing.T) {
	c, p, w := proxied(t, 2*time.Second)
	dc := direct(t)
	dir := scratch(t, dc, "/proxy-hold")
	ctx := t.Context()
	if _, err := dc.Create(ctx, dir+"/a", []byte("0"), zk.ModePersistent); err != nil {
		t.Fatal(err)
	}
	f := p.HoldNextReply(OpMulti, dir+"/a")
	defer f.Release()
	done := make(chan error, 1)
	go func() {
		_, err := c.Multi(ctx, &zk.SetOp{Path: dir + "/a", Data: []byte("1"), Version: zk.AnyVersion},
			&zk.CreateOp{Path: dir + "/b", Mode: zk.ModePersistent})
		done <- err
	}()
	select {
	case <-f.Fired():
	case <-time.After(10 * time.Second):
		t.Fatal("the held multi was not applied")
	}
	if data, _, err := dc.Get(ctx, dir+"/a"); err != nil || string(data) != "1" {
		t.Fatalf("the server has %q, %v; the multi should be applied", data, err)
	}
	// Hold for longer than the client's read timeout (2/3 of 2 s): the
	// proxy answers pings, so the connection must stay up.
	select {
	case err := <-done:
		t.Fatalf("the multi returned (%v) while its reply was held", err)
	case ev := <-w.ch:
		t.Fatalf("session event %v while a reply was held", ev.State)
	case <-time.After(1600 * time.Millisecond):
	}
	f.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("released multi: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the released multi did not return")
	}
	f.Release() // idempotent
}

func TestProxyExpireSession(t *testing.T) {
	c, p, w := proxied(t, 4*time.Second)
	dc := direct(t)
	dir := scratch(t, dc, "/proxy-expire")
	ctx := t.Context()
	eph, err := c.Create(ctx, dir+"/e", nil, zk.ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	old := c.SessionID()
	t0 := time.Now()
	if err := p.ExpireSession(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := dc.Exists(ctx, eph); err != nil || ok {
		t.Fatalf("after ExpireSession the ephemeral exists=%v (%v)", ok, err)
	}
	w.await(t, "ExpireSession", zk.StateLost, zk.StateConnected)
	t.Logf("session closed on the server; client has a new session after %v", time.Since(t0))
	if c.SessionID() == old {
		t.Fatal("same session id after expiry")
	}
	if !p.Carries(c.SessionID()) || p.Carries(old) {
		t.Fatalf("Carries: new session %v, old session %v; want true, false", p.Carries(c.SessionID()), p.Carries(old))
	}
	if err := p.ExpireSession(ctx, old); !errors.Is(err, proxy.ErrSessionGone) {
		t.Fatalf("expiring an expired session: %v, want ErrSessionGone", err)
	}
	if err := p.ExpireSession(ctx, c.SessionID()); err != nil { // the new session went through the proxy too
		t.Fatal(err)
	}
	if err := p.ExpireSession(ctx, 0x7e57); !errors.Is(err, proxy.ErrUnknownSession) {
		t.Fatalf("expiring a session that never went through the proxy: %v, want ErrUnknownSession", err)
	}
}

func TestProxyToNowhere(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close() // nothing listens there now
	p, err := NewProxy(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := zk.Connect(ctx, []string{p.Addr()}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("connect through a proxy to nothing: %v", err)
	}
	if err := p.ExpireSession(ctx, 1); !errors.Is(err, proxy.ErrUnknownSession) {
		t.Fatalf("ExpireSession with no session: %v, want ErrUnknownSession", err)
	}
}

// TestProxyCutsWithWatches cuts a connection that has watches and requests
// in flight, again and again: the client resumes its session each time and
// re-sends its watches. Under -race this is where go-zookeeper's unguarded
// lastZxid would show up if the proxy let replies overtake setWatches.
func TestProxyCutsWithWatches(t *testing.T) {
	c, p, w := proxied(t, 4*time.Second)
	dc := direct(t)
	dir := scratch(t, dc, "/proxy-rewatch")
	ctx := t.Context()
	_, _, watch, err := c.ExistsW(ctx, dir+"/flag")
	if err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	for i := range 30 {
		done := make(chan error, 1)
		go func() {
			_, _, err := c.Children(ctx, dir)
			for errors.Is(err, zk.ErrConnectionLoss) {
				_, _, err = c.Children(ctx, dir)
			}
			done <- err
		}()
		p.Cut()
		w.await(t, "Cut", zk.StateSuspended, zk.StateReconnected)
		if err := <-done; err != nil {
			t.Fatalf("cut %d: %v", i, err)
		}
	}
	if c.SessionID() != sid {
		t.Fatalf("session changed: %x -> %x", sid, c.SessionID())
	}
	if _, err := dc.Create(ctx, dir+"/flag", nil, zk.ModePersistent); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-watch:
		if ev.Type != zk.EventNodeCreated {
			t.Fatalf("watch after 30 cuts: %v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not survive the cuts")
	}
}
