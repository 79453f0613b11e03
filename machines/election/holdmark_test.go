package election_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// nodeGoesAtTheMarkConn deletes the new leader's node (through other)
// right after its first hold-mark write found the marks' directory
// missing: the term ends between that write and the next.
type nodeGoesAtTheMarkConn struct {
	zk.Conn
	other zk.Conn
	once  sync.Once
}

func (c *nodeGoesAtTheMarkConn) Multi(ctx context.Context, ops ...zk.Op) ([]zk.OpResult, error) {
	res, err := c.Conn.Multi(ctx, ops...)
	check, isCheck := ops[0].(*zk.CheckOp)
	mark, isCreate := ops[len(ops)-1].(*zk.CreateOp)
	if isCheck && isCreate && strings.Contains(mark.Path, ".held/") && len(res) == len(ops) && errors.Is(res[len(res)-1].Err, zk.ErrNoNode) {
		c.once.Do(func() {
			if err := c.other.Delete(ctx, check.Path, zk.AnyVersion); err != nil {
				panic(err)
			}
		})
	}
	return res, err
}

// A hold mark is made with its directory in one write: a term that ends
// between finding the directory missing and making the mark leaves no
// directory behind. (Made on its own first, an empty container that never
// had a child is never reaped by the server.)
func TestNoHoldMarkDirLeftWhenTheTermEndsAtItsMark(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		other := tg.Connect(t)
		c := &nodeGoesAtTheMarkConn{Conn: tg.Connect(t), other: other}
		e := newElection(t, c, "/marks/e", "a")
		if term, err := e.Campaign(ctx); err == nil {
			<-term.Lost()
		}
		e.Close()
		if _, ok, err := other.Exists(ctx, "/marks/e.held"); err != nil || ok {
			t.Fatalf("the hold marks' directory: exists %v (%v), want none left", ok, err)
		}
	})
}
