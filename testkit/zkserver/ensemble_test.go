package zkserver

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// TestEnsembleSurvivesLosingAMember kills the leader, then a follower, and
// restarts both (the follower without its data), while one client keeps
// its session and its ephemeral.
func TestEnsembleSurvivesLosingAMember(t *testing.T) {
	t0 := time.Now()
	e, err := LaunchEnsemble(t.Context(), WithQuickJIT(true))
	need(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			for i, addr := range e.Addrs() {
				t.Logf("server %d (%s) log tail:\n%s", i, addr, e.LogTail(i, 25))
			}
		}
		e.Close()
	})
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

// TestLaunchEnsembleRefusesServerOptions: an ensemble has no one port or
// data directory to give.
func TestLaunchEnsembleRefusesServerOptions(t *testing.T) {
	for _, o := range []Option{WithPort(2181), WithDataDir(t.TempDir())} {
		if _, err := LaunchEnsemble(t.Context(), o); !errors.Is(err, zkrecipes.ErrInvalidOption) {
			t.Fatalf("LaunchEnsemble: %v, want ErrInvalidOption", err)
		}
	}
}
