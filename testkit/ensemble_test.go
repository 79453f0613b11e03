package testkit

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
)

// TestEnsembleProxy reaches a 3-server ensemble through one EnsembleProxy:
// it says which member carries the session, follows it to another member
// when its server is killed, aims a reply fault at the carrier, and expires
// the session on the ensemble.
func TestEnsembleProxy(t *testing.T) {
	e := StartEnsemble(t)
	ctx := t.Context()
	px, err := NewEnsembleProxy(e.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	if len(px.Addrs()) != len(e.Addrs()) {
		t.Fatalf("proxy addresses %v for members %v", px.Addrs(), e.Addrs())
	}
	c, err := zk.Connect(ctx, px.Addrs(), zk.WithSessionTimeout(8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := watchStates(c)
	defer w.stop()
	direct, err := zk.Connect(ctx, e.Addrs(), zk.WithSessionTimeout(8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	sid := c.SessionID()
	eph, err := c.Create(ctx, "/eph", nil, zk.ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}
	first, ok := px.Carrier(sid)
	if !ok {
		t.Fatalf("no member carries session %#x", sid)
	}
	if _, ok := px.Carrier(direct.SessionID()); ok {
		t.Fatal("a session that does not go through the proxy has a carrier")
	}

	// The carrier's server dies: the session moves to another member.
	if err := e.Kill(first); err != nil {
		t.Fatal(err)
	}
	w.await(t, "Kill", zk.StateSuspended, zk.StateReconnected)
	now, ok := px.Carrier(sid)
	if !ok || now == first || c.SessionID() != sid {
		t.Fatalf("after killing member %d: carrier %d (%v), session %#x (was %#x)", first, now, ok, c.SessionID(), sid)
	}

	// A reply fault aimed at the carrier fires there.
	f := px.Member(now).LoseNextReply(OpCreate, "/lost")
	if _, err := c.Create(ctx, "/lost", nil, zk.ModePersistent); !errors.Is(err, zk.ErrConnectionLoss) {
		t.Fatalf("create whose reply the carrier loses: %v", err)
	}
	select {
	case <-f.Fired():
	default:
		t.Fatal("the carrier's fault did not fire")
	}
	w.await(t, "LoseNextReply", zk.StateSuspended, zk.StateReconnected)

	// Expiry on the ensemble, whichever member the client is on.
	if err := px.ExpireSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
	// direct may be on a follower that has not applied the close yet: a
	// sync brings it up to the leader first.
	if err := direct.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := direct.Exists(ctx, eph); err != nil || ok {
		t.Fatalf("after ExpireSession the ephemeral exists=%v (%v)", ok, err)
	}
	w.await(t, "ExpireSession", zk.StateLost, zk.StateConnected)
	if c.SessionID() == sid {
		t.Fatal("same session id after expiry")
	}
	if _, ok := px.Carrier(c.SessionID()); !ok {
		t.Fatalf("no member carries the new session %#x", c.SessionID())
	}
	if err := px.ExpireSession(ctx, sid); !errors.Is(err, proxy.ErrSessionGone) {
		t.Fatalf("expiring the expired session again: %v", err)
	}
}
