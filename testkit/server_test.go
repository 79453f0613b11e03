package testkit

import (
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

func TestStartServerStopStart(t *testing.T) {
	t0 := time.Now()
	s := StartServer(t)
	t.Logf("standalone server on %s serving after %v", s.Addr(), time.Since(t0))
	ctx := t.Context()
	reply, err := FourLetterWord(ctx, s.Addr(), "srvr")
	if err != nil || !strings.Contains(reply, "Mode: standalone") {
		t.Fatalf("srvr = %q, %v", reply, err)
	}
	c, err := zk.Connect(ctx, []string{s.Addr()}, zk.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := watchStates(c)
	defer w.stop()
	if _, err := c.Create(ctx, "/e", []byte("kept"), zk.ModeEphemeral); err != nil {
		t.Fatal(err)
	}

	t0 = time.Now()
	s.Stop()
	t.Logf("stopped in %v", time.Since(t0))
	w.await(t, "Stop", zk.StateSuspended)
	if _, err := FourLetterWord(ctx, s.Addr(), "srvr"); err == nil {
		t.Fatal("srvr answered after Stop")
	}

	t0 = time.Now()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("started again in %v", time.Since(t0))
	// The session outlived the restart: it was in the transaction log. A
	// connection made while the server loads its database can go
	// unanswered; the adapter gives up on it after a third of the session.
	w.await(t, "Start", zk.StateReconnected)
	t.Logf("reconnected %v after the restart", time.Since(t0))
	if data, _, err := c.Get(ctx, "/e"); err != nil || string(data) != "kept" {
		t.Fatalf("after the restart Get = %q, %v", data, err)
	}
}

func TestFailOrSkip(t *testing.T) {
	t.Setenv("ZK_REQUIRED", "")
	var skipped bool
	t.Run("not installed", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		failOrSkip(t, ErrNotInstalled)
	})
	if !skipped {
		t.Fatal("a missing ZooKeeper did not skip without ZK_REQUIRED")
	}
}
