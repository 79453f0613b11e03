package twophase

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// writeCounter counts the writes sent through it.
type writeCounter struct {
	zk.Conn
	writes int
}

func (w *writeCounter) Delete(ctx context.Context, path string, version int32) error {
	w.writes++
	return w.Conn.Delete(ctx, path, version)
}

func (w *writeCounter) Multi(ctx context.Context, ops ...zk.Op) ([]zk.OpResult, error) {
	w.writes++
	return w.Conn.Multi(ctx, ops...)
}

// A finished transaction goes in one write: its votes, its votes
// directory, its decision, its coordinator node and itself. One with a
// node the listing did not expect (here a child under the decision) still
// goes, node by node, and one already gone is no error.
func TestDeleteTxInOneWrite(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx, c, p, mk := onTarget(t, tg, "/app/2pc-delete")
		for _, tx := range []string{"plain", "odd"} {
			mk(p.tx(tx), zk.ModePersistent)
			mk(p.votes(tx), zk.ModePersistent)
			mk(p.vote(tx, "a"), zk.ModePersistent)
			mk(p.vote(tx, "b"), zk.ModePersistent)
			mk(p.decision(tx), zk.ModePersistent)
			mk(p.coordinator(tx), zk.ModeEphemeral)
		}
		mk(p.decision("odd")+"/extra", zk.ModePersistent)
		for tx, maxWrites := range map[string]int{"plain": 1, "odd": 100, "never-made": 0} {
			w := &writeCounter{Conn: c}
			if err := deleteTx(ctx, w, p, tx); err != nil {
				t.Fatalf("%s: %v", tx, err)
			}
			if w.writes > maxWrites {
				t.Errorf("%s: deleted in %d writes, want at most %d", tx, w.writes, maxWrites)
			}
			if _, ok, err := c.Exists(ctx, p.tx(tx)); err != nil || ok {
				t.Fatalf("%s: still there after deleteTx (%v)", tx, err)
			}
		}
	})
}
