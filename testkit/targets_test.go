package testkit

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// TestTargetVerbs checks the fault verbs' contract on every target: what
// the Conn sees, and what happens to its session and its ephemerals.
func TestTargetVerbs(t *testing.T) { ForEachTarget(t, targetVerbs) }

func targetVerbs(t *testing.T, tg Target) {
	{
		ctx := t.Context()
		c, other := tg.Connect(t), tg.Connect(t)
		if c.State() != zk.StateConnected {
			t.Fatalf("Connect returned a conn in state %v", c.State())
		}
		if _, err := c.Create(ctx, "/dir", nil, zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		eph, err := c.Create(ctx, "/dir/e", nil, zk.ModeEphemeral)
		if err != nil {
			t.Fatal(err)
		}
		sid := c.SessionID()

		t.Run("disconnect and reconnect keep the session", func(t *testing.T) {
			w := watchStates(c)
			defer w.stop()
			tg.Disconnect(t, c)
			if c.State() != zk.StateSuspended {
				t.Fatalf("after Disconnect: %v", c.State())
			}
			pending := make(chan error, 1)
			go func() { _, err := c.Create(ctx, "/dir/during", nil, zk.ModePersistent); pending <- err }()
			tg.Reconnect(t, c)
			w.await(t, "test", zk.StateSuspended, zk.StateReconnected)
			if c.SessionID() != sid {
				t.Fatalf("session %x -> %x", sid, c.SessionID())
			}
			if err := <-pending; err != nil {
				t.Fatalf("a create sent while disconnected: %v", err)
			}
			if _, ok, err := other.Exists(ctx, eph); err != nil || !ok {
				t.Fatalf("the ephemeral after a reconnect: exists=%v, %v", ok, err)
			}
		})

		t.Run("lost reply", func(t *testing.T) {
			tg.LoseNextReply(t, c, OpCreate, "/dir/lost")
			_, err := c.Create(ctx, "/dir/lost", nil, zk.ModePersistent)
			if !errors.Is(err, zk.ErrConnectionLoss) {
				t.Fatalf("create with a lost reply: %v", err)
			}
			if _, ok, err := other.Exists(ctx, "/dir/lost"); err != nil || !ok {
				t.Fatalf("the create whose reply was lost was not applied: %v, %v", ok, err)
			}
			if _, _, err := c.Exists(ctx, "/dir/lost"); err != nil {
				t.Fatalf("after the lost reply: %v", err)
			}
			if c.SessionID() != sid {
				t.Fatalf("session %x -> %x", sid, c.SessionID())
			}
		})

		t.Run("held reply", func(t *testing.T) {
			f := tg.HoldNextReply(t, c, OpSet, "/dir")
			done := make(chan error, 1)
			go func() { _, err := c.Set(ctx, "/dir", []byte("v"), zk.AnyVersion); done <- err }()
			select {
			case <-f.Fired():
			case <-time.After(10 * time.Second):
				t.Fatal("the held set was not applied")
			}
			if data, _, err := other.Get(ctx, "/dir"); err != nil || string(data) != "v" {
				t.Fatalf("held set not visible to another session: %q, %v", data, err)
			}
			select {
			case err := <-done:
				t.Fatalf("the held set returned: %v", err)
			default:
			}
			f.Release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})

		t.Run("expire", func(t *testing.T) {
			w := watchStates(c)
			defer w.stop()
			t0 := time.Now()
			tg.Expire(t, c)
			t.Logf("expired in %v", time.Since(t0))
			w.await(t, "test", zk.StateLost, zk.StateConnected)
			if c.SessionID() == sid || c.SessionID() == 0 {
				t.Fatalf("session id after expiry: %x (was %x)", c.SessionID(), sid)
			}
			if _, ok, err := other.Exists(ctx, eph); err != nil || ok {
				t.Fatalf("the old session's ephemeral: exists=%v, %v", ok, err)
			}
			if _, err := c.Create(ctx, eph, nil, zk.ModeEphemeral); err != nil {
				t.Fatalf("the new session: %v", err)
			}
		})
	}
}

// TestForEachTargetEmptiesTheTree: each zk subtest starts on an empty tree,
// like a fresh simulator.
func TestForEachTargetEmptiesTheTree(t *testing.T) {
	for range 2 {
		ForEachTarget(t, func(t *testing.T, tg Target) {
			c := tg.Connect(t)
			kids, _, err := c.Children(t.Context(), "/")
			if err != nil {
				t.Fatal(err)
			}
			if len(kids) != 1 || kids[0] != "zookeeper" {
				t.Fatalf("the tree is not empty: / has %v", kids)
			}
			if _, err := c.Create(t.Context(), "/left/over", nil, zk.ModePersistent); !errors.Is(err, zk.ErrNoNode) {
				t.Fatal(err)
			}
			for _, p := range []string{"/left", "/left/over", "/left/over/deep"} {
				if _, err := c.Create(t.Context(), p, nil, zk.ModePersistent); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
