package lock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// goneWithin bounds how long after the reconnect the closed participant's
// node may take to go: one round trip of the connection's janitor, with
// room for a loaded machine. Without the janitor the node stays as long as
// its session lives, which is for the rest of the test.
const goneWithin = 2 * time.Second

// TestCloseDuringDisconnect closes a participant while its connection is
// down, holding, waiting behind another holder, or with its create's reply
// not yet come. Close returns ErrCleanupPending within its close timeout;
// while the connection is down the node stays (its session lives); once
// the same session is back, the connection deletes it by itself, within
// goneWithin, and another participant gets the lock.
func TestCloseDuringDisconnect(t *testing.T) {
	type scene struct {
		ctx   context.Context
		t     *testing.T
		tg    testkit.Target
		dir   string
		a, b  *lock.Lock // a is closed while its connection ca is down
		ca    zk.Conn
		other zk.Conn // b's connection
	}
	for _, tc := range []struct {
		name string
		// setup brings a where it is closed, and returns the other
		// participants' nodes: those that stay after a's cleanup.
		setup func(s *scene) []string
		// proceed is another participant getting the lock afterwards.
		proceed func(s *scene)
	}{
		{"holding", func(s *scene) []string {
			if _, err := s.a.Acquire(s.ctx); err != nil {
				s.t.Fatal(err)
			}
			return nil
		}, func(s *scene) {
			if _, err := s.b.Acquire(s.ctx); err != nil {
				s.t.Fatal(err)
			}
		}},
		{"waiting", func(s *scene) []string {
			g, err := s.b.Acquire(s.ctx)
			if err != nil {
				s.t.Fatal(err)
			}
			sub := s.a.Subscribe()
			defer sub.Close()
			res := acquireAsync(s.ctx, s.a)
			testkit.WaitEvent(s.t, sub, events.ReadyStart)
			s.t.Cleanup(func() {
				if r := <-res; !errors.Is(r.err, lock.ErrClosed) {
					s.t.Errorf("a's Acquire ended with %v, want ErrClosed", r.err)
				}
			})
			return []string{zk.Base(g.Node())}
		}, func(s *scene) {
			// b goes to the back of the queue: with a's node left, it
			// would wait behind it.
			if err := s.b.Release(s.ctx); err != nil {
				s.t.Fatal(err)
			}
			if _, err := s.b.Acquire(s.ctx); err != nil {
				s.t.Fatal(err)
			}
		}},
		{"create in flight", func(s *scene) []string {
			ensureDir(s.t, s.other, s.dir) // the create succeeds at once
			f := s.tg.HoldNextReply(s.t, s.ca, testkit.OpCreate, s.dir+"/_c_")
			res := acquireAsync(s.ctx, s.a)
			<-f.Fired()
			s.t.Cleanup(func() {
				if r := <-res; !errors.Is(r.err, lock.ErrClosed) {
					s.t.Errorf("a's Acquire ended with %v, want ErrClosed", r.err)
				}
			})
			return nil
		}, func(s *scene) {
			if _, err := s.b.Acquire(s.ctx); err != nil {
				s.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
				const timeout = 200 * time.Millisecond
				s := &scene{ctx: ctxT(t), t: t, tg: tg, dir: "/cleanup/lock"}
				s.ca, s.other = tg.Connect(t), tg.Connect(t)
				s.a = newLock(t, s.ca, s.dir, lock.WithCloseTimeout(timeout))
				s.b = newLock(t, s.other, s.dir)
				others := tc.setup(s)
				tg.Disconnect(t, s.ca)
				start := time.Now()
				err := s.a.Close()
				if took := time.Since(start); took > timeout+time.Second {
					t.Errorf("Close took %v with a %v close timeout", took, timeout)
				}
				if !errors.Is(err, lock.ErrCleanupPending) {
					t.Fatalf("Close during a disconnect = %v, want ErrCleanupPending", err)
				}
				if err2 := s.a.Close(); err2 != err {
					t.Errorf("second Close = %v, want the first one's %v", err2, err)
				}
				if kids := children(t, s.other, s.dir); len(kids) != len(others)+1 {
					t.Fatalf("while disconnected a's node stays (its session lives): %v", kids)
				}
				tg.Reconnect(t, s.ca)
				back := time.Now()
				eventually(t, s.other, s.dir, "a's node deleted after the reconnect", func(kids []string) bool {
					return slices.Equal(kids, others)
				})
				if took := time.Since(back); took > goneWithin {
					t.Errorf("a's node went %v after the reconnect, want within %v", took, goneWithin)
				}
				tc.proceed(s)
			})
		})
	}
}

// TestCloseDuringDisconnectThenConnClosed: closing the connection ends the
// deletes it still owed with the session (the server deletes the node),
// and the connection's janitor with them (TestMain's goleak check).
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
		b := newLock(t, other, dir)
		if _, err := b.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCloseDuringDisconnectThenExpiry: a session that expires before it
// reconnects takes the node with it; the janitor gives up the delete, and
// the connection's new session owes nothing.
func TestCloseDuringDisconnectThenExpiry(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const dir = "/cleanup/expired"
		c, other := tg.Connect(t), tg.Connect(t)
		a := newLock(t, c, dir, lock.WithCloseTimeout(100*time.Millisecond))
		if _, err := a.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		tg.Disconnect(t, c)
		if err := a.Close(); !errors.Is(err, lock.ErrCleanupPending) {
			t.Fatalf("Close = %v, want ErrCleanupPending", err)
		}
		tg.Expire(t, c)
		b := newLock(t, other, dir)
		if _, err := b.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		// The new session's lock works too: nothing of the old one is in
		// its way.
		a2 := newLock(t, c, dir)
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a2.Acquire(ctx); err != nil {
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
