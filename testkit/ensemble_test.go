package testkit

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// TestEnsembleSurvivesLosingAMember kills the leader, then a follower, and
// restarts both, while one client keeps its session and its ephemeral.
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
		if err := e.Restart(ctx, victim); err != nil {
			t.Fatal(err)
		}
		t.Logf("restarted server %d in %v", victim, time.Since(t0))
	}
	if mode, err := serverMode(ctx, e.Addrs()[leader]); err != nil || mode == "standalone" {
		t.Fatalf("the restarted server %d: mode %q, %v", leader, mode, err)
	}
	if err := e.Kill(len(e.Addrs())); err == nil {
		t.Fatal("Kill of a server that does not exist: no error")
	}
}
