package contention_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/contention"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// lateMarkConn runs a waiter's watch on the mark of the node ahead late:
// ExistsW of that mark waits until open is closed. watched is closed once
// the node's own watch (ChildrenW) is set.
type lateMarkConn struct {
	zk.Conn
	ahead   string
	open    chan struct{}
	watched chan struct{}
}

func (c *lateMarkConn) ExistsW(ctx context.Context, path string) (zk.Stat, bool, <-chan zk.WatchEvent, error) {
	if path == contention.ReleaseMark(c.ahead) {
		<-c.open
	}
	return c.Conn.ExistsW(ctx, path)
}

func (c *lateMarkConn) ChildrenW(ctx context.Context, path string) ([]string, zk.Stat, <-chan zk.WatchEvent, error) {
	names, st, w, err := c.Conn.ChildrenW(ctx, path)
	if path == c.ahead {
		close(c.watched)
	}
	return names, st, w, err
}

// A waiter whose watch on the mark of the node ahead is set only after
// that node was released (mark made and gone), and which gives up
// meanwhile, leaves no watch behind: its node goes once the watch's reply
// is in, firing that mark. (The reply of a term that had ended was
// dropped: the mark's watch waited for the session's end.)
func TestNoMarkWatchLeftWhenSetLate(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := testCtx(t)
		const dir = "/preds/late"
		other := tg.Connect(t)
		if err := zk.EnsurePath(ctx, other, dir, zk.ModeContainer); err != nil {
			t.Fatal(err)
		}
		ahead, err := other.Create(ctx, dir+"/_c_"+uuid.NewString()+"-lock-", nil, zk.ModeEphemeralSequential)
		if err != nil {
			t.Fatal(err)
		}
		c := &lateMarkConn{Conn: tg.Connect(t), ahead: ahead, open: make(chan struct{}), watched: make(chan struct{})}
		w := newContender(t, c, dir, []string{"lock-"}, contention.Exclusive())
		wctx, giveUp := context.WithCancel(ctx)
		got := w.acquire(wctx, "")
		select {
		case <-c.watched:
		case <-ctx.Done():
			t.Fatal("the waiter set no watch on the node ahead")
		}
		// Released as a holder releases: its mark made and deleted with it.
		mark := contention.ReleaseMark(ahead)
		if _, err := other.Multi(ctx, &zk.CreateOp{Path: mark}, &zk.DeleteOp{Path: mark, Version: zk.AnyVersion},
			&zk.DeleteOp{Path: ahead, Version: zk.AnyVersion}); err != nil {
			t.Fatal(err)
		}
		giveUp()
		if r := <-got; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Acquire after giving up: %v", r.err)
		}
		close(c.open)
		testkit.WaitEvent(t, w.sub, events.StopComplete)
		if ws := testkit.WatchedPaths(t, tg, c.Conn); len(ws) != 0 {
			t.Errorf("the waiter's session still watches %v", ws)
		}
	})
}
