package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A claim asked on one session goes out on the next: go-zookeeper sends
// the requests it had queued when a session ended on the session that
// comes after, and the claim's reply can reach the consumer before the
// news of that session. The claim is ours, on our live session: the item
// is delivered with it, and its Ack removes the item. (The consumer once
// recorded such a claim under the session that ended, forgot it with
// that session, and waited on the item as another consumer's for as long
// as its own session lived: a chaos run and TestConsumeThroughSessionExpiry
// left items so.)
func TestClaimMadeOnTheNextSession(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		const path = "/queue/nextsession/claim"
		offer(t, ctx, newQueue(t, tg.Connect(t), path), "a")
		under := tg.Connect(t)
		c := &nextSessionConn{heldSessionConn: heldSessionConn{Conn: under}, expire: func() { tg.Expire(t, under) }, released: make(chan struct{})}
		q := newQueue(t, c, path)
		sub := q.Subscribe()
		defer sub.Close()
		it, err := q.TakeItem(ctx)
		if err != nil || string(it.Data()) != "a" {
			t.Fatalf("TakeItem = %v, %v", it, err)
		}
		select {
		case <-c.released:
		case <-ctx.Done():
			t.Fatal("the claim was not made on the next session")
		}
		testkit.WaitEvent(t, sub, events.Lost) // the session's end is known
		if err := it.Ack(ctx); err != nil {
			t.Fatalf("Ack of the claim made on the next session: %v", err)
		}
		nothingLeft(t, under, path)
	})
}

// nextSessionConn is a zk.Conn whose first claim is made on the next
// session: the session is expired first, then the claim is created on the
// new one, and the session events reach the subscribers only once the
// claim has answered.
type nextSessionConn struct {
	heldSessionConn
	expire   func()
	released chan struct{} // closed once the claim was made and the events held for it delivered

	once sync.Once // the first claim
}

func (c *nextSessionConn) Multi(ctx context.Context, ops ...zk.Op) ([]zk.OpResult, error) {
	first := false
	if op, ok := ops[0].(*zk.CreateOp); ok && strings.HasSuffix(op.Path, "/"+queue.ClaimName) {
		c.once.Do(func() { first = true })
	}
	if !first {
		return c.Conn.Multi(ctx, ops...)
	}
	c.hold()
	c.expire()
	res, err := c.Conn.Multi(ctx, ops...)
	// The reply is posted to the consumer as this returns; the news of
	// the session after it.
	time.AfterFunc(100*time.Millisecond, func() {
		c.release()
		close(c.released)
	})
	return res, err
}

// An Ack asked after the consumer's session ended, but before the
// consumer heard of it, while go-zookeeper is already on the next
// session: the claim went with the session, and another consumer holds
// the item since. The Ack's multi goes out on the next session and fails
// there, on the item's version the other claim bumped: it says
// ErrClaimLost, and the other consumer's claim and Ack stand (without the
// version it deleted the other's claim and the item, and said nil). With
// one item, and with a next item ("b") the other consumer takes after.
func TestLateAckOnTheNextSessionFailsOnTheServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		for _, items := range [][]string{{"a"}, {"a", "b"}} {
			ctx := ctxT(t)
			path := "/queue/nextsession/ack" + fmt.Sprint(len(items))
			offer(t, ctx, newQueue(t, tg.Connect(t), path), items...)
			under := tg.Connect(t)
			c := &heldSessionConn{Conn: under}
			a := newQueue(t, c, path)
			it, err := a.TakeItem(ctx)
			if err != nil || string(it.Data()) != "a" {
				t.Fatalf("TakeItem = %v, %v", it, err)
			}
			c.hold()
			tg.Expire(t, under) // the client is on a new session; the consumer does not know
			b := newQueue(t, tg.Connect(t), path)
			other, err := b.TakeItem(ctx)
			if err != nil || string(other.Data()) != "a" {
				t.Fatalf("the other consumer's TakeItem = %v, %v; want a, its claim gone with the session", other, err)
			}
			if err := it.Ack(ctx); !errors.Is(err, queue.ErrClaimLost) {
				t.Fatalf("Ack after the session ended = %v, want ErrClaimLost", err)
			}
			if err := other.Ack(ctx); err != nil {
				t.Fatalf("the other consumer's Ack = %v, want nil: its claim stands", err)
			}
			c.release()
			for _, want := range items[1:] {
				if it, err := b.TakeItem(ctx); err != nil || string(it.Data()) != want {
					t.Fatalf("TakeItem = %v, %v; want %s", it, err, want)
				} else if err := it.Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
			a.Close()
			b.Close()
			nothingLeft(t, under, path)
		}
	})
}

// heldSessionConn is a zk.Conn whose session events reach the subscribers
// only after release, once hold was called.
type heldSessionConn struct {
	zk.Conn
	mu      sync.Mutex
	holding bool
	held    []func()
}

func (c *heldSessionConn) Subscribe(fn func(zk.SessionEvent)) (cancel func()) {
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

func (c *heldSessionConn) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = true
}

func (c *heldSessionConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, deliver := range c.held {
		deliver()
	}
	c.held, c.holding = nil, false
}
