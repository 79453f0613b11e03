package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/internal/lagging"
	"github.com/zkrecipes/zkrecipes/machines/queue"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// After a lost reply, a consumer may read from a server that has not yet
// applied its write (see package lagging): the check that looks for the
// write syncs first. Before it did, a chaos run on the ensemble lost an
// item: the ack's multi came to be applied between the check's read of
// the item (there) and of its claim (gone), and the Ack said ErrClaimLost
// for an item that was gone for good.

// An ack whose multi is applied only after the consumer starts looking
// returns nil, and the item is gone.
func TestAckReplyLostReadFromALaggingServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := lagging.Wrap(tg.Connect(t))
		const path = "/queue/lagging/ack"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a")
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := c.LoseNext(lagging.OpMulti, path)
		if err := it.Ack(ctx); err != nil {
			t.Fatalf("Ack whose multi was applied late = %v, want nil", err)
		}
		<-w.Applied()
		if w.Err() != nil {
			t.Fatalf("the late multi: %v", w.Err())
		}
		nothingLeft(t, c, path)
	})
}

// A take whose delete is applied only after the consumer starts looking
// still returns the item (ErrUncertain on its TAKEN event); it is not
// taken for another consumer's and dropped.
func TestTakeDeleteReplyLostReadFromALaggingServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := lagging.Wrap(tg.Connect(t))
		const path = "/queue/lagging/delete"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a", "b")
		sub := q.Subscribe()
		defer sub.Close()
		w := c.LoseNext(lagging.OpDelete, path+"/qn-")
		if got := take(t, ctx, q); got != "a" {
			t.Fatalf("Take = %q, want a (the item whose delete was applied late)", got)
		}
		<-w.Applied()
		ev := testkit.WaitEvent(t, sub, events.Taken)
		if !errors.Is(ev.Err, queue.ErrUncertain) {
			t.Fatalf("TAKEN after a late delete: err %v, want ErrUncertain", ev.Err)
		}
		if got := take(t, ctx, q); got != "b" {
			t.Fatalf("next Take = %q, want b", got)
		}
		nothingLeft(t, c, path)
	})
}

// A claim whose create is applied only after the consumer starts looking
// is found ours and delivered; it is not taken for another consumer's
// claim, which would hold the item until our session ended.
func TestClaimReplyLostReadFromALaggingServer(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		c := lagging.Wrap(tg.Connect(t))
		const path = "/queue/lagging/claim"
		q := newQueue(t, c, path)
		offer(t, ctx, q, "a")
		w := c.LoseNext(lagging.OpCreate, path+"/qn-")
		it, err := q.TakeItem(ctx)
		if err != nil || string(it.Data()) != "a" {
			t.Fatalf("TakeItem = %v, %v", it, err)
		}
		<-w.Applied()
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, c, path)
	})
}

// landsLate is a Conn whose first write of kind op under prefix answers a
// connection loss unsent and lands only just before the next such write
// goes out: a request applied late, after the reads that looked for it
// (as ZooKeeper seems to do, now and then, with a request on a connection
// the client has left, after the reads on its next connection to the same
// server: a chaos run on the ensemble lost an item so).
type landsLate struct {
	zk.Conn
	op     string // "create", "delete" or "multi"
	prefix string

	mu     sync.Mutex
	held   func() error
	landed chan error
}

// write holds the first matching write, and lands it before the next.
func (l *landsLate) write(op, path string, send func() error) error {
	l.mu.Lock()
	switch {
	case op != l.op || !strings.HasPrefix(path, l.prefix):
		l.mu.Unlock()
	case l.landed == nil:
		l.held, l.landed = send, make(chan error, 1)
		l.mu.Unlock()
		return zk.ErrConnectionLoss
	case l.held != nil:
		held := l.held
		l.held = nil
		l.mu.Unlock()
		l.landed <- held()
	default:
		l.mu.Unlock()
	}
	return send()
}

func (l *landsLate) Create(ctx context.Context, path string, data []byte, mode zk.CreateMode) (name string, err error) {
	err = l.write("create", path, func() (err error) { name, err = l.Conn.Create(ctx, path, data, mode); return err })
	return name, err
}

func (l *landsLate) Delete(ctx context.Context, path string, version int32) error {
	return l.write("delete", path, func() error { return l.Conn.Delete(ctx, path, version) })
}

func (l *landsLate) Multi(ctx context.Context, ops ...zk.Op) (res []zk.OpResult, err error) {
	path := ""
	if d, ok := ops[0].(*zk.DeleteOp); ok {
		path = d.Path
	}
	err = l.write("multi", path, func() (err error) { res, err = l.Conn.Multi(ctx, ops...); return err })
	return res, err
}

// landedLate fails t unless the held write was sent again and landed.
func (l *landsLate) landedLate(t *testing.T) {
	t.Helper()
	select {
	case err := <-l.landed:
		if err != nil {
			t.Fatalf("the late %s: %v", l.op, err)
		}
	default:
		t.Fatalf("the %s was not made again", l.op)
	}
}

// lateQueue offers an item on path, and returns a queue on a connection
// whose first write of kind op on it lands late (see landsLate).
func lateQueue(t *testing.T, tg testkit.Target, path, op string) (context.Context, *landsLate, *queue.Queue) {
	ctx := ctxT(t)
	offer(t, ctx, newQueue(t, tg.Connect(t), path), "a") // not a write of the late connection's
	c := &landsLate{Conn: tg.Connect(t), op: op, prefix: path + "/qn-"}
	return ctx, c, newQueue(t, c, path)
}

// within makes the call named what, whose write lands late, giving it 5 s
// (it waited for good before the fix), and checks that the late write was
// made again.
func within[T any](t *testing.T, ctx context.Context, c *landsLate, what string, call func(context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := call(ctx)
	if err != nil {
		t.Fatalf("%s whose first %s landed late: %v", what, c.op, err)
	}
	c.landedLate(t)
	return v
}

// An ack whose first multi lands after the check that found the claim
// still ours, just before the ack is sent again: the second multi finds
// the claim gone. The item went with the first, so the Ack says nil, not
// ErrClaimLost (which promises the item again).
func TestAckLandingAfterItsCheck(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const path = "/queue/late/ack"
		ctx, c, q := lateQueue(t, tg, path, "multi")
		it, err := q.TakeItem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		within(t, ctx, c, "Ack", func(ctx context.Context) (struct{}, error) { return struct{}{}, it.Ack(ctx) })
		nothingLeft(t, c, path)
	})
}

// A claim whose first create lands after the check that found no claim,
// just before it is made again: the second create finds the first. It is
// ours, so the item is delivered, not waited on as another's claim until
// our session ends.
func TestClaimLandingAfterItsCheck(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const path = "/queue/late/claim"
		ctx, c, q := lateQueue(t, tg, path, "create")
		it := within(t, ctx, c, "TakeItem", q.TakeItem)
		if string(it.Data()) != "a" {
			t.Fatalf("TakeItem = %q, want a", it.Data())
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, c, path)
	})
}

// A take whose first delete lands after the check that found the item
// there, just before it is made again: the second delete finds nothing.
// The item may be gone with our first delete, so it is delivered (its
// TAKEN event says ErrUncertain), not dropped as another consumer's.
func TestTakeDeleteLandingAfterItsCheck(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		const path = "/queue/late/take"
		_, c, q := lateQueue(t, tg, path, "delete")
		if data := within(t, t.Context(), c, "Take", q.Take); string(data) != "a" {
			t.Fatalf("Take = %q, want a", data)
		}
		nothingLeft(t, c, path)
	})
}
