package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// WatchDeletion on a missing node says so and leaves no watch; on a node
// that is there, its watch fires on the deletion.
func TestWatchDeletion(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c := tg.Connect(t)
		const node = "/watchdeletion"
		if ok, w, err := WatchDeletion(ctx, c, node); ok || w != nil || err != nil {
			t.Fatalf("a missing node: %t, %v, %v", ok, w, err)
		}
		if ws := testkit.WatchedPaths(t, tg, c); len(ws) != 0 {
			t.Fatalf("a missing node left watches on %v", ws)
		}
		if _, err := c.Create(ctx, node, nil, zk.ModePersistent); err != nil {
			t.Fatal(err)
		}
		ok, w, err := WatchDeletion(ctx, c, node)
		if !ok || w == nil || err != nil {
			t.Fatalf("a node that is there: %t, %v, %v", ok, w, err)
		}
		if err := c.Delete(ctx, node, zk.AnyVersion); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w:
			if ev.Type != zk.EventNodeDeleted {
				t.Fatalf("event %v, want the deletion", ev)
			}
		case <-ctx.Done():
			t.Fatal("no event for the deletion")
		}
	})
}
