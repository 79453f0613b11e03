package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestCloseDuringDisconnect closes a holder while its connection is down:
// Close returns ErrCleanupPending within its timeout, and once the same
// session is back the connection deletes the node by itself, so that
// another participant gets the lock.
func TestCloseDuringDisconnect(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const dir = "/cleanup/lock"
		c, other := tg.Connect(t), tg.Connect(t)
		const timeout = 200 * time.Millisecond
		a := newLock(t, c, dir, lock.WithCloseTimeout(timeout))
		b := newLock(t, other, dir)
		if _, err := a.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		tg.Disconnect(t, c)
		start := time.Now()
		err := a.Close()
		if took := time.Since(start); took > timeout+time.Second {
			t.Errorf("Close took %v with a %v close timeout", took, timeout)
		}
		if !errors.Is(err, lock.ErrCleanupPending) {
			t.Fatalf("Close during a disconnect = %v, want ErrCleanupPending", err)
		}
		if err2 := a.Close(); err2 != err {
			t.Errorf("second Close = %v, want the first one's %v", err2, err)
		}
		if kids := children(t, other, dir); len(kids) != 1 {
			t.Fatalf("while disconnected the node stays (its session lives): %v", kids)
		}
		tg.Reconnect(t, c)
		back := time.Now()
		eventually(t, other, dir, "the closed holder's node deleted after the reconnect", func(kids []string) bool { return len(kids) == 0 })
		t.Logf("node gone %v after the reconnect", time.Since(back))
		if _, err := b.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCloseDuringDisconnectThenConnClosed: closing the connection ends the
// deletes it still owed with the session (the server deletes the node).
func TestCloseDuringDisconnectThenConnClosed(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const dir = "/cleanup/connclosed"
		c, other := tg.Connect(t), tg.Connect(t)
		a := newLock(t, c, dir, lock.WithCloseTimeout(100*time.Millisecond))
		if _, err := a.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		tg.Disconnect(t, c)
		if err := a.Close(); !errors.Is(err, lock.ErrCleanupPending) {
			t.Fatalf("Close = %v, want ErrCleanupPending", err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		// TestMain's goleak check finds the janitor if it outlived the conn.
		b := newLock(t, other, dir)
		if _, err := b.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCloseTimeoutMustBePositive(t *testing.T) {
	sim := testkit.NewSim()
	c := sim.Connect()
	defer c.Close()
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := lock.New(c, "/x", lock.WithCloseTimeout(d)); !errors.Is(err, lock.ErrInvalidOption) {
			t.Errorf("WithCloseTimeout(%v): New = %v, want ErrInvalidOption", d, err)
		}
	}
}
