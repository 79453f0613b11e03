package contention_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// expiringConn is a simulator connection whose session expires right
// before the first read of a path that matches, while the session's
// changes (SUSPENDED, LOST, CONNECTED) are held back until release: the
// read runs on the new session, and its answer reaches the machine before
// LOST does, as when a request's goroutine beats the session fan-out.
type expiringConn struct {
	zk.Conn
	sim   *testkit.Sim
	match func(path string) bool

	mu      sync.Mutex
	armed   bool
	holding bool
	held    []func()
}

func (c *expiringConn) Subscribe(fn func(zk.SessionEvent)) func() {
	return c.Conn.Subscribe(func(ev zk.SessionEvent) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.holding {
			c.held = append(c.held, func() { fn(ev) })
			return
		}
		fn(ev)
	})
}

func (c *expiringConn) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = true
}

// expire ends the session, holding back its changes, if path is the one.
func (c *expiringConn) expire(path string) {
	c.mu.Lock()
	now := c.armed && c.match(path)
	if now {
		c.armed, c.holding = false, true
	}
	c.mu.Unlock()
	if now {
		c.sim.Expire(c.Conn)
	}
}

// release delivers the held session changes, in order.
func (c *expiringConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.held {
		f()
	}
	c.held, c.holding = nil, false
}

func (c *expiringConn) ChildrenW(ctx context.Context, path string) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	c.expire(path)
	return c.Conn.ChildrenW(ctx, path)
}

func (c *expiringConn) Children(ctx context.Context, path string) ([]string, zk.Stat, error) {
	c.expire(path)
	return c.Conn.Children(ctx, path)
}

// A read that finds our node gone because our session expired (the
// server deleted it with the session), answered before LOST reaches the
// machine, ends the term with SessionLost: no one else deleted the node.
// Both reads that can find it gone: DETERMINE's read of our own node, and
// a writer's listing after the writer ahead of it went with no mark. The
// read/write property test failed so under load ("lock node deleted by
// another client").
func TestOwnNodeGoneWithTheSessionIsSessionLost(t *testing.T) {
	const dir = "/app/rw"
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		// ahead: a writer holding before ours, deleted plainly once
		// ours waits, so that ours lists again.
		ahead bool
		match func(path string) bool
	}{
		{"own-node read", false, func(path string) bool { return strings.HasPrefix(path, dir+"/_c_") }},
		{"writer's listing", true, func(path string) bool { return path == dir }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := testkit.NewSim()
			t.Cleanup(sim.Close)
			other := sim.Connect()
			if tc.ahead {
				if err := zk.EnsurePath(ctx, other, dir, zk.ModeContainer); err != nil {
					t.Fatal(err)
				}
			}
			ahead := ""
			if tc.ahead {
				var err error
				if ahead, err = other.Create(ctx, dir+"/_c_"+uuid.NewString()+"-"+writeM, nil, zk.ModeEphemeralSequential); err != nil {
					t.Fatal(err)
				}
			}
			c := &expiringConn{Conn: sim.Connect(), sim: sim, match: tc.match}
			w := newContender(t, c, dir, []string{writeM, readM}, contention.ReadWrite(readM))
			if !tc.ahead {
				c.arm() // the next read of our node
			}
			got := w.acquire(ctx, "")
			if tc.ahead {
				testkit.WaitEvent(t, w.sub, events.ReadyStart)
				c.arm() // the listing that follows the plain delete
				if err := other.Delete(ctx, ahead, zk.AnyVersion); err != nil {
					t.Fatal(err)
				}
			}
			r := <-got
			c.release()
			if !errors.Is(r.err, errs.SessionLost) {
				t.Fatalf("Acquire = %v, want the session lost", r.err)
			}
		})
	}
}
