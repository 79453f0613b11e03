package testkit

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit/proxy"
)

// TestEnsembleSurvivesLosingAMember kills the leader, then a follower, and
// restarts both (the follower without its data), while one client keeps
// its session and its ephemeral.
func TestEnsembleSurvivesLosingAMember(t *testing.T) {
	t0 := time.Now()
	e := StartEnsemble(t)
	t.Logf("ensemble %v serving after %v", e.Addrs(), time.Since(t0))
	ctx := t.Context()
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := zk.Connect(ctx, e.Addrs(), zk.WithSessionTimeout(8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sid := c.SessionID()
	eph, err := c.Create(ctx, "/member", []byte("alive"), zk.ModeEphemeral)
	if err != nil {
		t.Fatal(err)
	}

	follower := (leader + 1) % len(e.Addrs())
	for _, victim := range []int{leader, follower} {
		t0 = time.Now()
		if err := e.Kill(victim); err != nil {
			t.Fatal(err)
		}
		if err := e.WaitServing(ctx); err != nil {
			t.Fatal(err)
		}
		now, err := e.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("killed server %d; server %d leads, serving again after %v", victim, now, time.Since(t0))
		if now == victim {
			t.Fatalf("the killed server %d still leads", victim)
		}
		// A write through the quorum, then our node: the session survived.
		if _, err := c.Set(ctx, eph, []byte("still alive"), zk.AnyVersion); err != nil {
			t.Fatalf("after killing server %d: %v", victim, err)
		}
		if c.SessionID() != sid {
			t.Fatalf("the session changed: %x -> %x", sid, c.SessionID())
		}
		t0 = time.Now()
		restart := e.Restart
		if victim == follower {
			restart = e.RestartEmpty
		}
		if err := restart(ctx, victim); err != nil {
			t.Fatal(err)
		}
		t.Logf("restarted server %d in %v", victim, time.Since(t0))
		// Once synced, the restarted server has what the quorum wrote
		// while it was down.
		if err := e.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		z, err := serverZxid(ctx, e.Addrs()[victim])
		if err != nil {
			t.Fatal(err)
		}
		_, st, err := c.Get(ctx, eph)
		if err != nil {
			t.Fatal(err)
		}
		if z < st.Mzxid {
			t.Fatalf("server %d synced at zxid %#x, before our write at %#x", victim, z, st.Mzxid)
		}
		// A client of that server alone reads it there.
		only, err := zk.Connect(ctx, []string{e.Addrs()[victim]}, zk.WithSessionTimeout(8*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := only.Get(ctx, eph)
		only.Close()
		if err != nil || string(data) != "still alive" {
			t.Fatalf("server %d serves %q, %v; want the write made while it was down", victim, data, err)
		}
	}
	if err := e.RestartEmpty(ctx, leader); err == nil {
		t.Fatal("RestartEmpty of a running server: no error")
	}
	if n, err := e.DigestMismatches(ctx); err != nil || n != 0 {
		t.Fatalf("digest mismatches %d, %v: want 0", n, err)
	}
	if mode, err := serverMode(ctx, e.Addrs()[leader]); err != nil || mode == "standalone" {
		t.Fatalf("the restarted server %d: mode %q, %v", leader, mode, err)
	}
	if err := e.Kill(len(e.Addrs())); err == nil {
		t.Fatal("Kill of a server that does not exist: no error")
	}
}

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
